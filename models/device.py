"""The compute device: which one to use, its name, waiting for it, bf16 autocast, and a plain description.

Everything that asks torch about CUDA or MPS goes through here, so the CLI, the engine, the
dashboard and the benchmarks agree on what "auto" means and how a device is called.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from xaidash.models.registry import ModelError


def mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def pick_device(device: str | None = "auto") -> torch.device:
    """cuda, then mps, then cpu for 'auto'; a clear error for a device this machine lacks."""
    if device in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelError("CUDA was asked for but no CUDA GPU is visible: use --device cpu or auto.")
    if dev.type == "mps" and not mps_available():
        raise ModelError("MPS was asked for but is not available: use --device cpu or auto.")
    return dev


def device_choices() -> list[str]:
    """What a user may ask for on this machine: auto, cpu, each CUDA GPU, and mps where there is one."""
    out = ["auto", "cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if mps_available():
        out.append("mps")
    return out


def device_name(device: torch.device) -> str:
    """'cuda (<GPU name>)' for a GPU, else the device type: what run configs and error messages show."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously): timings are wrong without it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, enabled: bool = True) -> AbstractContextManager[object]:
    """bf16 autocast on CUDA when enabled; elsewhere a context that changes nothing."""
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@dataclass(frozen=True)
class DeviceDescription:
    """The default device in words: a name ('GPU: NVIDIA H100') and a detail (memory in use, threads)."""

    name: str
    detail: str


def describe_default_device() -> DeviceDescription:
    """The device training and explanations use by default, with GPU name and memory when there is one."""
    dev = pick_device("auto")
    if dev.type == "cuda":
        idx = dev.index or 0
        props = torch.cuda.get_device_properties(idx)
        free, total = torch.cuda.mem_get_info(idx)
        return DeviceDescription(f"GPU: {props.name}", f"{(total - free) / 2**30:.1f} / {total / 2**30:.1f} GiB in use")
    if dev.type == "mps":
        return DeviceDescription("Apple GPU (MPS)", "")
    return DeviceDescription("CPU", f"{torch.get_num_threads()} threads, no GPU found")
