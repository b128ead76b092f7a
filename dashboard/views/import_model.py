"""Import: a model trained elsewhere (Hugging Face, timm, torchvision, your own nn.Module, a zoo architecture)
becomes a run, as `xaidash import` makes it; then its summary and a button that opens it on Explain."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import select_run
from xaidash.data.registry import list_datasets
from xaidash.data.text_files import decode_text
from xaidash.models.external import ImportOptions, ImportSource, describe, import_model, list_sources
from xaidash.models.external.options import (
    classes_from_text,
    parse_classes,
    parse_floats,
    parse_key_values,
    parse_shape,
)
from xaidash.models.external.runs import CAM_NOTE_ROW
from xaidash.models.registry import ModelError, list_models
from xaidash.models.runs.store import Run, resolve_run

WEIGHT_TYPES = ["safetensors", "pt", "pth", "bin", "ckpt"]
LAST = "import_last_run"  # the run this session imported last: its summary stays on the page
NO_LINK = "none (uploads and typed text only)"


@dataclass
class ImportForm:
    """What the form says (texts stripped), and whether it was submitted."""

    argument: str
    weights_upload: Any
    weights_path: str
    classes_text: str
    labels_upload: Any
    dataset: str
    shape_text: str
    mean_text: str
    std_text: str
    options_text: str
    cam_layer: str
    name: str
    vocab_upload: Any
    submitted: bool


def header() -> None:
    st.title("Import")
    st.caption(
        "Bring your own model: a PyTorch classifier trained elsewhere becomes a run that every page explains like "
        "one trained here. The same as `xaidash import SOURCE` on the command line; nothing is written unless the "
        "import succeeds."
    )


def pick_source() -> tuple[str, ImportSource]:
    """The kind of model (its prefix and source), and what that kind reads."""
    sources = {s.prefix: s for s in list_sources()}
    prefix = st.selectbox(
        "Kind of model",
        list(sources),
        format_func=lambda p: f"{sources[p].label} ({p}:{sources[p].argument})",
        key="import_kind",
    )
    source = sources[prefix]
    st.caption(source.help[:1].upper() + source.help[1:] + ".")
    return prefix, source


def argument_fields(kind: str) -> str:
    """The text after `kind:`, from this kind's own fields."""
    if kind == "hf":
        return st.text_input(
            "Folder or Hugging Face id",
            placeholder="/path/to/folder written by save_pretrained, or google/vit-base-patch16-224",
            key="import_hf_path",
        ).strip()
    if kind in ("timm", "torchvision"):
        return st.text_input(
            "Architecture name", placeholder="resnet50, vit_base_patch16_224, ...", key=f"import_{kind}_name"
        ).strip()
    if kind == "module":
        c1, c2 = st.columns([3, 1])
        target = c1.text_input(
            "Python file or module", placeholder="/path/to/my_model.py or package.module", key="import_module_target"
        ).strip()
        factory = c2.text_input("Class or factory", placeholder="Net", key="import_module_factory").strip()
        return f"{target}:{factory}" if target and factory else ""
    return st.selectbox("Zoo model", [s.name for s in list_models()], key="import_zoo_name")


def weights_fields(source: ImportSource) -> tuple[Any, str]:
    """The weights: an upload, or a path on this machine."""
    c1, c2 = st.columns(2)
    upload = c1.file_uploader(
        "Weights (.safetensors or a torch.save state dict)", type=WEIGHT_TYPES, key="import_weights_upload"
    )
    path = c2.text_input(
        "… or their path on this machine",
        placeholder="/path/to/model.safetensors",
        key="import_weights_path",
        help="for files over the upload limit; "
        + ("required" if source.needs_weights else "empty: the library's pretrained weights, when cached"),
    ).strip()
    return upload, path


def classes_fields() -> tuple[str, Any]:
    """The class names: typed, or a labels file."""
    c1, c2 = st.columns(2)
    text = c1.text_input(
        "Class names, comma separated (optional)",
        placeholder="cat, dog, bird (default: the model's own labels, or 0..n-1)",
        key="import_classes",
    ).strip()
    upload = c2.file_uploader(
        "… or a labels file (one per line, a JSON list, or id2label)", type=["txt", "json"], key="import_labels"
    )
    return text, upload


def dataset_field() -> str:
    datasets = [NO_LINK, *(i.name for i in list_datasets())]
    return st.selectbox(
        "Link a data set",
        datasets,
        key="import_dataset",
        help="gives the test-set gallery, Compare, Embeddings and quality metrics; its classes and image size must fit",
    )


def input_fields() -> tuple[str, str, str]:
    """The input shape, mean and std, behind an expander."""
    with st.expander("Input and normalisation (default: the model's own)"):
        c1, c2, c3 = st.columns(3)
        shape_text = c1.text_input("Input shape", placeholder="3x224x224", key="import_shape").strip()
        mean_text = c2.text_input("Mean per channel", placeholder="0.485, 0.456, 0.406", key="import_mean").strip()
        std_text = c3.text_input("Std per channel", placeholder="0.229, 0.224, 0.225", key="import_std").strip()
    return shape_text, mean_text, std_text


