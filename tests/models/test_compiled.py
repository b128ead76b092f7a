"""--compile and --channels-last: the steps through torch.compile, the fallback to eager, NHWC weights."""

from __future__ import annotations

import argparse

import pytest
import torch
import train_configs

from xaidash.models.cli import add_commands, config_from_args
from xaidash.models.runs.checkpoint import load_training_state, read_tensors, save_training_state
from xaidash.models.training import compiled
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train
from xaidash.models.training.session import setup_run


def quick(**kw) -> TrainConfig:
    return train_configs.quick(**{"epochs": 1, **kw})


@pytest.fixture
def aot_eager(monkeypatch):
    """torch.compile's graph capture and compiled autograd without inductor's C++ build (seconds, not a minute)."""
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")


def weights(result) -> dict[str, torch.Tensor]:
    return read_tensors(result.run.file("model.safetensors"))[0]


def test_compiled_steps_train_the_same_model_as_eager_ones(aot_eager):
    eager = train(quick())
    compiled_run = train(quick(compile="on"))
    assert compiled_run.state == "completed"
    assert compiled_run.run.summary()["compiled"] == "torch.compile (aot_eager)"
    assert compiled_run.run.config()["train"]["compile"] == "on"
    a, b = weights(eager), weights(compiled_run)
    assert all(torch.allclose(a[k], b[k], atol=1e-4) for k in a)
    assert abs(compiled_run.test_acc - eager.test_acc) < 0.02


def test_a_model_torch_compile_cannot_handle_trains_eagerly_with_the_reason(monkeypatch):
    def broken(model, **kw):
        def run(x):
            raise RuntimeError("InductorError: no working C++ compiler found\nmore details")

        return run

    monkeypatch.setattr(torch, "compile", broken)
    eager = train(quick())
    with pytest.warns(RuntimeWarning, match="torch.compile failed"):
        fell_back = train(quick(compile="graphs"))
    assert fell_back.state == "completed"
    assert fell_back.run.summary()["compiled"] == (
        "eager: torch.compile failed (InductorError: no working C++ compiler found)"
    )
    a, b = weights(eager), weights(fell_back)
    assert all(torch.equal(a[k], b[k]) for k in a)  # the failed step was taken again: no step lost


def test_out_of_memory_in_a_compiled_step_fails_the_run_instead_of_falling_back(monkeypatch):
    def oom(model, **kw):
        def run(x):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

        return run

    monkeypatch.setattr(torch, "compile", oom)
    result = train(quick(compile="on"))
    assert result.state == "failed" and "Out of memory" in result.error


def test_unknown_compile_mode_is_refused():
    from xaidash.models.registry import ModelError

    with pytest.raises(ModelError, match="unknown compile mode 'fast'"):
        setup_run(quick(compile="fast"))


def test_channels_last_applies_to_convolution_networks_and_checkpoints_load(tmp_path):
    session = setup_run(quick(dataset="shapes", model="resnet_small", channels_last=True, max_train_samples=64))
    conv = next(m for m in session.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert session.channels_last and conv.weight.is_contiguous(memory_format=torch.channels_last)
    session.lock.release()
    result = train(quick(dataset="shapes", model="resnet_small", channels_last=True, max_train_samples=64))
    assert result.state == "completed" and result.bundle is not None
    assert result.run.config()["memory_format"] == "channels_last"
    mlp = setup_run(quick(channels_last=True))
    assert not mlp.channels_last  # no convolution: nothing to lay out
    assert mlp.run.config()["memory_format"] == "contiguous"
    mlp.lock.release()


def test_a_resumed_optimizer_keeps_this_devices_update_kernels(tmp_path):
    params = [torch.nn.Parameter(torch.randn(3))]
    saved = torch.optim.Adam(params, lr=0.1, foreach=True)
    params[0].grad = torch.ones(3)
    saved.step()
    save_training_state(tmp_path / "state.safetensors", saved, {})
    here = torch.optim.Adam(params, lr=0.1, foreach=False)
    load_training_state(tmp_path / "state.safetensors", here)
    assert here.param_groups[0]["foreach"] is False and here.param_groups[0]["lr"] == 0.1
    assert int(here.state[params[0]]["step"]) == 1


def test_train_command_takes_the_compile_and_layout_flags():
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["train", "--dataset", "shapes", "--compile", "graphs", "--channels-last"])
    cfg = config_from_args(args)
    assert cfg.compile == "graphs" and cfg.channels_last
    default = config_from_args(parser.parse_args(["train"]))
    assert default.compile == "off" and not default.channels_last


@pytest.mark.slow  # inductor's first C++ build takes about 30 s on 2 cores
def test_inductor_compiles_the_steps_on_this_machine():
    result = train(quick(epochs=2, compile="on"))
    assert result.state == "completed" and result.test_acc > 0.85, (result.error, result.test_acc)
    assert result.run.summary()["compiled"] == "torch.compile (inductor)"
