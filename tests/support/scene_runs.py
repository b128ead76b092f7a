"""Scene model runs for tests: a tiny run in seconds (`tiny_scene_run`), and a decently trained detector and
segmenter shared by the whole test session (`trained_scene_run`, trained once under a file lock, as `shared_runs`
does for the shapes classifier)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import pytest

Task = Literal["detect", "segment"]
MODELS: dict[str, str] = {"detect": "fasterrcnn_small", "segment": "unet_small"}

# What the session's shared runs train: enough to find and outline most objects of `scenes`. Two epochs of the full
# training split at the recipes' batch and rate, about 2-2.5 minutes of one CPU thread each. Measured: ~60 s runs
# (120-200 steps) learned next to nothing (test map_50 0.44, mIoU 0.27), so these runs cost more than that, once
# per test session. Measured (one thread, loaded machine): the detector test map_50 0.835 (map 0.635) in 113 s of
# CPU, the segmenter test mIoU 0.73 (object classes 0.66) in 120 s.
DECENT = {
    "detect": {"epochs": 2, "batch_size": 16, "eval_count": 40},
    "segment": {"epochs": 2, "batch_size": 8, "eval_count": 40},
}


def tiny_scene_run(kind: Task, root: Path, stop_after: int | None = None):
    """A run of `kind` trained for one epoch on 8 scenes (seconds; it has learned next to nothing): for tests of
    loading, listing, pages and explainer plumbing. `stop_after`: stop after that many steps (a `stopped` run)."""
    import torch

    from xaidash.models.scenes.train import SceneTrainSettings, train_scene_model

    torch.set_num_threads(1)
    settings = SceneTrainSettings("scenes", MODELS[kind], epochs=1, batch_size=4, train_count=8, eval_count=4)
    calls = {"n": 0}

    def should_stop() -> bool:
        calls["n"] += 1
        return stop_after is not None and calls["n"] > stop_after

    return train_scene_model(settings, root=Path(root), should_stop=should_stop)


def trained_scene_run(tmp_path_factory: pytest.TempPathFactory, kind: Task):
    """A decently trained run of `kind` on `scenes` (DECENT), trained once per test session: under pytest-xdist the
    first worker that needs it trains it while holding a file lock in the session's shared temporary folder, and the
    others read it. Tests only read the run."""
    import torch
    from filelock import FileLock

    from xaidash.models.runs.store import Run
    from xaidash.models.scenes.train import SceneTrainSettings, train_scene_model

    name = f"scene_run_{kind}"
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    root = (shared / name) if shared else tmp_path_factory.getbasetemp() / name
    root.mkdir(parents=True, exist_ok=True)
    done = root / "run.json"
    with FileLock(str(root) + ".lock"):
        if done.exists():
            return Run(Path(json.loads(done.read_text())["path"]))
        torch.set_num_threads(1)
        run = train_scene_model(SceneTrainSettings("scenes", MODELS[kind], **DECENT[kind]), root=root)  # type: ignore[arg-type]
        assert run.summary().get("state") == "completed", run.summary().get("error")
        done.write_text(json.dumps({"path": str(run.path)}))
    return run
