"""The input picker every explanation page uses: the run's test split as a gallery (filter by class,
correct or misclassified), uploaded images, or typed / uploaded text.

`input_picker` returns raw inputs as the explainers take them (images (C, H, W) in [0, 1] at the
model's input shape, or strings) with the true label and ground truth when known. Bad uploads
get a message naming the file and what to do; the other inputs are still returned.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
import torch
from PIL import Image

from xaidash.dashboard import services
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.regression_inputs import ORDERS, first_value_text, regression_order, row_describer
from xaidash.dashboard.components.row_inputs import (
    row_table,
    shown_as_rows,
    typed_rows,
    uploaded_rows,
    with_sparklines,
)
from xaidash.dashboard.components.sample_names import class_describer, class_name
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import selected_run
from xaidash.data.modalities import Modality, modality_of
from xaidash.data.registry import DatasetInfo, Split
from xaidash.data.text_files import decode_text
from xaidash.explainers.modalities.image_files import FITS, load_image
from xaidash.explainers.params import MAX_TEXT_CHARS, ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.training.data import training_samples

TEST_SET = "Test set"
TYPE_TEXT = "Type text"
TYPE_VALUES = "Type values"
ROWS_FILE = "Upload .csv rows"
TEXT_COLUMNS = ("text", "sentence", "review", "message")  # a CSV's text column, when one is named so
LABEL_COLUMNS = ("label", "class", "target")  # its label column
EXAMPLE_TEXT = "the plot was not bad and the acting was great\nthe ending was dull and the dialogue was clumsy"
GALLERY_PAGE = 12
FIT_HELP = (
    "How an image of another size becomes the model's input: crop = scale to cover and cut the centre "
    "(no distortion), letterbox = fit whole with black borders, stretch = ignore the aspect ratio."
)


@dataclass
class PickedInput:
    """One input: raw model input, true label (or None), a name for captions, and ground truth when known."""

    raw: torch.Tensor | str
    label: int | float | None  # the true class, or the true value of a number to predict
    name: str
    mask: np.ndarray | None = None
    rationale: list[int] | None = None
    key: str = ""
    future: tuple[float, ...] | None = None  # a forecast's true values of the steps ahead (t+1 first)

    def __post_init__(self) -> None:
        if not self.key:
            self.key = services.content_key(self.raw)


def _filtered(info: DatasetInfo, key: str, labels: np.ndarray, preds: np.ndarray) -> tuple[list[int], list[str], str]:
    """The class and right/wrong filters: (matching test indices, the classes chosen, the 'show' choice)."""
    n = len(preds)
    c1, c2 = st.columns([3, 2])
    classes = c1.multiselect(
        "Classes (true label)", list(info.classes), key=f"{key}_classes_{info.name}", placeholder="all classes"
    )
    show = c2.radio("Show", ["all", "correct", "misclassified"], horizontal=True, key=f"{key}_show")
    keep = np.ones(n, dtype=bool)
    if classes:
        keep &= np.isin(labels, [info.classes.index(c) for c in classes])
    if show == "correct":
        keep &= preds == labels
    elif show == "misclassified":
        keep &= preds != labels
    idx = np.flatnonzero(keep).tolist()
    st.caption(f"{len(idx)} of the first {n} test samples match ({int((preds == labels).sum())} predicted correctly).")
    return idx, classes, show


def _chosen(
    key: str, pick_key: str, idx: list[int], describe: Callable[[int], str], max_inputs: int, help: str
) -> list[int]:
    """The samples list (first match picked for the user until they choose) and its Random button."""

    def random_pick() -> None:
        count = max(1, len(st.session_state.get(pick_key) or []))
        st.session_state[pick_key] = random.sample(idx, min(count, len(idx)))
        st.session_state.pop(f"{pick_key}_auto", None)

    if pick_key not in st.session_state:  # set here, not as `default`, so the Random button may change it
        st.session_state[pick_key] = idx[:1]
        st.session_state[f"{pick_key}_auto"] = idx[:1]  # picked for the user: the first tile clicked replaces it
    c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
    chosen: list[int] = c1.multiselect(
        f"Samples (at most {max_inputs})",
        idx,
        format_func=describe,
        max_selections=max_inputs,
        key=pick_key,
        help=help,
        on_change=lambda: st.session_state.pop(f"{pick_key}_auto", None),
    )
    c2.button(
        "Random", key=f"{key}_random", on_click=random_pick, help="pick as many random samples from the filtered ones"
    )
    return chosen


@dataclass(frozen=True)
class _Tested:
    """The test split as the gallery shows it: the split, its labels, the model's probabilities and predictions."""

    info: DatasetInfo
    split: Split
    labels: np.ndarray
    probs: np.ndarray
    preds: np.ndarray


