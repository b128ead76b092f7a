"""Runs trained once per test session and shared by every test (and every pytest-xdist worker) that reads them."""

from __future__ import annotations

import json
import os

import pytest


def train_once(tmp_path_factory: pytest.TempPathFactory, name: str, config):
    """The TrainResult of `config` (a TrainConfig) trained offline under a runs root named `name`: under
    pytest-xdist the first worker that needs it trains it while holding a file lock in the session's shared
    temporary folder, and the others read its result. Tests only read the run."""
    from filelock import FileLock

    from xaidash.models.training.config import TrainResult
    from xaidash.models.training.engine import train

    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    root = (shared / name) if shared else tmp_path_factory.mktemp(name)
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with FileLock(str(root) + ".lock"):
        if done.exists():
            return TrainResult.from_message(json.loads(done.read_text()))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("XAIDASH_RUNS", str(root))
            mp.setenv("XAIDASH_OFFLINE", "1")
            result = train(config)
        assert result.state == "completed", result.error
        done.write_text(json.dumps(result.to_message()))
    return result
