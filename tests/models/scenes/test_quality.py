"""The warning shown beside a scene model's explanations when it has not learned its task."""

from __future__ import annotations

from pathlib import Path

from xaidash.models.runs.store import Run
from xaidash.models.scenes.quality import headline_metric, scene_run_warning


def _run(tmp_path: Path, **summary: object) -> Run:
    run = Run(tmp_path)
    run.update_summary(state="completed", **summary)
    return run


def test_a_low_headline_is_flagged_and_a_good_one_is_not(tmp_path: Path) -> None:
    low = _run(tmp_path / "a", headline="map_50", test_metrics={"map": 0.1, "map_50": 0.31})
    warning = scene_run_warning(low)
    assert warning is not None and "map_50 of 0.31 on the test split" in warning and "\n" not in warning
    good = _run(tmp_path / "b", headline="miou", val_metrics={"miou": 0.9})
    assert scene_run_warning(good) is None and headline_metric(good.summary()) == ("miou", 0.9)
    seg = _run(tmp_path / "c", headline="miou", val_metrics={"miou": 0.2})
    assert "validation split" in (scene_run_warning(seg) or "")
    assert scene_run_warning(_run(tmp_path / "d")) is None  # not evaluated yet


def test_a_failed_run_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path, headline="map_50", test_metrics={"map_50": 0.99})
    run.update_summary(state="failed", error="the loss is not finite")
    assert "training failed" in (scene_run_warning(run) or "")


def test_the_runs_tables_judge_a_scene_run_by_its_headline(tmp_path: Path) -> None:
    from xaidash.models.runs.quality import GOOD, POOR, UNMEASURED, quality_label

    # quality_label reads the summary it is given; the run folder only needs to exist
    assert (
        quality_label(
            _run(tmp_path / "a"), {"state": "completed", "headline": "map_50", "test_metrics": {"map_50": 0.98}}
        )
        == GOOD
    )
    assert (
        quality_label(_run(tmp_path / "b"), {"state": "completed", "headline": "miou", "val_metrics": {"miou": 0.3}})
        == POOR
    )
    assert quality_label(_run(tmp_path / "c"), {"state": "completed", "headline": "miou"}) == UNMEASURED