def _tiles(t: _Tested, shown: list[int], chosen: list[int], pick_key: str, max_inputs: int) -> None:
    """One gallery page: picture tiles that pick a sample when clicked, or a table of texts."""
    info, split, labels, preds = t.info, t.split, t.labels, t.preds
    adapter = modality_of(info.modality)
    if not adapter.pictured:  # texts, series: one line each in a table (a series also as a small line)
        frame = pd.DataFrame(
            {
                "index": shown,
                adapter.sample: [adapter.one_line(adapter.item(split, i), info, MAX_TEXT_CHARS) for i in shown],
                "true": [class_name(info, int(labels[i])) for i in shown],
                "predicted": [class_name(info, int(preds[i])) for i in shown],
                "probability": [float(t.probs[i, preds[i]]) for i in shown],
            }
            if info.regression is None
            else {  # values (a forecast: its first step ahead, then …)
                "index": shown,
                adapter.sample: [adapter.one_line(adapter.item(split, i), info, MAX_TEXT_CHARS) for i in shown],
                "true": [first_value_text(info.regression, labels[i]) for i in shown],
                "predicted": [first_value_text(info.regression, t.probs[i]) for i in shown],
            }
        )
        config = with_sparklines(frame, adapter, [adapter.item(split, i) for i in shown])
        st.dataframe(frame, hide_index=True, width="stretch", column_config=config)
        return
    with st.container(horizontal=True, gap="small"):
        for i in shown:
            mark = "✓" if preds[i] == labels[i] else "✗"
            picked = i in chosen
            with st.container(width=112, gap=None, border=picked):
                st.image(to_pil(adapter.item(split, i), 128), width="stretch")
                st.button(
                    f"{'☑' if picked else '☐'} #{i} {class_name(info, int(labels[i]))} {mark}",
                    key=f"{pick_key}_pick_{i}",
                    on_click=_toggle_pick,
                    args=(pick_key, i, max_inputs),
                    type="primary" if picked else "tertiary",
                    width="stretch",
                    help="remove from the chosen samples" if picked else "add to the chosen samples",
                )


