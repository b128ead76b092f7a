"""Confusion matrices of many classes live beside the summary (issue 15: 1,000 classes made a 9 MB summary.json)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xaidash.models.registry import ModelError
from xaidash.models.runs.quality import chance_accuracy, run_warning
from xaidash.models.runs.store import CONFUSION, CONFUSION_INLINE_MAX, SUMMARY, Run


def thousand_class_matrix(n: int = 1000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 3, size=(n, n))
    np.fill_diagonal(m, rng.integers(20, 40, size=n))
    return m


def new_run(classes: int) -> Run:
    run = Run.create("many", "mlp")
    names = [f"class {i}" for i in range(classes)]
    run.write_config({"model": "mlp", "dataset": "many", "classes": names, "train": {"epochs": 1}})
    return run


def test_a_large_matrix_goes_to_its_own_file_and_reads_back():
    run, m = new_run(1000), thousand_class_matrix()
    run.update_summary(state="completed", test_acc=0.9, confusion=m.tolist())  # what the engine passes
    assert run.file(SUMMARY).stat().st_size < 2_000  # was 9 MB as JSON
    s = run.summary()
    assert s["confusion"] is None and s["confusion_file"] == CONFUSION and run.file(CONFUSION).is_file()
    np.testing.assert_array_equal(run.confusion(), m)
    run.update_summary(val_acc=0.8)  # later updates keep it
    np.testing.assert_array_equal(run.confusion(), m)
    # the majority class's share, read from the file: the poor-accuracy check still knows it
    assert chance_accuracy(s, 1000, run.confusion()) == pytest.approx(m.sum(1).max() / m.sum())
    assert run_warning(run) is None  # 90% is far above chance


def test_small_matrices_and_old_runs_stay_inline():
    run = new_run(3)
    m = [[5, 1, 0], [0, 6, 0], [1, 0, 7]]
    run.update_summary(state="completed", confusion=m)
    assert run.summary()["confusion"] == m and not run.file(CONFUSION).exists()
    assert run.confusion().tolist() == m  # type: ignore[union-attr]
    old = new_run(2)  # written by an engine from before confusion_file
    old.file(SUMMARY).write_text(json.dumps({"state": "completed", "confusion": [[3, 1], [0, 4]]}))
    assert old.confusion().tolist() == [[3, 1], [0, 4]]  # type: ignore[union-attr]
    assert CONFUSION_INLINE_MAX >= 10


def test_a_damaged_or_foreign_confusion_file_is_ignored_or_refused():
    run = new_run(60)
    run.update_summary(state="completed", confusion=thousand_class_matrix(60).tolist())
    run.file(CONFUSION).write_bytes(b"not numpy")
    assert run.confusion() is None  # the page shows the rest of the run
    np.save(run.file(CONFUSION), np.zeros((3, 4), dtype=np.int32))
    assert run.confusion() is None  # not square
    np.save(run.file(CONFUSION), np.array([[object()]], dtype=object), allow_pickle=True)
    assert run.confusion() is None  # never unpickled
    summary = json.loads(run.file(SUMMARY).read_text())
    run.file(SUMMARY).write_text(json.dumps({**summary, "confusion_file": "../../etc/passwd"}))
    with pytest.raises(ModelError, match="confusion_file"):
        run.summary()
