"""Run states as facts on the pages (issue 15): interrupted runs in the runs table, the sidebar and the Train page
(Resume, or Restart with its settings), the warning over a NaN-weight run's page and maps, and a ?sample= link
beyond the test split."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict

import pytest
import torch
from app_pages import assert_ok, open_page
from app_pages import make_app as _make_app
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.services import job_manager
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.lock import LOCK
from xaidash.models.runs.store import WEIGHTS, Run, load_bundle, resolve_run
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

make_app = functools.partial(_make_app, timeout=120)
SETTINGS = asdict(TrainConfig(dataset="digits", model="mlp", epochs=3, batch_size=32, device="cpu"))


def interrupted_run(with_checkpoint: bool) -> Run:
    """What a training killed with SIGKILL leaves: 'running' in its summary, a lock naming a dead process."""
    run = Run.create("digits", "mlp")
    classes = [str(i) for i in range(10)]
    run.write_config(
        {"model": "mlp", "dataset": "digits", "classes": classes, "train": SETTINGS, "device": "cpu"}
        | {"created": time.time()}
    )
    done = 1 if with_checkpoint else 0
    kept = "weights after epoch 1 of 3" if with_checkpoint else "nothing yet"
    run.update_summary(state="running", epochs_done=done, epochs=3, kept=kept, val_acc=0.5 if done else None)
    if with_checkpoint:
        run.file(WEIGHTS).write_bytes(b"")  # the page never loads them here
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run.path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": 0}))
    return run


def recording_engine(calls: list[dict], done: threading.Event):
    def fn(cfg, callbacks, stop, resume=None):
        calls.append({"model": cfg.model, "epochs": cfg.epochs, "resume": resume})
        done.set()
        result = type("R", (), {})()
        run = resolve_run(resume) if resume else Run.create(cfg.dataset, cfg.model)  # nothing trained
        result.run, result.state, result.error, result.test_acc, result.test_loss = run, "stopped", None, None, None
        return result

    return fn


def states(at: AppTest) -> dict[str, str]:
    df = next(d.value for d in at.dataframe if d.key == "train_runs_table")
    return dict(zip(df["run"], df["state"], strict=True))


def test_interrupted_runs_say_so_and_offer_resume_or_restart(monkeypatch):
    calls: list[dict] = []
    done = threading.Event()
    monkeypatch.setattr(job_manager(), "train_fn", recording_engine(calls, done))
    empty = interrupted_run(with_checkpoint=False)
    saved = interrupted_run(with_checkpoint=True)
    at = open_page(make_app(saved.id), "views/train.py")
    assert states(at) == {saved.id: "interrupted · resumable", empty.id: "interrupted · nothing saved"}
    assert any("interrupted, epochs 1/3" in c.value for c in at.sidebar.caption)
    warning = " ".join(w.value for w in at.warning)
    assert f"xaidash train --resume {saved.id}" in warning and "epoch 1 of 3" in warning
    next(b for b in at.button if b.label == "Resume").click().run()
    assert_ok(at)
    assert done.wait(30) and calls[-1] == {"model": "mlp", "epochs": 3, "resume": saved.id}
    job_manager().wait(30)

    done.clear()
    at = open_page(make_app(empty.id), "views/train.py")
    assert "nothing to resume" in " ".join(w.value for w in at.warning)
    assert any("interrupted before its first checkpoint" in c.value for c in at.caption)  # not 'no weights yet'
    # This run offers no Resume (the job panel above may offer one for the run the last job resumed, from its folder).
    assert not [b for b in at.button if b.label == "Resume" and str(b.key).endswith(f"_{empty.id}")]
    next(b for b in at.button if b.label == "Restart with its settings").click().run()
    assert_ok(at)
    assert done.wait(30) and calls[-1] == {"model": "mlp", "epochs": 3, "resume": None}
    job_manager().wait(30)


@pytest.fixture
def nan_run() -> Run:
    result = train(TrainConfig(dataset="digits", model="mlp", epochs=1, max_train_samples=64, device="cpu"))
    model = load_bundle(result.run, device="cpu").model
    with torch.no_grad():
        next(p for p in model.parameters() if p.dim() > 1).fill_(float("inf"))
    save_weights(model, result.run.file(WEIGHTS))
    return result.run


def test_a_nan_weight_run_is_flagged_on_its_pages_and_over_every_map(nan_run):
    at = open_page(make_app(nan_run.id), "views/explain.py")
    assert any("NaN or infinite" in w.value for w in at.main.warning)  # the page header
    assert any("NaN or infinite" in w.value for w in at.sidebar.warning)

    def cards() -> None:
        import os

        import numpy as np
        import streamlit as st

        from xaidash.dashboard.components.explain_maps import map_card
        from xaidash.explainers.figures.map_figure import map_figure
        from xaidash.explainers.registry import get_method

        st.session_state["xai_selected_run"] = os.environ["RUN_ID"]
        fig = map_figure(get_method("saliency", "image"), np.ones((8, 8)), target=0, classes=["a", "b"], scale=1.0)
        for i in range(2):
            map_card(fig, key=f"card{i}", title=f"method {i}")

    os.environ["RUN_ID"] = nan_run.id
    try:
        maps = AppTest.from_function(cards).run()
    finally:
        del os.environ["RUN_ID"]
    assert_ok(maps)
    assert [w.value for w in maps.warning] == ["NaN/inf weights: this map is not meaningful"] * 2


def test_a_sample_link_beyond_the_test_split_names_the_valid_range(nan_run):
    nan_run.update_summary(state="completed")
    at = make_app(nan_run.id)
    at.query_params["sample"] = "test:99999"
    open_page(at, "views/explain.py")
    errors = " ".join(e.value for e in at.error)
    assert "Cannot open test sample #99999" in errors and "valid: 0 to" in errors
