"""The device module: picking, naming, synchronising, autocast, and the sidebar's description.

CUDA is stood in for by monkeypatched torch.cuda functions, so the GPU branches run on any machine.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from xaidash.models.device import (
    autocast,
    describe_default_device,
    device_choices,
    device_name,
    pick_device,
    synchronize,
)
from xaidash.models.registry import ModelError


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr("xaidash.models.device.mps_available", lambda: False)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    """Two CUDA GPUs as far as the device module can tell; returns the devices synchronised."""
    synced: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU 80GB")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda idx: SimpleNamespace(name="Fake GPU 80GB"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda idx: (60 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    return synced


def test_without_a_gpu_auto_is_the_cpu_and_gpus_are_refused(no_gpu):
    assert pick_device("auto") == pick_device(None) == pick_device("") == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ModelError, match="no CUDA GPU is visible"):
        pick_device("cuda:0")
    with pytest.raises(ModelError, match="MPS was asked for"):
        pick_device("mps")
    assert device_choices() == ["auto", "cpu"]
    assert device_name(torch.device("cpu")) == "cpu"


def test_cpu_description_names_the_threads(no_gpu):
    d = describe_default_device()
    assert d.name == "CPU" and d.detail == f"{torch.get_num_threads()} threads, no GPU found"


def test_with_a_gpu_auto_is_cuda_and_it_is_named_and_described(fake_gpu):
    assert pick_device("auto") == torch.device("cuda")
    assert pick_device("cuda:1") == torch.device("cuda", 1)
    assert device_choices()[:4] == ["auto", "cpu", "cuda:0", "cuda:1"]
    assert device_name(torch.device("cuda", 1)) == "cuda (Fake GPU 80GB)"
    d = describe_default_device()
    assert d.name == "GPU: Fake GPU 80GB" and d.detail == "20.0 / 80.0 GiB in use"


def test_synchronize_waits_only_for_cuda(fake_gpu):
    synchronize(torch.device("cpu"))
    assert fake_gpu == []
    synchronize(torch.device("cuda", 1))
    assert fake_gpu == [torch.device("cuda", 1)]


def test_autocast_is_bf16_on_cuda_and_on_cpus_with_native_bf16(monkeypatch):
    from xaidash.models import device

    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    with autocast(torch.device("cpu"), enabled=True):
        assert not torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    with autocast(torch.device("cpu"), enabled=True):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast(torch.device("cpu"), enabled=False):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with warnings.catch_warnings():  # without CUDA, torch warns that it disables the context it made
        warnings.simplefilter("ignore", UserWarning)
        cuda_context = autocast(torch.device("cuda"), enabled=True)
    assert isinstance(cuda_context, torch.autocast)
    assert cuda_context.device == "cuda" and cuda_context.fast_dtype == torch.bfloat16
    assert not autocast(torch.device("cuda"), enabled=False)._enabled
