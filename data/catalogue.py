"""The data set catalogue: every named data set with where it stands on this machine (built in, available
under the data root, or needing a download). The `xaidash datasets` command and the pages read it."""

from __future__ import annotations

from pathlib import Path

from xaidash.data.modalities import modality_of
from xaidash.data.paths import data_root
from xaidash.data.registry import DatasetInfo, get_source, list_datasets


def dataset_status(info: DatasetInfo, root: Path | None = None) -> str:
    """'built in', 'available' (its files are under `root`, default the data root), 'needs download',
    or 'unavailable' when its source cannot even say."""
    if info.builtin:
        return "built in"
    try:
        available = get_source(info.name).is_available(Path(root) if root else data_root())
    except Exception:  # noqa: BLE001 - a broken source must not hide the others
        return "unavailable"
    return "available" if available else "needs download"


def ground_truth(info: DatasetInfo) -> str:
    """What the data set knows about where its labels come from: object masks, rationales, the true columns."""
    if info.has_masks:
        return "masks"
    if info.has_rationales:
        return "rationales"
    return f"columns {', '.join(info.truth_columns)}" if info.truth_columns else ""


def datasets_table(root: Path | None = None) -> list[dict[str, str]]:
    """One row per named data set: name, modality, classes, its inputs in words ('3x32x32 images', 'rows of 30
    columns'), ground truth, status."""
    root = Path(root) if root else data_root()
    return [
        {
            "name": info.name,
            "modality": info.modality,
            "classes": "a number" if info.regression is not None else str(info.num_classes),
            "input": modality_of(info.modality).describe(info.input_shape),
            "ground truth": ground_truth(info),
            "status": dataset_status(info, root),
        }
        for info in list_datasets()
    ]
