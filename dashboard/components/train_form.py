"""The Train page's settings: data set, model and a form pre-filled from the model's recipe for that data.

Picking a data set preselects its recommended model; picking a model or a data set re-fills every
training field from `spec.recipe(info)`. The fields stay editable, and edits survive reruns and visits
to other pages (Streamlit forgets the value of a widget its page does not draw, so the form keeps a
copy) until the model or the data set changes.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import streamlit as st

from xaidash.dashboard.errors import show_notes
from xaidash.data.catalogue import dataset_status
from xaidash.data.errors import DatasetError, XaidashError
from xaidash.data.formatting import percent, r2_text
from xaidash.data.modalities import modality_of
from xaidash.data.notes import collect_notes
from xaidash.data.paths import data_root, offline
from xaidash.data.registry import DatasetInfo, get_source, list_datasets, own_data_forms
from xaidash.models.device import device_choices
from xaidash.models.registry import ModelSpec, models_for, recommended_model
from xaidash.models.training.compiled import COMPILE_MODES
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.distributed import process_choices
from xaidash.models.training.recipes import (
    AUGMENTATIONS,
    OPTIMIZERS,
    SCHEDULES,
    Augment,
    Recipe,
    lr_note,
    scale_lr,
    scales_lr,
)

# The recipe's fields and the widgets that show them.
RECIPE_KEYS = {
    "epochs": "train_epochs",
    "batch_size": "train_batch",
    "lr": "train_lr",
    "optimizer": "train_opt",
    "schedule": "train_sched",
    "augment": "train_aug",
    "weight_decay": "train_wd",
    "label_smoothing": "train_smoothing",
    "max_train_samples": "train_max_samples",
}
# A recipe field an older Recipe lacks gets this value.
FIELD_DEFAULTS: dict[str, Any] = {"label_smoothing": 0.0, "max_train_samples": 0}
OWN = "your own data"  # the data set choice that opens a box for a name such as csv:<path>?target=<column>
OWN_KEY = "train_own_dataset"
OTHER_KEYS = (
    "train_dataset",
    "train_model",
    "train_device",
    "train_seed",
    "train_val",
    "train_nproc",
    "train_compile",
    "train_channels_last",
    OWN_KEY,
)
LR_AUTO = "train_lr_auto"  # the learning rate the form last derived from the recipe (not typed by the user)
KEPT = "train_form_kept"  # copies of the widgets' values, restored when the page is drawn again
FILLED_FOR = "train_filled_for"  # (data set, model) the recipe fields were last filled for
DATASET_SEEN = "train_dataset_seen"  # the data set the model choice was last made for
CONFIG_FIELDS = {f.name for f in fields(TrainConfig)}
LIMITS = {
    "epochs": (1, 1000),
    "batch_size": (1, 8192),
    "lr": (1e-6, 5.0),
    "weight_decay": (0.0, 1.0),
    "label_smoothing": (0.0, 0.5),
    "max_train_samples": (0, 10_000_000),
}


def restore_fields() -> None:
    """Put back the values Streamlit dropped while another page was shown."""
    for key, value in st.session_state.get(KEPT, {}).items():
        if key not in st.session_state:
            st.session_state[key] = value


def keep_fields() -> None:
    st.session_state[KEPT] = {
        k: st.session_state[k] for k in (*RECIPE_KEYS.values(), *OTHER_KEYS) if k in st.session_state
    }


def _clamp(field: str, value: Any) -> Any:
    lo, hi = LIMITS[field]
    return type(lo)(min(max(value, lo), hi))


def augmentations(info: DatasetInfo) -> tuple[Augment, ...]:
    """The training augmentations that apply to the data set's inputs (its modality declares them)."""
    declared = modality_of(info.modality).augmentations
    return tuple(a for a in AUGMENTATIONS if a in declared)


def fill_from_recipe(recipe: Recipe, info: DatasetInfo) -> None:
    """Set every recipe field's widget to the recipe's value (clamped to what the widget accepts)."""
    settings = {**FIELD_DEFAULTS, **recipe.settings()}
    for field, key in RECIPE_KEYS.items():
        value = settings[field]
        if field in LIMITS:
            value = _clamp(field, value)
        if field == "augment" and value not in augmentations(info):  # one that does not apply to these inputs
            value = "none"
        st.session_state[key] = value
    st.session_state[LR_AUTO] = st.session_state[RECIPE_KEYS["lr"]]


