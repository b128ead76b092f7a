"""The runs table of `xaidash runs`: one row of strings per run, newest first."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from xaidash.data.formatting import MISSING, score_text
from xaidash.models.runs.quality import quality_label
from xaidash.models.runs.store import CONFIG, Run, list_runs, run_liveness


def epochs_cell(summary: dict[str, Any], epochs: int | str | None) -> str:
    """'2/5' complete epochs of those planned ('2' when none are planned), or '0/5 (+3/47 steps)' when the weights are
    those of a partial epoch (never '1/5' for 3 steps): the runs tables and the pages word it alike."""
    done = int(summary.get("epochs_done") or 0)
    text = f"{done}/{epochs}" if epochs else str(done)
    partial = summary.get("partial_steps") or 0
    if partial:
        text += f" (+{partial}/{summary.get('steps_per_epoch', '?')} steps)"
    return text


def runs_table(root: Path | None = None) -> list[dict[str, str]]:
    """One row of strings per run, newest first: run, model, dataset, state, epochs, accuracies, quality
    (`quality_label`), device, date."""
    rows = []
    for r in list_runs(root):
        try:  # a damaged run must not hide the others
            rows.append(_run_row(r))
        except KeyError as e:
            rows.append({"run": r.id, "model": "?", "dataset": "?", "state": f"unreadable: {CONFIG} lacks {e}"})
        except Exception as e:  # noqa: BLE001
            rows.append({"run": r.id, "model": "?", "dataset": "?", "state": f"unreadable: {e}"})
    return rows


def _run_row(r: Run) -> dict[str, str]:
    c, s = r.config(), r.summary()
    if r.kind == "scene_model":
        return _scene_row(r, c, s)
    if r.kind != "trained":  # imported, or a language model
        return _imported_row(r, c, s)
    return {
        "run": r.id,
        "model": c["model"],
        "dataset": c["dataset"],
        "state": run_liveness(r, s).state,
        "epochs": epochs_cell(s, c.get("train", {}).get("epochs") or "?"),
        "val acc": score_text(s, "val"),  # a number to predict: its R²
        "test acc": score_text(s, "test"),
        "quality": quality_label(r, s),
        "device": c.get("device", "?"),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(c.get("created", 0))),
    }


def _imported_row(r: Run, c: dict[str, Any], s: dict[str, Any]) -> dict[str, str]:
    """An imported model: never trained here, so no epochs or accuracies; maybe no data set."""
    return {
        "run": r.id,
        "model": c["model"],
        "dataset": c.get("dataset") or "(none)",
        "state": s.get("state", "?"),
        "epochs": MISSING,
        "val acc": MISSING,
        "test acc": MISSING,
        "quality": quality_label(r, s),  # "not measured", unless its weights hold NaN
        "device": MISSING,
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(c.get("created", 0))),
    }


def _scene_row(r: Run, c: dict[str, Any], s: dict[str, Any]) -> dict[str, str]:
    """A detector's or segmenter's run (models/scenes): its headline metric (map_50, miou) in the score columns."""
    headline = str(s.get("headline") or "")

    def metric(key: str) -> str:
        value = (s.get(key) or {}).get(headline)
        return f"{headline} {value:.3f}" if isinstance(value, (int, float)) else MISSING

    settings = (c.get("scene_model") or {}).get("settings") or {}
    return {
        "run": r.id,
        "model": c["model"],
        "dataset": c["dataset"],
        "state": run_liveness(r, s).state,
        # imported (no settings: never trained here) has no epochs, as an imported classifier
        "epochs": epochs_cell(s, settings.get("epochs") or "?") if settings else MISSING,
        "val acc": metric("val_metrics"),
        "test acc": metric("test_metrics"),
        "quality": quality_label(r, s),
        "device": c.get("device", "?"),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(c.get("created", 0))),
    }
