"""The Training data page's ranked self-influence table ("possible label errors"): one page of rows at a time with
thumbnails (images) or the text, the label trained with, the data set's label, the model's prediction, the score, and
an editable "mislabelled" checkbox and note saved through `explainers/influence/flags.py`; and the downloads of the
whole ranking and of the flagged list (CSV, JSON)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_info
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, Split
from xaidash.explainers.figures.png import data_uri, png_bytes
from xaidash.explainers.influence.flags import export_rows, read_flags, set_flag
from xaidash.models.runs.store import Run

PAGE_ROWS = 25
ROW_PX = 48  # tall enough for a readable thumbnail
TEXT_CHARS = 200
SHOW = ("all", "label differs from the data set", "flagged")


def _class(classes: tuple[str, ...], k: Any) -> str:
    k = int(k)
    return classes[k] if 0 <= k < len(classes) else f"class {k}"


def _samples(split: Split, info: DatasetInfo, indices: list[int]) -> list[str | None]:
    """Each sample as its cell shows it: a picture's thumbnail (a data URI), else the input in a line."""
    adapter = modality_of(info.modality)
    raws = [adapter.item(split, i) for i in indices]
    if adapter.pictured:
        return [data_uri(png_bytes(to_pil(raw, 64))) for raw in raws]
    return [adapter.one_line(raw, info, TEXT_CHARS) for raw in raws]


def display_frame(
    table: pd.DataFrame, split: Split | None, info: DatasetInfo, flags: dict[int, str], run_id: str
) -> pd.DataFrame:
    """The rows as shown: rank, sample (thumbnail, text or a row's values), labels as names, prediction, score,
    flag and note."""
    classes = info.classes
    out = pd.DataFrame(
        {
            "rank": table["rank"].astype(int).to_numpy(),
            "index": table["index"].astype(int).to_numpy(),
        }
    )
    indices = out["index"].tolist()
    if split is not None:
        out["sample"] = _samples(split, info, indices)
    out["trained as"] = [_class(classes, v) for v in table["label"]]
    out["data set label"] = [
        _class(classes, d) + ("" if int(d) == int(lab) else " ⚠")
        for d, lab in zip(table["dataset_label"], table["label"], strict=True)
    ]
    out["predicted"] = [_class(classes, v) for v in table["predicted"]]
    out["probability"] = table["probability"].astype(float).to_numpy()
    out["score"] = table["score"].astype(float).to_numpy()
    out["open"] = [f"{page_info('explain').url_path}?sample=train:{i}&run={run_id}" for i in indices]  # relative URL
    out["mislabelled"] = [i in flags for i in indices]
    out["note"] = [flags.get(i, "") for i in indices]
    return out


def _filtered(table: pd.DataFrame, show: str, flags: dict[int, str]) -> pd.DataFrame:
    if show == SHOW[1]:
        return table[table["label"].astype(int) != table["dataset_label"].astype(int)]
    if show == SHOW[2]:
        return table[table["index"].astype(int).isin(list(flags))]
    return table


def _save_edits(run: Run, before: pd.DataFrame, after: pd.DataFrame) -> int:
    """Write the flags and notes the editor changed; the number of samples changed."""
    changed = 0
    for (_, old), (_, new) in zip(before.iterrows(), after.iterrows(), strict=True):
        flagged, note = bool(new["mislabelled"]), str(new["note"] or "")
        if flagged == bool(old["mislabelled"]) and (not flagged or note == str(old["note"] or "")):
            continue
        set_flag(run, int(new["index"]), flagged, note if flagged else "")
        changed += 1
    return changed


