"""The `xaidash` command: train, runs, models, datasets, serve, and its error messages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xaidash.dashboard.cli import main, serve_command
from xaidash.data.registry import get_info


def test_train_then_runs(capsys):
    assert main(["train", "--dataset", "digits", "--model", "mlp", "--epochs", "1", "--quiet", "--device", "cpu"]) == 0
    out = capsys.readouterr()
    assert "completed: run" in out.out and "test acc" in out.out
    assert "epoch 1/1" in out.err
    assert main(["runs"]) == 0
    table = capsys.readouterr().out
    assert "mlp" in table and "digits" in table and "completed" in table and "1/1" in table


def test_clear_errors_exit_2(capsys):
    assert main(["train", "--dataset", "nope", "--epochs", "1"]) == 2
    assert "Unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["train", "--dataset", "shapes", "--model", "simple_cnn"]) == 2
    assert "needs 1x28x28" in capsys.readouterr().err
    assert main(["train", "--dataset", "mnist", "--model", "simple_cnn"]) == 2  # offline, empty data root
    err = capsys.readouterr().err
    assert "MNIST" in err and "empty_data_root" in err
    assert main(["runs", "--delete", "missing-run"]) == 2


def test_models_and_datasets_lists(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("simple_cnn", "resnet_small", "vit_tiny", "mlp", "text_cnn", "text_transformer", "minilm", "resnet18"):
        assert name in out
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "shapes" in out and "built in" in out and "needs download" in out


def test_datasets_found_under_the_data_root(offline_data, capsys):
    assert main(["datasets"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("mnist "))
    assert "available" in line


def test_serve_binds_to_localhost_with_an_upload_cap():
    cmd = serve_command("127.0.0.1", 8600)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8600"
    assert int(cmd[cmd.index("--server.maxUploadSize") + 1]) > 0


@pytest.mark.slow  # a fresh interpreter imports every layer
def test_console_script_help():
    out = subprocess.run(
        [sys.executable, "-m", "xaidash.dashboard.cli", "--help"], capture_output=True, text=True, check=True
    )
    for sub in ("train", "runs", "datasets", "serve"):
        assert sub in out.stdout


@pytest.mark.slow  # trains resnet18 and evaluates it on the shapes test split
def test_resnet18_offline_says_it_starts_from_random_weights(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))  # no cached ImageNet checkpoint
    assert (
        main(
            [
                "train",
                "--dataset",
                "shapes",
                "--model",
                "resnet18",
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--max-train-samples",
                "32",
                "--quiet",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "note: resnet18 starts from RANDOM weights" in err
    from xaidash.models.runs.store import list_runs

    assert "RANDOM weights" in list_runs()[0].config()["model_note"]


def test_resume_from_the_command_line_keeps_the_runs_own_settings(capsys):
    from xaidash.models.runs.store import list_runs

    assert main(["train", "--dataset", "digits", "--model", "mlp", "--epochs", "1", "--quiet", "--device", "cpu"]) == 0
    run_id = list_runs()[0].id
    # --dataset/--model keep their defaults (shapes, resnet_small): the run's own digits/mlp settings win
    assert main(["train", "--resume", run_id, "--epochs", "2", "--quiet", "--device", "cpu"]) == 0
    assert f"completed: run {run_id}" in capsys.readouterr().out
    run = list_runs()[0]
    assert run.config()["dataset"] == "digits" and run.summary()["epochs_done"] == 2


def test_train_without_a_model_picks_one_that_reads_the_data_set():
    from xaidash.models.cli import default_model
    from xaidash.models.registry import recommended_model

    assert default_model("mnist") == "resnet_small"  # the default where it fits
    assert default_model("ba_shapes") == recommended_model(get_info("ba_shapes")).name == "sage"
    assert default_model("ba_2motifs") == "gin"
    assert default_model("no_such_set") == "resnet_small"  # validate() refuses the data set in its own words
