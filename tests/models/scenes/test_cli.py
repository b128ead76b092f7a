"""`xaidash scenes train` and `xaidash scenes evaluate` through the models layer's own `add_commands`."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from xaidash.models.runs.store import list_runs
from xaidash.models.scenes.cli import add_commands


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="xaidash scenes")
    add_commands(parser.add_subparsers(dest="scenes_command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_train_then_evaluate(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--epochs", "1", "--train-count", "4", "--batch-size", "4", "--eval-count", "4", "--device", "cpu"]
    assert _main(["train", "--data", "scenes", "--model", "unet_small", *tiny]) == 0
    out = capsys.readouterr().out
    assert "1 epochs of 1 steps" in out and "epoch 1/1 done" in out and "test: miou" in out
    (run,) = list_runs()
    assert _main(["evaluate", "--run", run.id, "--count", "3", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert 0 <= metrics["miou"] <= 1 and "iou/background" in metrics
    assert _main(["evaluate", "--run", "latest", "--split", "val", "--count", "2"]) == 0
    assert "val split, 2 images; judged by miou" in capsys.readouterr().out


def test_bad_numbers_are_refused_at_parse_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _main(["train", "--data", "scenes", "--model", "unet_small", "--epochs", "0"])
    assert e.value.code == 2 and "out of range" in capsys.readouterr().err
