"""Picking concepts on the Concepts page, one widget per concept source of the registry
(explainers/concepts/sources.py): a data set's class, uploaded images (files or a zip) or a text file, or
examples picked in the gallery. A source with no widget of its own gets a KIND:ARGUMENT text box, so a new
registration shows up here by itself."""

from __future__ import annotations

import hashlib
import io
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from xaidash.data.registry import list_datasets
from xaidash.explainers.concepts.sources import IMAGE_SUFFIXES, ConceptSource, list_sources
from xaidash.models.bundle import ModelBundle

UPLOADS = Path(tempfile.gettempdir()) / "xaidash-concepts"
MAX_ZIP_FILES = 2000


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_ " else "_" for c in name.strip())[:60].strip() or "concept"


def _upload_folder(parts: list[tuple[str, bytes]], name: str) -> Path:
    """The uploaded files in a folder named by the concept (the concept's name in results) under a folder named by
    their content (the same upload is the same folder)."""
    digest = hashlib.sha256(b"".join(n.encode() + data for n, data in parts)).hexdigest()[:16]
    folder = UPLOADS / digest / _slug(name)
    folder.mkdir(parents=True, exist_ok=True)
    for i, (name, data) in enumerate(parts):
        (folder / f"{i:05d}_{Path(name).name}").write_bytes(data)
    return folder


def _zip_members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = [n for n in z.namelist() if not n.endswith("/") and not Path(n).name.startswith(".")]
        return [(n, z.read(n)) for n in names[:MAX_ZIP_FILES]]


def _dataset_widget(source: ConceptSource, bundle: ModelBundle, key: str) -> str | None:
    names = [i.name for i in list_datasets() if i.modality == bundle.modality]
    c1, c2, c3 = st.columns([2, 2, 1])
    start = names.index(bundle.info.name) if bundle.info.name in names else 0
    name = c1.selectbox("Data set", names, index=start, key=f"{key}_ds")
    info = next(i for i in list_datasets() if i.name == name)
    cls = c2.selectbox("Class", info.classes, key=f"{key}_ds_class_{name}")
    split = c3.radio("Split", ["train", "test"], key=f"{key}_ds_split", horizontal=True)
    return f"dataset:{name}:{cls}:{split}"


def _concept_name(key: str) -> str:
    return st.text_input("Concept name", value="my concept", key=f"{key}_name", help="How the results name it.")


def _folder_widget(source: ConceptSource, bundle: ModelBundle, key: str) -> str | None:
    name = _concept_name(key)
    files = st.file_uploader(
        "Concept images (a zip of images, or several image files)",
        type=[s.lstrip(".") for s in IMAGE_SUFFIXES] + ["zip"],
        accept_multiple_files=True,
        key=f"{key}_images",
    )
    if not files:
        st.caption(
            "Upload at least 5 images that show the concept (20-50 is better); they are resized to the model's input."
        )
        return None
    parts: list[tuple[str, bytes]] = []
    for f in files:
        data = f.getvalue()
        if f.name.lower().endswith(".zip"):
            try:
                parts.extend(_zip_members(data))
            except zipfile.BadZipFile:
                st.error(f"{f.name} is not a readable zip file.", icon=":material/error:")
        else:
            parts.append((f.name, data))
    return f"folder:{_upload_folder(parts, name)}"


def _text_widget(source: ConceptSource, bundle: ModelBundle, key: str) -> str | None:
    name = _concept_name(key)
    f = st.file_uploader("Concept sentences (.txt, one example per line)", type=["txt"], key=f"{key}_text")
    if f is None:
        return None
    folder = _upload_folder([(f.name, f.getvalue())], name)
    path = folder / f"{_slug(name)}.txt"  # the file's stem names the concept
    path.write_bytes(f.getvalue())
    return f"text:{path}"


def gallery_picks(bundle: ModelBundle) -> list[int]:
    """Test-split indices picked in the Explain page's gallery for this run's data set, in order."""
    prefix = f"explain_samples_{bundle.info.name}_"
    picked: list[int] = []
    for k, v in st.session_state.items():
        if str(k).startswith(prefix) and isinstance(v, list):
            picked.extend(int(i) for i in v if isinstance(i, int) and i not in picked)
    return picked


def _gallery_widget(source: ConceptSource, bundle: ModelBundle, key: str) -> str | None:
    picked = gallery_picks(bundle)
    text = st.text_input(
        "Test-split indices (comma-separated)",
        value=",".join(map(str, picked)),
        key=f"{key}_gallery",
        help="Pre-filled with the samples picked in the Explain page's gallery; at least 5.",
    )
    return f"gallery:{text}" if text.strip() else None


def _generic_widget(source: ConceptSource, bundle: ModelBundle, key: str) -> str | None:
    text = st.text_input(f"{source.kind}:{source.argument}", key=f"{key}_{source.kind}", help=source.help)
    return f"{source.kind}:{text}" if text.strip() else None


WIDGETS: dict[str, Callable[[ConceptSource, ModelBundle, str], str | None]] = {
    "dataset": _dataset_widget,
    "folder": _folder_widget,
    "text": _text_widget,
    "gallery": _gallery_widget,
}


def concept_picker(bundle: ModelBundle, key: str = "concepts") -> list[str]:
    """The concepts chosen so far (KIND:ARGUMENT specs), with widgets to add one from any source and remove any."""
    chosen: list[str] = st.session_state.setdefault(f"{key}_chosen", [])
    sources = list_sources(bundle.modality)
    source = st.radio("Concept source", sources, format_func=lambda s: s.label, horizontal=True, key=f"{key}_source")
    st.caption(source.help)
    # Upload widgets get a fresh key after each "Add concept": Streamlit's uploader keeps adding files to what it
    # holds, so the next concept would otherwise include the previous one's images.
    round_key = f"{key}_round"
    widget_key = f"{key}_u{st.session_state.get(round_key, 0)}" if source.upload else key
    spec = WIDGETS.get(source.kind, _generic_widget)(source, bundle, widget_key)
    if st.button("Add concept", key=f"{key}_add", disabled=spec is None, icon=":material/add:"):
        if spec is not None and spec not in chosen:
            chosen.append(spec)
        if source.upload:
            st.session_state[round_key] = st.session_state.get(round_key, 0) + 1
            st.rerun()
    for i, item in enumerate(list(chosen)):
        c1, c2 = st.columns([6, 1])
        c1.markdown(f"{i + 1}. `{_short(item)}`")
        if c2.button("Remove", key=f"{key}_remove_{i}"):
            chosen.remove(item)
            st.rerun()
    if not chosen:
        st.info("Add at least one concept: a set of examples that show it.", icon=":material/info:")
    return list(chosen)


def _short(spec: str) -> str:
    kind, _, arg = spec.partition(":")
    uploaded = any(s.kind == kind and s.upload for s in list_sources())  # a source whose files the page wrote
    if uploaded and str(UPLOADS) in arg:
        return f"{kind}: uploaded “{Path(arg).stem}”"
    return spec if len(spec) < 90 else spec[:87] + "…"