def rescale_lr(spec: ModelSpec, info: DatasetInfo) -> None:
    """The batch size changed: a learning rate still derived from the recipe follows it (scaled above the recipe's
    batch, the recipe's own at or below it); one the user typed stays as typed."""
    if st.session_state.get(RECIPE_KEYS["lr"]) != st.session_state.get(LR_AUTO):
        return
    recipe = spec.recipe(info)[1]
    batch, optimizer = int(st.session_state[RECIPE_KEYS["batch_size"]]), st.session_state[RECIPE_KEYS["optimizer"]]
    lr = _clamp(
        "lr", scale_lr(recipe.lr, recipe.batch_size, batch, optimizer) if scales_lr(recipe, batch) else recipe.lr
    )
    st.session_state[RECIPE_KEYS["lr"]] = st.session_state[LR_AUTO] = lr


def scaled_lr_note(spec: ModelSpec, info: DatasetInfo) -> str | None:
    """How the learning rate field was derived, when the form scaled it for another batch size."""
    recipe = spec.recipe(info)[1]
    batch, lr = st.session_state.get(RECIPE_KEYS["batch_size"]), st.session_state.get(RECIPE_KEYS["lr"])
    if batch is None or not scales_lr(recipe, int(batch)) or lr != st.session_state.get(LR_AUTO):
        return None
    return lr_note(recipe, int(batch), st.session_state[RECIPE_KEYS["optimizer"]])


def recipe_note(spec: ModelSpec, info: DatasetInfo) -> str:
    """Which recipe the form was filled from, and how well it did where it was measured."""
    key, recipe = spec.recipe(info)
    if key == "generic":
        return (
            f"No recipe for **{spec.name}** on **{info.name}**: the fields hold generic {info.modality} "
            "settings (untested). Watch the validation curve."
        )
    where = info.name if key == info.name else f"{key} data"
    options = ", ".join(f"`{k}={v}`" for k, v in recipe.model_options)
    built = f" The model is built with {options}." if options else ""
    if recipe.expected_r2 is not None:  # a number to predict: its test R²
        tested = f"tested: {r2_text(recipe.expected_r2)} on {where}"
    elif recipe.expected_acc is None:
        return f"Settings from **{spec.name}**'s recipe for {where} (not measured: watch the validation curve).{built}"
    else:
        tested = f"tested: {percent(recipe.expected_acc)} on {where}"
    return f"Settings from **{spec.name}**'s recipe for {where} ({tested}).{built}"


def own_dataset(c1: Any) -> DatasetInfo | None:
    """A data set of the user's own, by the name the command line's --dataset takes (`csv:<path>?target=...`,
    `imagefolder:<path>`): its info, or None with the one line that says what is wrong (or what to type)."""
    examples = ", ".join(own_data_forms())
    typed = c1.text_input(
        "Your data set",
        key=OWN_KEY,
        placeholder="csv:/data/people.csv?target=label&id=row_id",
        help=f"What `xaidash train --dataset` takes: {examples}. A table: csv:<path>?target=<column>, with id=, "
        "categorical=, numeric=, drop=, missing=impute|refuse, task=regression|classes and unit= (a number to "
        "predict; docs: Command line, Your own table).",
    ).strip()
    if not typed:
        c1.info(f"Type the name of your data: {examples}.", icon=":material/edit:")
        return None
    try:
        with collect_notes():  # the source's notes are shown below, in a warning box, not logged
            source = get_source(typed)
    except DatasetError as e:
        c1.error(str(e), icon=":material/error:")
        return None
    c1.caption(source.info.description)
    show_notes(c1, getattr(source, "notes", ()))
    return source.info


def choose_dataset() -> DatasetInfo | None:
    """The data set: a registered one, or one of the user's own typed by name (None until it reads)."""
    infos = list_datasets()
    status = {i.name: dataset_status(i) for i in infos}
    status[OWN] = "a path"
    names = [i.name for i in infos] + [OWN]
    if st.session_state.get("train_dataset") not in names:
        st.session_state["train_dataset"] = "shapes" if "shapes" in names else names[0]
    c1 = st.container()
    dataset = c1.selectbox("Data set", names, format_func=lambda n: f"{n} ({status[n]})", key="train_dataset")
    if dataset == OWN:
        return own_dataset(c1)
    info = get_source(dataset).info
    c1.caption(info.description)
    if info.forecast is not None:
        return forecast_choice(info, c1)
    if status[dataset] == "needs download":
        if offline():
            c1.warning(
                f"{dataset} is not under the data root `{data_root()}` and downloads are off (offline mode): "
                "copy its files there or pick a built-in data set.",
                icon=":material/cloud_off:",
            )
        else:
            c1.info(
                f"{dataset} will be downloaded to `{data_root()}` when training starts.",
                icon=":material/cloud_download:",
            )
    return info


