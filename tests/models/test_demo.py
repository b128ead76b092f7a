"""The quick start's runs: which ones count as the demo (newest completed run of each demo model)."""

from __future__ import annotations

import os

from xaidash.models.runs.store import Run
from xaidash.models.training.demo import DEMO_RUNS, latest_demo_runs


def fake_run(model: str, state: str, stamp: int) -> Run:
    run = Run.create("shapes", model)
    run.write_config({"model": model, "dataset": "shapes", "created": stamp})
    run.update_summary(state=state)
    os.utime(run.path, (stamp, stamp))  # list_runs orders by folder time
    return run


def test_the_newest_completed_run_of_each_demo_model_is_found() -> None:
    old = fake_run("resnet_small", "completed", 1_000)
    new = fake_run("resnet_small", "completed", 2_000)
    fake_run("resnet_small", "failed", 3_000)  # newer, but not usable
    fake_run("mlp", "completed", 4_000)  # not a demo model
    text = fake_run("text_transformer", "completed", 1_500)
    Run.create("shapes", "vit_tiny").file("config.json").write_text("[damaged")
    found = latest_demo_runs()
    assert found == {"resnet_small": new.id, "text_transformer": text.id} and old.id not in found.values()
    assert set(found) <= {model for _, model in DEMO_RUNS}
