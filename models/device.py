"""The compute device: which one to use, its name, waiting for it, bf16 autocast, and a plain description.

Everything that asks torch about CUDA or MPS goes through here, so the CLI, the engine, the
dashboard and the benchmarks agree on what "auto" means and how a device is called.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xaidash.models.registry import ModelError


def mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


# What a user may write for a device: torch.device accepts far more ("meta", "xla", "cuda:0:1" raises a bare
# RuntimeError), and none of the rest trains or explains here.
ACCEPTED_DEVICES = "auto, cpu, cuda, cuda:N (N a GPU index), mps"
_DEVICE = re.compile(r"(auto|cpu|cuda|mps)(?::([0-9]{1,4}))?\Z")


def check_device(device: str | None) -> str:
    """`device` when it names a device this machine has (see ACCEPTED_DEVICES); ModelError saying what is
    accepted otherwise, or that the GPU asked for is not here. None and '' mean auto."""
    text = "auto" if device in (None, "") else str(device).strip().lower()
    match = _DEVICE.match(text)
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise ModelError(f"Unknown device {str(device)[:40]!r}: use {ACCEPTED_DEVICES}.")
    kind, index = match.group(1), match.group(2)
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ModelError("CUDA was asked for but no CUDA GPU is visible: use --device cpu or auto.")
        if index is not None and int(index) >= count:
            raise ModelError(
                f"There is no GPU {text}: this machine has {count} (cuda:0 to cuda:{count - 1}); use one of them, "
                "cpu or auto."
            )
    if kind == "mps" and not mps_available():
        raise ModelError("MPS was asked for but is not available: use --device cpu or auto.")
    return text


def device_arg(text: str) -> str:
    """An argparse `type=` for --device: refused at parse time (usage line, exit 2) like any bad option."""
    import argparse

    try:
        return check_device(text)
    except ModelError as e:
        raise argparse.ArgumentTypeError(str(e).rstrip(".")) from None


def pick_device(device: str | None = "auto") -> torch.device:
    """cuda, then mps, then cpu for 'auto'; a clear error for a device this machine lacks or that is no device."""
    text = check_device(device)
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(text)


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


def best_time(
    fn: Callable[[], Any],
    device: torch.device,
    repeats: int,
    warmup: Callable[[], Any] | None = None,
    budget_s: float = math.inf,
) -> float:
    """Best wall time of up to `repeats` calls of fn (the device's queue waited for around each), after one
    warm-up call (of `warmup` when given); timing stops early once `budget_s` is spent. For the benchmarks."""
    (warmup or fn)()
    times: list[float] = []
    while len(times) < max(1, repeats) and sum(times) < budget_s:
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def device_label(device: torch.device) -> str:
    """The device in one line for benchmark records: the GPU's name, or the CPU with its cores and torch threads."""
    if device.type == "cuda":
        return device_name(device)
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    return f"cpu ({cpu}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()})"


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously): timings are wrong without it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# How allocators word a failed allocation: CUDA/MPS "out of memory", the CPU allocator
# "DefaultCPUAllocator: not enough memory: you tried to allocate ..." (or the OS's "Cannot allocate memory").
_OOM_WORDS = ("out of memory", "not enough memory", "cannot allocate memory", "can't allocate memory")


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` says an allocation failed (CUDA, MPS or the CPU allocator)."""
    if isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(err, RuntimeError) and any(w in str(err).lower() for w in _OOM_WORDS)


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (x86 AVX512-BF16 or AMX). There bf16 autocast about halves
    training time (2-2.5x per step for resnet_small and vit_tiny on this project's 2-core CPU); elsewhere
    bf16 is emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def autocast(device: torch.device, enabled: bool = True) -> AbstractContextManager[object]:
    """bf16 autocast when enabled, on CUDA and on CPUs with native bf16; elsewhere a context that changes nothing."""
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if enabled and device.type == "cpu" and cpu_has_native_bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)
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