def forecast_choice(info: DatasetInfo, c1: Any) -> DatasetInfo | None:
    """A forecast set's horizon and window, chosen in the form (its declared ones by default): the data set as
    `forecast:NAME?horizon=H&window=W` names it when they differ, one line when they cannot be read."""
    f = info.forecast
    assert f is not None
    h1, h2 = c1.columns(2)
    horizon = int(h1.number_input("Horizon (steps ahead)", 1, 512, f.horizon, key=f"train_horizon_{info.name}"))
    window = int(h2.number_input("Window (steps read)", 2, 512, f.window, key=f"train_window_{info.name}"))
    if (horizon, window) == (f.horizon, f.window):
        return info
    name = f"forecast:{info.name}?horizon={horizon}&window={window}"
    try:
        return get_source(name).info
    except XaidashError as e:
        c1.error(str(e), icon=":material/error:")
        return None


def choose_model(info: DatasetInfo) -> ModelSpec | None:
    """The model selectbox; the data set's recommended model is preselected whenever the data set changes."""
    specs = sorted(models_for(info), key=lambda s: s.pretrained)  # models trained here first: quick to try
    if not specs:
        st.warning(f"No zoo model fits {info.name}.")
        return None
    names = [s.name for s in specs]
    recommended = recommended_model(info)
    best = recommended.name if recommended is not None and recommended.name in names else names[0]
    if st.session_state.get(DATASET_SEEN) != info.name or st.session_state.get("train_model") not in names:
        st.session_state["train_model"] = best
        st.session_state[DATASET_SEEN] = info.name
    by_name = {s.name: s for s in specs}

    def label(n: str) -> str:
        tags = [t for t, on in (("recommended", n == best), ("pretrained", by_name[n].pretrained)) if on]
        return n + (f" ({', '.join(tags)})" if tags else "")

    model = st.selectbox("Model", names, key="train_model", format_func=label)
    spec = by_name[model]
    st.caption(spec.description + (f" Input: {spec.input_note}." if spec.input_note else ""))
    if note := spec.note():
        st.warning(note, icon=":material/warning:")
    return spec


def reset_to_recipe(spec: ModelSpec, info: DatasetInfo) -> None:
    fill_from_recipe(spec.recipe(info)[1], info)


def _recipe_header(info: DatasetInfo, spec: ModelSpec) -> None:
    """The recipe's note and the button that puts every field back to it (the fields filled from the recipe when
    the model or the data set changed)."""
    if st.session_state.get(FILLED_FOR) != (info.name, spec.name) or any(
        k not in st.session_state for k in RECIPE_KEYS.values()
    ):
        fill_from_recipe(spec.recipe(info)[1], info)
        st.session_state[FILLED_FOR] = (info.name, spec.name)
    n1, n2 = st.columns([5, 1], vertical_alignment="center")
    n1.markdown(recipe_note(spec, info))
    n2.button(
        "Reset to recipe",
        key="train_reset",
        on_click=reset_to_recipe,
        args=(spec, info),
        icon=":material/restart_alt:",
        help="put every field back to the recipe's value",
    )


def _main_fields(info: DatasetInfo, spec: ModelSpec) -> dict[str, Any]:
    """The first rows of the form: epochs, batch, learning rate, optimizer, schedule, augmentation, weight decay,
    device (and GPUs), with the note on a scaled learning rate; their values as the config takes them."""
    c1, c2, c3, c4 = st.columns(4)
    epochs = c1.number_input("Epochs", 1, 1000, step=1, key="train_epochs")
    batch_size = c2.number_input(
        "Batch size",
        1,
        8192,
        step=1,
        key="train_batch",
        on_change=rescale_lr,
        args=(spec, info),
        help="above the recipe's batch, a learning rate from the recipe is scaled with it (square root for "
        "adam/adamw, linear for sgd); larger batches take fewer steps, which a GPU runs faster",
    )
    lr = c3.number_input("Learning rate", 1e-6, 5.0, step=1e-4, format="%g", key="train_lr")
    optimizer = c4.selectbox("Optimizer", OPTIMIZERS, key="train_opt")
    schedule = c1.selectbox(
        "Schedule",
        SCHEDULES,
        key="train_sched",
        help="learning rate over the steps: cosine decay, one-cycle warm-up and decay, or constant",
    )
    augment = c2.selectbox(
        "Augmentation",
        augmentations(info),
        key="train_aug",
        help="random shifts by up to 2 pixels and/or horizontal flips of training images",
    )
    weight_decay = c3.number_input(
        "Weight decay", 0.0, 1.0, step=1e-3, format="%g", key="train_wd", help="L2 penalty (decoupled for AdamW)"
    )
    values: dict[str, Any] = {
        "epochs": int(epochs),
        "batch_size": int(batch_size),
        "lr": float(lr),
        "optimizer": optimizer,
        "schedule": schedule,
        "augment": augment,
        "weight_decay": float(weight_decay),
        **_device_fields(c4),
    }
    if note := scaled_lr_note(spec, info):
        st.caption(note[0].upper() + note[1:] + ".")
    return values