def _gallery_pages(
    t: _Tested, key: str, pick_key: str, idx: list[int], chosen: list[int], max_inputs: int, opened: bool
) -> None:
    # Open (for pictures) until the user closes it: a fixed key, label and `expanded` keep the browser's open or
    # closed state across the reruns that picks cause (a changing label would redraw it closed).
    with st.expander("Gallery", expanded=opened, key=f"{key}_gallery_{t.info.name}"):
        pages = max(1, -(-len(idx) // GALLERY_PAGE))
        c1, c2 = st.columns([1, 5], vertical_alignment="bottom")
        page = c1.number_input("Gallery page", 1, pages, 1, key=f"{pick_key}_page") if pages > 1 else 1
        c2.caption(
            f"{len(idx)} samples, {GALLERY_PAGE} a page: index, true class, ✓/✗ = predicted right/wrong. "
            f"Click a sample to pick it, more to explain several side by side; click again to remove it "
            f"(☑ = chosen: {len(chosen)})."
        )
        _tiles(t, idx[(page - 1) * GALLERY_PAGE : page * GALLERY_PAGE], chosen, pick_key, max_inputs)


def _sample(adapter: Modality, split: Split, index: int, label: np.ndarray, regression: bool, name: str) -> PickedInput:
    """Sample `index` of a split as an input, with its ground truth (an object mask, a rationale, a forecast's true
    future) when known. A forecast's truth is a value per step ahead: no one label."""
    truth = adapter.ground_truth(split, [index])
    several = label.size > 1
    return PickedInput(
        adapter.item(split, index),
        None if several else float(label) if regression else int(label),
        name,
        mask=None if truth.masks is None else truth.masks[0],
        rationale=None if truth.rationales is None else truth.rationales[0],
        future=tuple(float(v) for v in label.reshape(-1)) if several else None,
    )


def _gallery(bundle: ModelBundle, key: str, bundle_key: str, max_inputs: int) -> list[PickedInput]:
    info = bundle.info
    try:
        split = services.dataset_split(info.name, "test")
        probs = services.test_predictions(bundle_key, bundle)
    except Exception as e:  # noqa: BLE001 - shown with what to do; uploads still work
        show_error(e, f"The test split of {info.name} is not available")
        st.info("Upload your own input instead (switch the source above).")
        return []
    labels = split.labels[: len(probs)].numpy()
    tested = _Tested(info, split, labels, probs, probs.argmax(1))
    if info.regression is not None:  # a number to predict: rows ordered by their error, no classes
        values = probs[:, 0] if probs.shape[1] == 1 else probs  # a forecast: a value per step ahead
        idx, show = regression_order(info.regression, key, labels, values)
        classes: list[str] = []
        describe, what = row_describer(info.regression, labels, values), "test index, true → predicted value"
    else:
        idx, classes, show = _filtered(info, key, labels, tested.preds)
        describe = class_describer(info, split, labels, tested.preds, bundle.adapter)
        what = "test index, true class → predicted class"
    if not idx:
        st.info("No test samples match these filters: widen them.")
        return []
    pick_key = _pick_key(key, info.name, classes, show)
    chosen = _chosen(key, pick_key, idx, describe, max_inputs, what)
    if shown_as_rows(bundle):  # rows of values: picked in a table of the rows themselves
        row_table(info, bundle.adapter.items(split, range(len(probs))), idx, labels, probs, pick_key, max_inputs)
    else:
        _gallery_pages(tested, key, pick_key, idx, chosen, max_inputs, bundle.adapter.gallery_open)

    return [
        _sample(bundle.adapter, split, i, np.asarray(labels[i]), info.regression is not None, f"test #{i}")
        for i in chosen
    ]


def _toggle_pick(pick_key: str, index: int, max_inputs: int) -> None:
    """A gallery click: add the sample to the chosen ones (dropping the oldest beyond `max_inputs`), or remove it;
    while the only choice is the first sample, picked for the user, the click replaces it."""
    chosen = list(st.session_state.get(pick_key) or [])
    auto = st.session_state.pop(f"{pick_key}_auto", None)
    if auto is not None and chosen == list(auto):  # the first sample was picked for the user: the click replaces it
        chosen = [index]
    elif index in chosen:
        chosen.remove(index)
    else:
        chosen = [*chosen, index][-max_inputs:]
    st.session_state[pick_key] = chosen


def _uploaded_images(info: DatasetInfo, key: str, max_inputs: int, types: tuple[str, ...]) -> list[PickedInput]:
    files = st.file_uploader(
        "Images (PNG, JPEG, BMP, WebP, GIF, TIFF; any size and colour mode)",
        type=list(types),
        accept_multiple_files=True,
        key=f"{key}_images",
    )
    fit = st.selectbox("Fit", FITS, key=f"{key}_fit", help=FIT_HELP)
    if not files:
        st.info(
            f"Upload one or more images; they are converted to what the model reads ({'x'.join(map(str, info.input_shape))})."
        )
        return []
    if len(files) > max_inputs:
        st.warning(f"{len(files)} images uploaded; the first {max_inputs} are used.")
    out = []
    for f in files[:max_inputs]:
        try:
            x = load_image(f, info, fit)  # type: ignore[arg-type]
        except ExplainError as e:
            st.error(f"{e}", icon=":material/broken_image:")
            continue
        try:
            with Image.open(io.BytesIO(f.getvalue())) as im:
                original = f"{im.width}x{im.height} {im.mode}"
        except Exception:  # noqa: BLE001 - only for the caption
            original = "?"
        out.append(PickedInput(x, None, f.name))
        out[-1].name = f"{f.name} ({original} → {'x'.join(map(str, x.shape))})"
    if out:
        st.caption("As the model sees them:")
        with st.container(horizontal=True, gap="small"):
            for p in out:
                st.image(to_pil(p.raw, 128), caption=p.name, width=128)
    return out


def _nonblank(lines: list[str]) -> list[str]:
    return [s.strip() for s in lines if s and s.strip()]


def _cut_long_lines(text: str) -> tuple[str, list[int]]:
    """The text with every line cut to its first MAX_TEXT_CHARS characters, and the lengths of the lines cut."""
    lines = text.splitlines()
    cut = [len(line) for line in lines if len(line) > MAX_TEXT_CHARS]
    return ("\n".join(line[:MAX_TEXT_CHARS] for line in lines) if cut else text), cut


def _on_typed_text(key: str) -> None:
    """After a paste or edit: keep the first MAX_TEXT_CHARS characters of each line in the box itself (so the box
    shows what is explained) and remember what was cut, for the notice."""
    text, cut = _cut_long_lines(st.session_state.get(f"{key}_text") or "")
    if cut:
        st.session_state[f"{key}_text"] = text
        st.session_state[f"{key}_text_cut"] = cut
    else:
        st.session_state.pop(f"{key}_text_cut", None)


def _typed_text(key: str, max_inputs: int) -> list[PickedInput]:
    # No max_chars: the browser would refuse a longer paste whole and leave the box empty. The callback cuts it.
    if f"{key}_text" not in st.session_state:
        st.session_state[f"{key}_text"] = EXAMPLE_TEXT
    text = st.text_area(
        "Text: one input per line", key=f"{key}_text", height=110, on_change=_on_typed_text, args=(key,)
    )
    text, cut = _cut_long_lines(text or "")  # a value set without the callback (a test, a script) is cut here too
    cut = cut or st.session_state.get(f"{key}_text_cut") or []
    if cut:
        st.warning(
            f"{'A line' if len(cut) == 1 else f'{len(cut)} lines'} of {', '.join(f'{n:,}' for n in cut)} characters "
            f"{'was' if len(cut) == 1 else 'were'} cut to the first {MAX_TEXT_CHARS:,} characters (the most one input "
            "may have).",
            icon=":material/content_cut:",
        )
    lines = _nonblank(text.splitlines())
    if not lines:
        st.warning("The text is empty: type a sentence to explain (one input per line).", icon=":material/edit_note:")
        return []
    if len(lines) > max_inputs:
        st.warning(f"{len(lines)} lines typed; the first {max_inputs} are used.")
    return [PickedInput(t, None, f"line {j + 1}") for j, t in enumerate(lines[:max_inputs])]


def _csv_texts(text: str, name: str, info: DatasetInfo, key: str) -> tuple[list[str], list[int | None]]:
    try:
        df = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ExplainError(
            f"{name} is not a readable CSV file ({e}). Give it a header row and a text column."
        ) from None
    text_cols = [c for c in df.columns if pd.api.types.is_string_dtype(df[c]) or pd.api.types.is_object_dtype(df[c])]
    if not text_cols:
        raise ExplainError(f"{name} has no text column (columns: {', '.join(map(str, df.columns))}).")
    preferred = [c for c in text_cols if str(c).lower() in TEXT_COLUMNS]
    col = st.selectbox(
        "Text column", text_cols, index=text_cols.index(preferred[0]) if preferred else 0, key=f"{key}_csvcol"
    )
    rows = df[df[col].notna() & (df[col].astype(str).str.strip() != "")]
    labels: list[int | None] = [None] * len(rows)
    label_col = next((c for c in df.columns if str(c).lower() in LABEL_COLUMNS), None)
    if label_col is not None:

        def to_label(v: Any) -> int | None:
            if str(v) in info.classes:
                return info.classes.index(str(v))
            try:
                k = int(v)
            except (TypeError, ValueError):
                return None
            return k if 0 <= k < info.num_classes else None

        labels = [to_label(v) for v in rows[label_col]]
    return rows[col].astype(str).tolist(), labels


def _uploaded_text(info: DatasetInfo, key: str, max_inputs: int, types: tuple[str, ...]) -> list[PickedInput]:
    f = st.file_uploader(
        "A .txt file (one input per line) or a .csv file with a text column", type=list(types), key=f"{key}_textfile"
    )
    if f is None:
        st.info("Upload a UTF-8 .txt or .csv file.")
        return []
    data = f.getvalue()
    try:
        if not data:
            raise ExplainError(f"{f.name} is empty (0 bytes): upload a file with some text.")
        hint = "save it as UTF-8 and upload it again"
        text = decode_text(data, f.name, error=ExplainError, hint=hint).text
        if f.name.lower().endswith(".csv"):
            texts, labels = _csv_texts(text, f.name, info, key)
        else:
            texts = _nonblank(text.splitlines())
            labels = [None] * len(texts)
        if not texts:
            raise ExplainError(f"{f.name} contains no text: it is blank.")
        if any(len(t) > MAX_TEXT_CHARS for t in texts):
            st.warning(
                f"{f.name}: texts longer than {MAX_TEXT_CHARS:,} characters are cut to their first {MAX_TEXT_CHARS:,} "
                "here; the model reads fewer: the note under each input says how many of its words it reads.",
                icon=":material/content_cut:",
            )
            texts = [t[:MAX_TEXT_CHARS] for t in texts]
    except ExplainError as e:
        st.error(str(e), icon=":material/error:")
        return []
    if len(texts) > max_inputs:
        st.warning(f"{f.name} holds {len(texts)} texts; the first {max_inputs} are used.")
    return [
        PickedInput(t.strip(), lab, f"{f.name} #{j + 1}")
        for j, (t, lab) in enumerate(zip(texts[:max_inputs], labels, strict=False))
    ]


def stop_without_dataset(bundle: ModelBundle, needs: str) -> None:
    """A page (or the rest of one) that needs the model's data set: one line saying why not and how, then stop."""
    reason = bundle.no_dataset_reason(needs)
    if reason:
        st.info(reason, icon=":material/dataset_linked:")
        st.stop()


OPEN_SAMPLE_PARAM = "sample"  # ?sample=test:INDEX opens that test sample (links from the Embeddings page)
TRAIN_SOURCE = "Training sample"  # the source a ?sample=train:INDEX link opens (the influence gallery's links)
SAMPLE_SPLITS = ("test", "train")


def _train_key(key: str) -> str:
    """Session key of the training sample a link opened (plain state: kept while its widget is not drawn)."""
    return f"{key}_train_sample"


def _open_requested_sample(bundle: ModelBundle, key: str) -> None:
    """Turn a ?sample=test:INDEX or ?sample=train:INDEX link into this picker's selection, once (the parameter is
    then dropped)."""
    wanted = st.query_params.get(OPEN_SAMPLE_PARAM)
    if not wanted:
        return
    del st.query_params[OPEN_SAMPLE_PARAM]
    split, _, digits = str(wanted).partition(":")
    # ASCII digits only: '²' passes str.isdigit() and int() refuses it; over 18 digits int() may refuse too.
    if split not in SAMPLE_SPLITS or not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
        st.error(
            f"Cannot open sample {wanted!r}: links look like ?sample=test:INDEX (or ?sample=train:INDEX for a "
            "training sample) with INDEX a whole number 0 or more."
        )
        return
    index = int(digits)
    try:
        size = len(services.dataset_split(bundle.info.name, split))
    except Exception:  # noqa: BLE001 - the gallery below says why the split cannot be read
        size = None
    if size is not None and index >= size:
        st.error(
            f"Cannot open {split} sample #{index}: the {split} split of {bundle.info.name} has {size:,} samples "
            f"(valid: 0 to {size - 1})."
        )
        return
    if split == "train":
        if size is None:
            st.error(f"Cannot open train sample #{index}: the train split of {bundle.info.name} is not available.")
            return
        st.session_state[_train_key(key)] = index
        st.session_state[f"{key}_source"] = TRAIN_SOURCE
        return
    if index >= services.GALLERY_LIMIT:
        st.info(
            f"Test sample #{index} is beyond the first {services.GALLERY_LIMIT} samples the gallery lists; "
            "pick another sample below."
        )
        return
    st.session_state[f"{key}_source"] = TEST_SET
    st.session_state[f"{key}_classes_{bundle.info.name}"] = []
    st.session_state[f"{key}_show"] = "all"
    show = "all" if bundle.info.regression is None else ORDERS[0]  # the filters' defaults
    if bundle.info.regression is not None:
        st.session_state[f"{key}_order"] = ORDERS[0]
    st.session_state[_pick_key(key, bundle.info.name, [], show)] = [index]


def _as_trained(info: DatasetInfo, split: Split, index: int) -> str:
    """How the selected run used train sample `index`: "" when trained with the data set's label, else what it was
    trained as (label noise) or that it was held out for validation; "" when the run's split is not known here."""
    run = selected_run()
    try:
        samples = training_samples(run, split) if run is not None else None
    except Exception:  # noqa: BLE001 - an imported run: its training split is unknown, nothing to add
        samples = None
    if samples is None:
        return ""
    where = (samples.indices == index).nonzero()
    if len(where) == 0:
        return "; the run held it out for validation (not trained on)"
    p = int(where[0, 0])
    trained, given = int(samples.labels[p]), int(samples.dataset_labels[p])
    if trained == given:
        return ""
    return f"; the run was trained with the label **{class_name(info, trained)}** (flipped: label noise)"


def _training_sample(bundle: ModelBundle, key: str) -> list[PickedInput]:
    """The training sample a ?sample=train:INDEX link opened (another index can be typed), as the one input."""
    info = bundle.info
    try:
        split = services.dataset_split(info.name, "train")
    except Exception as e:  # noqa: BLE001 - shown with what to do; the other sources still work
        show_error(e, f"The train split of {info.name} is not available")
        return []
    size = len(split)
    widget = f"{key}_train_index"
    held = min(max(int(st.session_state.get(_train_key(key), 0)), 0), size - 1)
    if st.session_state.get(widget) != held:  # the link (or the last draw) decides; set before the widget is drawn
        st.session_state[widget] = held

    def keep() -> None:
        st.session_state[_train_key(key)] = int(st.session_state[widget])

    c1, c2 = st.columns([1, 4], vertical_alignment="bottom")
    index = int(c1.number_input(f"Train index (0 to {size - 1})", 0, size - 1, key=widget, on_change=keep))
    label = int(split.labels[index])
    c2.caption(
        f"Training sample #{index} of {size:,}, labelled **{class_name(info, label)}** in the data set"
        f"{_as_trained(info, split, index)}. Opened from a link (the influence gallery or the Training data page); pick "
        "another input source above to go back to the test set."
    )
    if bundle.adapter.pictured:
        st.image(to_pil(bundle.adapter.item(split, index), 128), caption=f"train #{index}", width=128)
    else:
        st.markdown(f"> {bundle.adapter.one_line(bundle.adapter.item(split, index), info, MAX_TEXT_CHARS)}")
    truth = np.asarray(split.labels[index])
    return [_sample(bundle.adapter, split, index, truth, info.regression is not None, f"train #{index}")]


def _pick_key(key: str, dataset: str, classes: list[str], show: str) -> str:
    return f"{key}_samples_{dataset}_{'-'.join(classes)}_{show}"


def _upload_label(adapter: Modality) -> str:
    """'Upload images' for pictures; else the file types it reads: 'Upload .txt / .csv'."""
    if adapter.pictured:
        return f"Upload {adapter.label}"
    return "Upload " + " / ".join(f".{t}" for t in adapter.upload_types)


def source_labels(adapter: Modality) -> list[str]:
    """The input sources a page offers for this kind of input, in order: the test set, then the ways its adapter
    declares (`sources`: typed text, uploaded files)."""
    words = {"type": TYPE_TEXT, "upload": _upload_label(adapter), "values": TYPE_VALUES, "rows file": ROWS_FILE}
    return [TEST_SET, *(words[s] for s in adapter.sources)]


def _rows(bundle: ModelBundle, key: str, source: str, max_inputs: int) -> list[PickedInput]:
    """Rows typed as values or read from an uploaded CSV file, each read and checked by the adapter."""
    if source == TYPE_VALUES:
        example = bundle.adapter.example(bundle.info, bundle.tokenizer)[0]  # a typical row: each column's median
        got = typed_rows(bundle, key, max_inputs, example)
    else:
        got = uploaded_rows(bundle, key, max_inputs, bundle.adapter.upload_types)
    return [PickedInput(row, None, name) for row, name in got]


def input_picker(bundle: ModelBundle, key: str, *, bundle_key: str, max_inputs: int = 8) -> list[PickedInput]:
    """Source selector and its widgets; the chosen inputs (possibly none, with a message saying why). Each run
    keeps its own source: back from an image run, a text run is still on "Type text"."""
    linked = bool(st.query_params.get(OPEN_SAMPLE_PARAM))  # a ?sample= link chooses the source itself
    _open_requested_sample(bundle, key)
    by_run: dict[str, str] = st.session_state.setdefault(f"{key}_source_by_run", {})
    if st.session_state.get(f"{key}_source_run") != bundle_key and not linked and bundle_key in by_run:
        st.session_state[f"{key}_source"] = by_run[bundle_key]  # switched back to this run: its own source
    st.session_state[f"{key}_source_run"] = bundle_key
    adapter = bundle.adapter
    sources = source_labels(adapter)
    no_dataset = bundle.no_dataset_reason("the test-set gallery")
    if no_dataset:  # an imported model without a data set: uploads and typed text only
        sources = sources[1:]
        st.caption(no_dataset)
    elif _train_key(key) in st.session_state:  # a ?sample=train: link opened one: offered until the session ends
        sources = [*sources, TRAIN_SOURCE]
    if st.session_state.get(f"{key}_source") not in (None, *sources):  # chosen for another run
        st.session_state.pop(f"{key}_source", None)
    source = sources[0] if len(sources) == 1 else st.radio("Input", sources, horizontal=True, key=f"{key}_source")
    by_run[bundle_key] = source
    if source == TEST_SET:
        return _gallery(bundle, key, bundle_key, max_inputs)
    if source == TRAIN_SOURCE:
        return _training_sample(bundle, key)
    if source == TYPE_TEXT:
        return _typed_text(key, max_inputs)
    if source in (TYPE_VALUES, ROWS_FILE):
        return _rows(bundle, key, source, max_inputs)
    if adapter.pictured:  # the one other source: uploaded files, decoded as pictures or read as text
        return _uploaded_images(bundle.info, key, max_inputs, adapter.upload_types)
    return _uploaded_text(bundle.info, key, max_inputs, adapter.upload_types)
