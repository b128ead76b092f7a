"""Calibration on the pages: the Train page's section measures and draws the reliability diagram, and the sidebar's
"calibrated probabilities" switch (shown only for a run with a saved temperature) changes the probability Explain
shows, not its predicted class. Works on a copy of the shared trained shapes run (which is only read)."""

from __future__ import annotations

import re
import shutil

import pytest
from app_pages import assert_ok, make_app, open_page

from xaidash.dashboard.components.calibration_view import TOGGLE_LABEL
from xaidash.models.calibration_run import CALIBRATION, calibrate
from xaidash.models.runs.store import Run


@pytest.fixture
def shapes_copy(trained_shapes_run, tmp_path, monkeypatch) -> Run:
    root = tmp_path / "runs"
    root.mkdir(exist_ok=True)
    src = trained_shapes_run.run.path
    shutil.copytree(src, root / src.name, ignore=shutil.ignore_patterns(".lock", CALIBRATION))
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    return Run(root / src.name)


def _charts(at) -> str:
    return " ".join(str(c.proto.spec) for c in at.main.get("vega_lite_chart"))


def _toggles(at) -> list:
    return [t for t in at.sidebar.toggle if t.label == TOGGLE_LABEL]


def test_train_section_measures_and_draws(shapes_copy):
    at = open_page(make_app(shapes_copy.id), "views/train.py")
    off = _toggles(at)  # no temperature saved yet: the switch is shown off and disabled, saying why (issue 29)
    assert len(off) == 1 and off[0].disabled and not off[0].value
    button = next(b for b in at.button if b.label == "Measure calibration")
    button.click().run()
    assert_ok(at)
    assert shapes_copy.file(CALIBRATION).is_file()
    spec = _charts(at)
    assert "confidence (top class probability)" in spec and "accuracy (share correct)" in spec
    assert "Before: ECE" in spec and "After (T = " in spec
    labels = [m.label for m in at.metric]
    assert "Temperature T" in labels and "ECE" in labels
    assert any("How to read it" in str(c.value) for c in at.caption)
    # the next visit reads the saved fit: no button press needed, and the sidebar offers the switch
    at = open_page(make_app(shapes_copy.id), "views/train.py")
    assert "Before: ECE" in _charts(at) and _toggles(at) and not _toggles(at)[0].disabled


def _prediction(at) -> tuple[str, int]:
    text = next(str(m.value) for m in at.markdown if "predicted: **" in str(m.value))
    found = re.search(r"predicted: \*\*(.+?)\*\* \((\d+)%\)", text)
    assert found, text
    return found.group(1), int(found.group(2))


def test_sidebar_switch_calibrates_explains_probabilities(shapes_copy):
    cal = calibrate(shapes_copy)
    at = make_app(shapes_copy.id, timeout=180)
    at.session_state["explain_methods_by_run"] = {shapes_copy.id: ["saliency"]}
    at = open_page(at, "views/explain.py")
    plain_class, plain_pct = _prediction(at)
    plain_chart = _charts(at)
    assert not any("calibrated, T =" in str(c.value) for c in at.caption)
    assert any(f"Calibrated ones (T = {cal.temperature:.2f}): switch on" in str(c.value) for c in at.main.caption)
    switch = _toggles(at)
    assert switch, "the run has a saved temperature: the sidebar offers the switch"
    switch[0].set_value(True).run()
    assert_ok(at)
    assert any(f"calibrated, T = {cal.temperature:.2f}" in str(c.value) for c in at.caption)
    cal_class, cal_pct = _prediction(at)
    assert cal_class == plain_class  # scaling never changes the predicted class
    assert _charts(at) != plain_chart  # the top-k probabilities are the scaled ones
    # T < 1 sharpens, T > 1 softens the top probability
    assert (cal_pct >= plain_pct) if cal.temperature < 1 else (cal_pct <= plain_pct)
