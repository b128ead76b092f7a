"""The Train page on a run of 1,000 classes (issue 15: 127 s and a 9 MB summary before): the top confusions, a
searchable per-class table, the full matrix on request; a few classes keep their heatmap."""

from __future__ import annotations

import functools
import time

import numpy as np
from app_pages import assert_ok, open_page
from app_pages import make_app as _make_app

from xaidash.models.runs.store import SUMMARY, Run

make_app = functools.partial(_make_app, timeout=120)


def fabricated_run(classes: int) -> Run:
    """A completed run as the engine leaves it, with a confusion matrix of `classes` classes (no weights needed)."""
    names = [f"species {i:04d}" for i in range(classes)]
    run = Run.create("many", "mlp")
    run.write_config(
        {
            "model": "mlp",
            "dataset": "digits",
            "classes": names,
            "dataset_info": {"name": "digits", "modality": "image", "classes": names, "input_shape": [1, 8, 8]},
            "train": {"epochs": 2, "batch_size": 64},
            "device": "cpu",
            "created": time.time(),
        }
    )
    rng = np.random.default_rng(0)
    m = rng.integers(0, 2, size=(classes, classes))
    np.fill_diagonal(m, 30)
    m[7 % classes, 3] = 25  # the most frequent confusion: species 0007 taken for species 0003
    run.update_summary(state="completed", epochs_done=2, epochs=2, test_acc=0.6, val_acc=0.6, confusion=m.tolist())
    return run


def charts(at) -> str:
    return " ".join(str(c.proto.spec) for c in at.main.get("vega_lite_chart"))


def test_a_thousand_class_run_renders_readably():
    run = fabricated_run(1000)
    assert run.file(SUMMARY).stat().st_size < 2_000
    at = make_app(run.id)
    at.run()  # Home first: imports and caches warm, as in a browser that opens the app and then the Train page
    started = time.perf_counter()
    at.switch_page("views/train.py").run()
    seconds = time.perf_counter() - started
    assert_ok(at)
    assert "1,000 classes" in " ".join(m.value for m in at.markdown)
    assert "Most frequent confusions" in charts(at) and "Confusion matrix (test split)" not in charts(at)
    tables = [d.value for d in at.dataframe if "most often taken for" in d.value.columns]
    assert tables and len(tables[0]) == 1000 and tables[0].iloc[0]["recall"] <= tables[0].iloc[-1]["recall"]
    find = next(t for t in at.text_input if t.label == "Find a class")
    find.set_value("species 0007").run()
    assert_ok(at)
    found = next(d.value for d in at.dataframe if "most often taken for" in d.value.columns)
    assert found["class"].tolist() == ["species 0007"] and found.iloc[0]["most often taken for"] == "species 0003"
    assert not at.main.get("image")  # the full matrix only on request
    next(t for t in at.toggle if t.label == "Show the full matrix").set_value(True).run()
    assert_ok(at)
    assert at.main.get("image")
    print(f"Train page with a 1,000-class run: {seconds:.1f} s")  # measured, not asserted (see bench/)


def test_a_few_classes_keep_the_heatmap():
    run = fabricated_run(4)
    at = open_page(make_app(run.id), "views/train.py")
    assert not [d for d in at.dataframe if "most often taken for" in d.value.columns]
    assert not [t for t in at.toggle if t.label == "Show the full matrix"]
    assert "Confusion matrix (test split)" in charts(at)