def advanced_fields(prefix: str) -> tuple[str, str, str, Any]:
    """Builder options, the Grad-CAM layer, the display name and (zoo) a vocabulary, behind an expander."""
    vocab_upload = None
    with st.expander("Advanced"):
        c1, c2 = st.columns(2)
        options_text = c1.text_area(
            "Builder options, KEY=VALUE per line",
            placeholder="img_size=384\ndrop_rate=0.1",
            key="import_options",
            help="keyword arguments of timm.create_model, torchvision's get_model, your factory, or the zoo builder",
        )
        cam_layer = c2.text_input(
            "Grad-CAM layer (default: detected)", placeholder="layer4 or blocks.10", key="import_cam_layer"
        ).strip()
        name = c2.text_input("Display name (default: from the source)", key="import_name").strip()
        if prefix == "zoo":
            vocab_upload = c1.file_uploader(
                "vocab.json (zoo text models trained from scratch)", type=["json"], key="import_vocab"
            )
    return options_text, cam_layer, name, vocab_upload


def import_form(prefix: str, source: ImportSource) -> ImportForm:
    """The form, top to bottom, and its Import button."""
    with st.form("import_form", border=True):
        argument = argument_fields(prefix)
        weights_upload, weights_path = weights_fields(source) if prefix != "hf" else (None, "")
        classes_text, labels_upload = classes_fields()
        dataset = dataset_field()
        shape_text, mean_text, std_text = input_fields()
        options_text, cam_layer, name, vocab_upload = advanced_fields(prefix)
        submitted = st.form_submit_button("Import", type="primary", icon=":material/upload:")
    return ImportForm(
        argument,
        weights_upload,
        weights_path,
        classes_text,
        labels_upload,
        dataset,
        shape_text,
        mean_text,
        std_text,
        options_text,
        cam_layer,
        name,
        vocab_upload,
        submitted,
    )


def saved(upload: Any, folder: Path) -> Path:
    path = folder / Path(upload.name).name
    path.write_bytes(upload.getvalue())
    return path


def import_options(form: ImportForm, folder: Path) -> ImportOptions:
    """What the form says, checked by the same parsers as the command line."""
    if form.classes_text and form.labels_upload is not None:
        raise ModelError("Give class names or a labels file, not both.")
    classes: tuple[str, ...] = parse_classes(form.classes_text) if form.classes_text else ()
    if form.labels_upload is not None:
        text = decode_text(form.labels_upload.getvalue(), form.labels_upload.name, error=ModelError).text
        classes = classes_from_text(text, form.labels_upload.name)
    weights = saved(form.weights_upload, folder) if form.weights_upload is not None else None
    if weights is None and form.weights_path:
        weights = Path(form.weights_path).expanduser()
    options = [line for line in form.options_text.splitlines() if line.strip()]
    return ImportOptions(
        weights=weights,
        input_shape=parse_shape(form.shape_text) if form.shape_text else (),
        mean=parse_floats(form.mean_text, "Mean") if form.mean_text else (),
        std=parse_floats(form.std_text, "Std") if form.std_text else (),
        classes=classes,
        dataset=None if form.dataset == NO_LINK else form.dataset,
        layers={"gradcam": form.cam_layer} if form.cam_layer else {},
        model_options=parse_key_values(options, "Builder option"),
        vocab=saved(form.vocab_upload, folder) if form.vocab_upload is not None else None,
        name=form.name,
    )


def run_import(prefix: str, source: ImportSource, form: ImportForm) -> None:
    """Import what the form says; on success the run is remembered for the summary, on failure every reason
    is shown (nothing was written)."""
    if not form.argument:
        st.warning(f"Fill in {source.argument} first.", icon=":material/edit_note:")
        return
    try:
        with (
            tempfile.TemporaryDirectory(prefix="xaidash-upload-") as tmp,
            st.spinner(f"Importing {prefix}:{form.argument}…"),
        ):
            imported = import_model(f"{prefix}:{form.argument}", import_options(form, Path(tmp)))
    except Exception as e:  # noqa: BLE001 - every reason is shown; nothing was written
        show_error(e, f"Could not import {prefix}:{form.argument}")
        st.caption("Nothing was written: fix the above and import again.")
    else:
        st.session_state[LAST] = imported.run.id
        st.success(f"Imported as run `{imported.run.id}`.", icon=":material/check_circle:")


def summary(run: Run) -> None:
    """The imported run's description, and buttons that open it on Explain (and Attention, when it has one)."""
    st.subheader("Imported model")
    rows = describe(run)
    below = ("note", CAM_NOTE_ROW)  # shown under the table
    st.dataframe(
        pd.DataFrame([{"": label, "value": value} for label, value in rows if label not in below]),
        hide_index=True,
        width="stretch",
    )
    for cam_note in (value for label, value in rows if label == CAM_NOTE_ROW):  # what CAM misses, how to name it
        st.info(cam_note, icon=":material/info:")
    for note in (value for label, value in rows if label == "note"):
        st.caption(f"Note: {note}")
    c1, c2, _ = st.columns([1, 1, 3])
    if c1.button("Open on Explain", type="primary", icon=":material/image_search:", key="import_open_explain"):
        select_run(run.id)
        st.switch_page(page_path("explain"))
    has_attention = bool((run.config().get("layers") or {}).get("attention"))
    if has_attention and c2.button("Open on Attention", icon=":material/visibility:", key="import_open_attention"):
        select_run(run.id)
        st.switch_page(page_path("attention"))


def last_summary() -> None:
    """The summary of the run this session imported last, while it exists."""
    last = st.session_state.get(LAST)
    if last:
        try:
            summary(resolve_run(last))
        except ModelError:  # deleted since
            st.session_state.pop(LAST, None)


def main() -> None:
    header()
    prefix, source = pick_source()
    form = import_form(prefix, source)
    if form.submitted:
        run_import(prefix, source, form)
    last_summary()


main()
