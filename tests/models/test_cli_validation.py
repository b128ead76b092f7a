"""Bad input to `xaidash train` (issue 21): every option, model options included, is refused in one line (exit 2)
before a run folder exists, by the same TrainConfig.validate the Train form's launches go through; a run that
fails while training (unreadable data, a full disk, a bug) ends `failed` with its reason, never `running`."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch
from PIL import Image
from safetensors import SafetensorError
from train_configs import quick

from xaidash.dashboard.cli import main
from xaidash.data.atomic import atomic_write
from xaidash.models.device import check_device, pick_device
from xaidash.models.registry import ModelError, get_spec, list_models
from xaidash.models.runs.store import Run, list_runs, runs_root
from xaidash.models.training.config import MAX_SEED
from xaidash.models.training.engine import train

TRAIN = ["train", "--dataset", "digits", "--model", "mlp", "--epochs", "1", "--quiet"]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--device", "bogus"], "Unknown device 'bogus': use auto, cpu, cuda, cuda:N (N a GPU index), mps."),
        (["--device", "cuda:0:1"], "Unknown device 'cuda:0:1'"),
        (["--device", "meta"], "Unknown device 'meta'"),
        (["--device", "cpu:1"], "Unknown device 'cpu:1'"),
        (["--seed", str(2**64)], f"the seed must be a whole number between 0 and {MAX_SEED}"),
        (["--seed", str(2**32)], f"the seed must be a whole number between 0 and {MAX_SEED}"),
        (["--model-option", "dropout=7"], "dropout 7 is out of range: it must be in [0, 1)"),
        (["--model-option", "dropout=1"], "dropout 1 is out of range: it must be in [0, 1)"),
        (["--model-option", "dropout=-0.1"], "dropout -0.1 is out of range"),
        (["--model-option", "dropout=NaN"], "dropout must be a finite number"),
        (["--model-option", "dropout=high"], "dropout must be a number, not 'high'"),
        (["--model-option", "colour=red"], "mlp has no option 'colour' (it takes: dropout [0, 1))"),
        (["--model-option", "dropout"], "--model-option 'dropout': write KEY=VALUE"),
        (["--master-port", "70000"], "--master-port"),
    ],
)
def test_bad_train_options_are_one_line_and_leave_no_folder(option, says, capsys) -> None:
    try:
        code = main([*TRAIN, *option])
    except SystemExit as stop:  # refused by argparse's types: its usage line, also exit 2
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not runs_root().exists() or not list(runs_root().iterdir())


def test_cuda_when_there_is_none_and_gpu_indices_beyond_the_machine(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    for device in ("cuda", "cuda:0"):
        with pytest.raises(ModelError, match="no CUDA GPU is visible"):
            check_device(device)
    assert pick_device("auto").type in ("cpu", "mps") and check_device(None) == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1") == "cuda:1" and check_device(" CUDA ") == "cuda"
    with pytest.raises(ModelError, match=r"There is no GPU cuda:2: this machine has 2 \(cuda:0 to cuda:1\)"):
        check_device("cuda:2")


def test_the_train_forms_validation_refuses_the_same(monkeypatch) -> None:
    """The dashboard's launches go through jobs.check_config -> TrainConfig.validate: the same refusals."""
    from xaidash.dashboard.jobs import check_config

    for cfg, says in (
        (quick(device="bogus"), "Unknown device"),
        (quick(seed=2**64), "seed"),
        (quick(seed=-1), "seed"),
        (quick(model_options={"dropout": 7}), "dropout 7 is out of range"),
        (quick(model_options={"hidden": 3}), "mlp has no option 'hidden'"),
        (quick(model="vit_tiny", model_options={"patch_size": 0}), "patch_size 0 is out of range"),
        (quick(model="vit_tiny", model_options={"patch_size": 2.5}), "patch_size must be a whole number"),
        (quick(model="resnet18", dataset="shapes", model_options={"pretrained": "no"}), "pretrained must be true"),
    ):
        with pytest.raises(ModelError, match=says):
            check_config(cfg)
    check_config(quick(model="vit_tiny", model_options={"patch_size": None, "dropout": 0.1}))  # declared and in range


def test_every_zoo_option_a_builder_reads_is_declared() -> None:
    """A builder's keyword arguments (less the engine's own vocab_size and pad_id) are the options a user may set:
    each must be declared with its range on the spec, or the user's value would be refused (or a new option
    unchecked)."""
    import inspect

    for spec in list_models():
        accepted = {
            name
            for name, p in inspect.signature(spec.build).parameters.items()
            if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty
        } - {"vocab_size", "pad_id"}
        assert accepted == set(spec.options), (spec.name, accepted, set(spec.options))
    assert get_spec("mlp").options_text() == "dropout [0, 1)"


