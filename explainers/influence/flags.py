"""Training samples a person flagged as mislabelled (the Training data page's checkboxes), kept under the run in
`influence/flags.json`, and the rows the page offers for download (the ranked self-influence table with the flags).

The file is small JSON written atomically; a damaged one is reported, never overwritten, so no flag is lost."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from xaidash.data.atomic import atomic_write_json
from xaidash.data.errors import XaidashError
from xaidash.data.registry import load_split
from xaidash.explainers.influence.api import self_influence_table
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import Run

FLAGS_FILE = Path("influence") / "flags.json"
VERSION = 1
EXPORT_COLUMNS = (
    "rank",
    "index",
    "label",
    "dataset_label",
    "label_differs",
    "predicted",
    "probability",
    "score",
    "method",
    "flagged",
    "note",
)
# Two browser tabs may flag at once: the read-modify-write of one process is serialised here (pages of one server).
_LOCK = threading.Lock()


def flags_path(run: Run) -> Path:
    return run.path / FLAGS_FILE


def read_flags(run: Run) -> dict[int, str]:
    """Flagged train index -> note ("" allowed); {} when nothing was flagged. ExplainError for a damaged file."""
    path = flags_path(run)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ExplainError(f"{run.id}/{FLAGS_FILE} is damaged ({e}); move it away to start a new list.") from None
    flags = document.get("flags") if isinstance(document, dict) else None
    if not isinstance(flags, dict) or not all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in flags.items()
    ):
        raise ExplainError(
            f"{run.id}/{FLAGS_FILE} is damaged: 'flags' must map train indices to notes; move it away to start a new "
            "list."
        )
    return {int(k): v for k, v in flags.items()}


def train_size(run: Run) -> int:
    """How many samples the run's data set's train split holds (what a flag's index is checked against)."""
    try:
        name = run.info.name
        return len(load_split(name, "train"))
    except XaidashError as e:
        raise ExplainError(
            f"Cannot flag training samples of run {run.id}: its training data is not readable ({e})."
        ) from None


def set_flag(run: Run, index: int, flagged: bool, note: str = "") -> None:
    """Flag (or unflag) train sample `index` as mislabelled, with an optional note; written atomically.
    ExplainError for an index outside the train split, or when the file cannot be written (nothing is lost)."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise ExplainError(f"A training sample's index is a whole number, not {index!r}.")
    size = train_size(run)
    if not 0 <= index < size:
        raise ExplainError(
            f"No training sample #{index}: the train split of {run.info.name} has {size:,} samples (0 to {size - 1})."
        )
    with _LOCK:
        flags = read_flags(run)
        if flagged:
            flags[index] = str(note)
        elif index in flags:
            del flags[index]
        else:
            return  # nothing to change: no write
        document = {"version": VERSION, "flags": {str(k): flags[k] for k in sorted(flags)}}
        try:
            atomic_write_json(flags_path(run), document)
        except OSError as e:
            raise ExplainError(
                f"Cannot save the flag under {run.id}/{FLAGS_FILE} ({e.strerror or e}); the previous list is kept."
            ) from None


def _class(classes: tuple[str, ...], value: Any) -> str | None:
    try:
        k = int(value)
    except (TypeError, ValueError):
        return None
    return classes[k] if 0 <= k < len(classes) else str(k)


def export_rows(run: Run, method: str, only_flagged: bool) -> list[dict[str, Any]]:
    """The ranked self-influence rows (highest score first) with class names and each row's flag and note, for the
    CSV / JSON downloads; `only_flagged`: the flagged samples alone (a flagged sample the table does not hold yet, the
    job being partial, comes last with only its index, labels and note)."""
    flags = read_flags(run)
    classes = tuple(run.info.classes)
    table = self_influence_table(run, method)
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    if table is not None:
        for rec in table.to_dict("records"):
            index = int(rec["index"])
            seen.add(index)
            if only_flagged and index not in flags:
                continue
            rows.append(
                {
                    "rank": int(rec["rank"]),
                    "index": index,
                    "label": _class(classes, rec["label"]),
                    "dataset_label": _class(classes, rec["dataset_label"]),
                    "label_differs": int(rec["label"]) != int(rec["dataset_label"]),
                    "predicted": _class(classes, rec["predicted"]),
                    "probability": float(rec["probability"]),
                    "score": float(rec["score"]),
                    "method": method,
                    "flagged": index in flags,
                    "note": flags.get(index, ""),
                }
            )
    if only_flagged:
        rows.extend(
            {**dict.fromkeys(EXPORT_COLUMNS), "index": index, "method": method, "flagged": True, "note": flags[index]}
            for index in sorted(set(flags) - seen)
        )
    return rows
