"""The runs tables' quality column (issue 29: blank for good runs): every run gets a verdict, a good one too, in the
dashboard's table and in `xaidash runs`."""

from __future__ import annotations

import json
import os
import socket
import time

import torch
from torch import nn
from train_configs import quick

from xaidash.dashboard.cli import main
from xaidash.dashboard.run_facts import run_row
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.lock import LOCK
from xaidash.models.runs.quality import GOOD, PENDING, POOR, UNMEASURED, quality_label
from xaidash.models.runs.store import WEIGHTS, Run
from xaidash.models.runs.table import runs_table
from xaidash.models.training.engine import train

CLASSES = ["circle", "square", "triangle", "cross"]


def judged(state: str = "completed", weights: str | None = "ok", **summary) -> Run:
    run = Run.create("shapes", "mlp")
    config = {"model": "mlp", "dataset": "shapes", "classes": CLASSES, "train": {"epochs": 3}, "created": time.time()}
    run.write_config(config | {"recipe": {"key": "shapes", "expected_acc": 0.98}})
    run.update_summary(state=state, **summary)
    if weights is not None:
        model = nn.Linear(4, 2)
        if weights == "nan":
            with torch.no_grad():
                model.weight[0, 0] = float("nan")
        save_weights(model, run.file(WEIGHTS))
    return run


def test_a_good_run_shows_that_it_is_good_and_every_other_run_says_what_it_is():
    assert quality_label(judged(test_acc=0.97, val_acc=0.96)) == GOOD
    assert quality_label(judged(test_acc=0.30)) == POOR  # near chance (25% for four classes)
    assert quality_label(judged(test_acc=0.80)) == POOR  # far below its recipe's 98%
    assert quality_label(judged("stopped", val_acc=0.97, test_acc=None)) == GOOD  # judged by validation when untested
    assert quality_label(judged("failed", test_acc=None)) == "⚠ training failed"
    assert quality_label(judged(weights="nan", test_acc=0.97)) == "⚠ NaN/inf weights"
    assert quality_label(judged("stopped", weights=None)) == UNMEASURED
    training = judged("running", val_acc=0.30)  # its first epochs are near chance by nature
    lock = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "heartbeat": time.time()}
    (training.path / LOCK).write_text(json.dumps(lock))
    assert quality_label(training) == PENDING


def test_a_trained_run_is_good_in_the_dashboards_table_and_in_xaidash_runs(capsys):
    run = train(quick(epochs=2)).run
    assert run.summary()["test_acc"] > 0.9
    assert run_row(run)["quality"] == GOOD  # blank before: only problems were written
    assert runs_table()[0]["quality"] == GOOD
    assert main(["runs"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "quality" in header and row[header.index("quality") :].startswith(GOOD)