def test_a_model_that_cannot_be_built_leaves_no_folder() -> None:
    """vit_tiny's patch size is in range but does not divide digits' 8x8 images: refused by the builder, after
    the folder was made; the folder goes with the refusal."""
    with pytest.raises(ModelError, match="patch size 3 does not divide 8x8"):
        train(quick(model="vit_tiny", model_options={"patch_size": 3}, epochs=1))
    assert not runs_root().exists() or not list(runs_root().iterdir())


def test_a_truncated_jpeg_fails_the_run_with_its_reason(tmp_path: Path, capsys) -> None:
    """The scan's structural check passes a truncated JPEG; decoding it while training fails: the run ends failed
    with the file named (it said `running` for ever before), and the CLI says so in one line."""
    folder = tmp_path / "pets"
    for label in ("cat", "dog"):
        (folder / label).mkdir(parents=True)
        for i in range(6):
            Image.effect_noise((12, 12), 40 + 10 * i).convert("RGB").save(folder / label / f"{i}.png")
    whole = folder / "dog" / "whole.jpg"
    Image.effect_noise((64, 64), 60).convert("RGB").save(whole, quality=95)
    data = whole.read_bytes()
    (folder / "dog" / "broken.jpg").write_bytes(data[: len(data) * 2 // 3])  # the header whole, the scan cut
    whole.unlink()
    dataset = f"imagefolder:{folder}?size=8"
    code = main([*TRAIN[:2], dataset, "--model", "mlp", "--epochs", "1", "--batch-size", "4", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    # The scan's note in the command's own words (issue 36): `warning: ...`, no source path, no warning class.
    noted = [line for line in err.splitlines() if "training will fail on it" in line]
    assert len(noted) == 1 and noted[0].startswith(f"warning: imagefolder {folder}: "), err
    assert "UserWarning" not in err and ".py:" not in err
    (run,) = list_runs()
    summary = run.summary()
    assert summary["state"] == "failed" and "broken.jpg" in summary["error"], summary
    assert f"error: run {run.id} failed: Cannot read image" in err


def test_a_full_disk_while_saving_weights_is_the_disk_full_message(monkeypatch) -> None:
    """safetensors reports a failed write as SafetensorError('... (os error 28)'): a traceback before; now the
    OSError it wraps, so the run fails with 'the disk is full' like every other save."""
    import xaidash.models.runs.checkpoint as checkpoint

    real = checkpoint.save_file
    calls = {"n": 0}

    def full_after_two(tensors, filename, metadata=None):
        calls["n"] += 1
        if calls["n"] > 2:
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real(tensors, filename, metadata=metadata)

    monkeypatch.setattr(checkpoint, "save_file", full_after_two)
    result = train(quick(epochs=2))
    assert result.state == "failed" and "the disk is full" in (result.error or ""), result.error
    assert "model.safetensors" in (result.error or "") or "train_state" in (result.error or "")
    assert not list(result.run.path.glob(".*.tmp"))  # no temporary file left behind


def test_atomic_write_turns_wrapped_os_errors_into_oserror(tmp_path: Path) -> None:
    def wrapped(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    with pytest.raises(OSError) as info:
        atomic_write(tmp_path / "w.safetensors", wrapped)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "w.safetensors")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SafetensorError):  # a SafetensorError that is no I/O failure stays what it is
        atomic_write(tmp_path / "x", lambda tmp: (_ for _ in ()).throw(SafetensorError("bad dtype")))


def test_an_unexpected_error_while_training_marks_the_run_failed(monkeypatch) -> None:
    """A bug is still a traceback (it is ours to fix), but the run says failed with the error, not running."""
    import xaidash.models.training.engine as engine

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a step")

    monkeypatch.setattr(engine, "run_epoch", broken)
    with pytest.raises(RuntimeError, match="a bug in a step"):
        train(quick(epochs=1))
    (run,) = list_runs()
    assert Run(run.path).summary()["state"] == "failed"
    assert Run(run.path).summary()["error"] == "a bug in a step"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["zoo:mlp", "--option", "dropout=7"], "dropout 7 is out of range"),
        (["zoo:mlp", "--option", "colour=red"], "mlp has no option 'colour'"),
        (["timm:resnet18", "--std", "0,0.2,0.2"], "--std 0.0,0.2,0.2: every value must be above 0"),
        (["timm:resnet18", "--mean", "nan,0,0"], "give 1 or 3 finite numbers"),
        (["timm:resnet18", "--mean", "0.5,0.5", "--std", "0.2"], "give 1 or 3 finite numbers"),
        (["timm:resnet18", "--mean", "0.5", "--std", "0.2,0.2,0.2"], "--mean has 1 values and --std 3"),
    ],
)
def test_bad_import_options_are_refused_before_anything_runs(argv, says, capsys) -> None:
    """A std of 0 divided every input by zero; an out-of-range zoo option reached the builder."""
    assert main(["import", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    assert not runs_root().exists() or not list(runs_root().iterdir())
