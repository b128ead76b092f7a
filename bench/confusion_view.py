"""The Train page's confusion view for many classes: the old way (the matrix in summary.json, drawn as one
Altair heatmap with a text mark per cell) against the new one (confusion.npy beside a small summary; top
confusions, a per-class table and the whole matrix as one image), same matrix, one run.

    python bench/confusion_view.py --classes 1000

Prints the summary's size and the time to read and prepare the view each way, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import altair as alt
import numpy as np

from xaidash.dashboard.components.charts import (
    confusion_chart,
    confusion_image,
    per_class_table,
    top_confusions,
    top_confusions_chart,
)
from xaidash.models.runs.store import SUMMARY, Run


def matrix(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    m = rng.integers(0, 3, size=(n, n))
    np.fill_diagonal(m, 30)
    return m


def old_way(folder: Path, m: np.ndarray, classes: list[str]) -> tuple[int, float]:
    path = folder / "old_summary.json"
    path.write_text(json.dumps({"state": "completed", "confusion": m.tolist()}, indent=2))
    start = time.perf_counter()
    summary = json.loads(path.read_text())
    with alt.data_transformers.disable_max_rows():  # as Streamlit does: it sends every row
        confusion_chart(summary["confusion"], classes).to_dict()  # what st.altair_chart serialises
    return path.stat().st_size, time.perf_counter() - start


def new_way(folder: Path, m: np.ndarray, classes: list[str]) -> tuple[int, float]:
    run = Run(folder / "run")
    run.path.mkdir()
    run.update_summary(state="completed", confusion=m.tolist())
    start = time.perf_counter()
    loaded = run.confusion()
    assert loaded is not None
    top_confusions_chart(top_confusions(loaded, classes)).to_dict()
    per_class_table(loaded, classes)
    confusion_image(loaded)  # only on request on the page; timed here anyway
    return run.file(SUMMARY).stat().st_size, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=1000)
    args = parser.parse_args()
    m, classes = matrix(args.classes), [f"class {i}" for i in range(args.classes)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        new_size, new_s = new_way(folder, m, classes)
        old_size, old_s = old_way(folder, m, classes)
    print(f"{args.classes} classes")
    print(f"old: summary.json {old_size / 1e6:.1f} MB, read + heatmap spec {old_s:.2f} s")
    print(f"new: summary.json {new_size / 1e3:.1f} KB, read + top confusions + table + image {new_s:.3f} s")
    print(f"ratio old/new: {old_s / new_s:.0f}x")


if __name__ == "__main__":
    main()
