"""Checkpoints: safetensors round trips, refusal of mismatched architectures, no pickle."""

from __future__ import annotations

import pytest
import torch

from xaidash.data.registry import DatasetInfo
from xaidash.models import build_model
from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import load_training_state, load_weights, save_training_state, save_weights

GREY = DatasetInfo(name="t", modality="image", classes=tuple("0123456789"), input_shape=(1, 28, 28))


def test_weights_round_trip(tmp_path):
    a = build_model("simple_cnn", GREY)
    save_weights(a, tmp_path / "w.safetensors", {"epoch": "1"})
    b = build_model("simple_cnn", GREY)
    meta = load_weights(b, tmp_path / "w.safetensors")
    assert meta["epoch"] == "1"
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temporary file


def test_mismatched_architecture_is_refused_with_the_layer_named(tmp_path):
    save_weights(build_model("simple_cnn", GREY), tmp_path / "w.safetensors")
    five = DatasetInfo(name="t", modality="image", classes=tuple("01234"), input_shape=(1, 28, 28))
    with pytest.raises(ModelError, match=r"shape mismatch at classifier\.2\.weight"):
        load_weights(build_model("simple_cnn", five), tmp_path / "w.safetensors")
    with pytest.raises(ModelError, match="does not match the model architecture"):
        load_weights(build_model("resnet_small", GREY), tmp_path / "w.safetensors")


def test_corrupt_and_pickled_files_are_refused(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ModelError, match="not a readable safetensors file"):
        load_weights(build_model("simple_cnn", GREY), bad)
    pickled = tmp_path / "pickled.safetensors"
    torch.save(build_model("simple_cnn", GREY).state_dict(), pickled)  # a torch pickle under the right name
    with pytest.raises(ModelError):
        load_weights(build_model("simple_cnn", GREY), pickled)
    with pytest.raises(ModelError, match="does not exist"):
        load_weights(build_model("simple_cnn", GREY), tmp_path / "missing.safetensors")


def test_optimizer_state_round_trip(tmp_path):
    model = build_model("simple_cnn", GREY)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 1, 28, 28)).sum().backward()
    opt.step()
    save_training_state(tmp_path / "s.safetensors", opt, {"epoch": 2})
    opt2 = torch.optim.Adam(model.parameters(), lr=1e-3)
    extra = load_training_state(tmp_path / "s.safetensors", opt2)
    assert extra == {"epoch": 2}
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s1["param_groups"][0]["lr"] == s2["param_groups"][0]["lr"]
    for idx in s1["state"]:
        for key, value in s1["state"][idx].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(s2["state"][idx][key]))