def ranked_table(run: Run, method: str, table: pd.DataFrame, units: str) -> None:
    """One page of the ranking, editable flags, and the page controls."""
    try:
        flags = read_flags(run)
    except Exception as e:  # noqa: BLE001 - a damaged flags file is named; the ranking still shows
        show_error(e, "Flags")
        flags = {}
    try:
        split: Split | None = services.dataset_split(run.info.name, "train")
    except Exception:  # noqa: BLE001 - the table still shows indices, labels and scores
        split = None
    c1, c2, c3 = st.columns([3, 1, 3], vertical_alignment="bottom")
    show = c1.radio("Show", SHOW, horizontal=True, key=f"influence_table_show_{run.id}_{method}")
    rows = _filtered(table, str(show), flags)
    pages = max(1, -(-len(rows) // PAGE_ROWS))
    page = int(c2.number_input("Page", 1, pages, 1, key=f"influence_table_page_{run.id}_{method}_{show}"))
    c3.caption(
        f"{len(rows):,} of {len(table):,} training samples · {PAGE_ROWS} a page · {len(flags)} flagged as mislabelled. "
        "⚠ = the data set's label differs from the one the model was trained with."
    )
    shown = rows.iloc[(page - 1) * PAGE_ROWS : page * PAGE_ROWS]
    frame = display_frame(shown, split, run.info, flags, run.id)
    columns: dict[str, Any] = {
        "rank": st.column_config.NumberColumn("rank", help="1 = highest self-influence", width="small"),
        "index": st.column_config.NumberColumn("train #", help="index in the train split", width="small"),
        "trained as": st.column_config.TextColumn("trained as", help="the label the model was trained with"),
        "data set label": st.column_config.TextColumn("data set label", help="the data set's own label"),
        "predicted": st.column_config.TextColumn("predicted", help="the final model's prediction for the sample"),
        "probability": st.column_config.ProgressColumn(
            "probability",
            help="the final model's probability of its prediction",
            format="percent",
            min_value=0,
            max_value=1,
        ),
        "score": st.column_config.NumberColumn("self-influence", help=f"units: {units}", format="%.4g"),
        "open": st.column_config.LinkColumn(
            "open", help="open the sample on Explain (a new tab)", display_text="Explain", width="small"
        ),
        "mislabelled": st.column_config.CheckboxColumn("mislabelled?", help="flag the sample (saved with the run)"),
        "note": st.column_config.TextColumn("note", help="optional: what the label should be, why"),
    }
    if split is not None and modality_of(run.info.modality).pictured:
        columns["sample"] = st.column_config.ImageColumn("sample", width="small")
    elif split is not None:
        columns["sample"] = st.column_config.TextColumn("sample", width="large")
    edited = st.data_editor(
        frame,
        column_config=columns,
        disabled=[c for c in frame.columns if c not in ("mislabelled", "note")],
        hide_index=True,
        width="stretch",
        row_height=ROW_PX,
        height=ROW_PX * (len(frame) + 1) + 3,  # every row of the page, no inner scrolling
        key=f"influence_table_{run.id}_{method}_{show}_{page}",
    )
    try:
        if _save_edits(run, frame, edited):
            st.rerun()  # the counts and the downloads read the saved flags
    except Exception as e:  # noqa: BLE001 - an unwritable folder is said; the table stays
        show_error(e, "Saving the flag")


def _csv(rows: list[dict[str, Any]]) -> bytes:
    return pd.DataFrame(rows).to_csv(index=False).encode()


def downloads(run: Run, method: str) -> None:
    """CSV and JSON of the whole ranking (with flags) and of the flagged samples alone."""
    try:
        everything = export_rows(run, method, only_flagged=False)
        flagged = export_rows(run, method, only_flagged=True)
    except Exception as e:  # noqa: BLE001
        show_error(e, "Downloads")
        return
    stem = f"{run.id}-{method}"
    with st.container(horizontal=True, gap="small"):
        st.download_button(
            "Ranking (CSV)", _csv(everything), f"{stem}-self-influence.csv", "text/csv", icon=":material/download:"
        )
        st.download_button(
            "Ranking (JSON)",
            json.dumps(everything, indent=1).encode(),
            f"{stem}-self-influence.json",
            "application/json",
            icon=":material/download:",
        )
        st.download_button(
            f"Flagged, {len(flagged)} (CSV)",
            _csv(flagged) if flagged else b"index,note\n",
            f"{stem}-flagged.csv",
            "text/csv",
            icon=":material/flag:",
            disabled=not flagged,
        )
        st.download_button(
            f"Flagged, {len(flagged)} (JSON)",
            json.dumps(flagged, indent=1).encode(),
            f"{stem}-flagged.json",
            "application/json",
            icon=":material/flag:",
            disabled=not flagged,
        )