def _device_fields(column: Any) -> dict[str, Any]:
    """The device, and the number of GPUs when two or more CUDA GPUs are visible (one process per GPU, DDP)."""
    if "train_device" not in st.session_state:
        st.session_state["train_device"] = device_choices()[0]
    device = column.selectbox(
        "Device",
        device_choices(),
        key="train_device",
        help="auto: the first CUDA GPU, else Apple MPS, else the CPU",
    )
    nproc = 1
    if gpus := process_choices(device):
        if st.session_state.get("train_nproc") not in gpus:
            st.session_state["train_nproc"] = 1
        nproc = column.selectbox(
            "GPUs",
            gpus,
            key="train_nproc",
            help="train this run on several GPUs at once (DistributedDataParallel, one process each); "
            "the batch size stays the total over all of them and must split evenly",
        )
    return {"device": device, "nproc": int(nproc)}


def _more_fields() -> dict[str, Any]:
    """The expander's fields: label smoothing, sample cap, validation share, seed, compilation, memory layout."""
    with st.expander("More: label smoothing, sample cap, validation, seed, compilation"):
        q1, q2, q3, q4 = st.columns(4)
        st.session_state.setdefault("train_val", 0.1)
        st.session_state.setdefault("train_seed", 0)
        label_smoothing = q1.number_input(
            "Label smoothing",
            0.0,
            0.5,
            step=0.05,
            format="%g",
            key="train_smoothing",
            help="0: plain cross-entropy (classes only: a model that predicts a number ignores it)",
        )
        max_samples = q2.number_input(
            "Use at most this many training samples (0 = all)", 0, 10_000_000, step=100, key="train_max_samples"
        )
        val_fraction = q3.slider("Validation share of the training split", 0.0, 0.5, step=0.05, key="train_val")
        seed = q4.number_input("Seed", 0, 2**31 - 1, step=1, key="train_seed")
        st.session_state.setdefault("train_compile", "off")
        compile_mode = q1.selectbox(
            "Compile the training steps",
            COMPILE_MODES,
            key="train_compile",
            help="torch.compile: 'on' fuses kernels, 'graphs' also records CUDA graphs on a GPU (fewest launches "
            "per step). Compiling takes tens of seconds at the start: worth it on long runs. If it fails, "
            "training goes on without it and the run says why.",
        )
        channels_last = q2.checkbox(
            "Channels-last layout",
            key="train_channels_last",
            help="NHWC activations and weights for convolution networks: faster convolutions on GPUs with bf16",
        )
    return {
        "label_smoothing": float(label_smoothing),
        "max_train_samples": int(max_samples),
        "seed": int(seed),
        "val_fraction": float(val_fraction),
        "compile": compile_mode,
        "channels_last": bool(channels_last),
    }


def settings_form(info: DatasetInfo, spec: ModelSpec) -> TrainConfig | None:
    """The settings, filled from the recipe when the model or the data set changed; the config when Start is
    pressed."""
    _recipe_header(info, spec)
    # Not an st.form: every edit is committed at once, so it survives reruns and visits to other pages.
    with st.container(border=True):
        values = _main_fields(info, spec)
        values.update(_more_fields())
        submitted = st.button("Start training", type="primary", icon=":material/play_arrow:", key="train_start")
    keep_fields()
    if not submitted:
        return None
    # Every value the form shows is passed, so the engine fills nothing behind the user's back.
    return TrainConfig(dataset=info.name, model=spec.name, **{k: v for k, v in values.items() if k in CONFIG_FIELDS})
