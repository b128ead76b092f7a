"""Several processes training one run (DistributedDataParallel): each process's place in the group and the few
collectives the engine needs.

PyTorch does the distributed work: `torch.distributed` (process group, collectives), DistributedDataParallel
(gradient all-reduce, around the model in models/training/session.py) and its elastic launcher (started by
models/training/launcher.py). This module only gives the engine what it needs to know and do:

- `DistContext`: this process's rank, the world size and backend, and the few collectives the engine needs
  (sums of metrics, one agreed stop flag, rank 0's run folder, rank 0's BatchNorm buffers). The one-process
  run gets `SINGLE`, whose collectives are no-ops, so the engine has one code path.
- `init_from_env`: joining the process group the launcher (or torchrun) described; `default_backend`: NCCL on
  CUDA, gloo otherwise; `check_batch`: the global batch split evenly over the processes.
- `gpu_count`, `process_choices`, `free_port`: what the Train form and the launcher ask about this machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as tdist

from xaidash.data.errors import plain_message
from xaidash.models.registry import ModelError

if TYPE_CHECKING:
    from xaidash.models.runs.store import Run


@dataclass(frozen=True)
class DistContext:
    """This process's place in the run: rank (0 writes the run folder and emits events), world size, backend."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        """What config.json records as "distributed"."""
        return {"world_size": self.world_size, "backend": self.backend}

    def device(self, requested: str) -> torch.device:
        """The device this rank trains on: its own GPU (cuda:LOCAL_RANK) when CUDA is asked for or auto."""
        from xaidash.models.device import pick_device

        dev = pick_device(requested)
        if self.active and dev.type == "cuda":
            dev = torch.device("cuda", self.local_rank % max(1, torch.cuda.device_count()))
            torch.cuda.set_device(dev)
        return dev

    # ---- collectives (no-ops in one process) -------------------------------------------------------------------
    def sum(self, values: Sequence[torch.Tensor | float | int], device: torch.device) -> list[float]:
        """Each value summed over all ranks (one all_reduce for all of them, float64)."""
        flat = torch.stack([torch.as_tensor(v, dtype=torch.float64, device=device).reshape(()) for v in values])
        if self.active:
            tdist.all_reduce(flat)
        return flat.tolist()

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """A tensor summed over all ranks (in place; returned for chaining)."""
        if self.active:
            tdist.all_reduce(tensor)
        return tensor

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when it is True on any: the one stop decision all ranks act on at the same step."""
        if not self.active:
            return flag
        t = torch.tensor([1 if flag else 0], device=device)
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        return bool(t.item())

    def from_main(self, value: Any) -> Any:
        """Rank 0's `value` on every rank (a picklable object)."""
        if not self.active:
            return value
        box = [value]
        tdist.broadcast_object_list(box, src=0)
        return box[0]

    def sync_buffers(self, model: torch.nn.Module) -> None:
        """Rank 0's buffers (BatchNorm running statistics) on every rank, so all evaluate the same model:
        DDP broadcasts them before each training forward, and each rank's last forward updated its own."""
        if self.active:
            for buffer in model.buffers():
                tdist.broadcast(buffer.data, src=0)

    def barrier(self) -> None:
        if self.active:
            tdist.barrier()

    def mark_failed(self, run: Run, error: BaseException) -> None:
        """A rank's crash in the run's summary (when it still says 'running': the first failure is the reason;
        later ones are usually other ranks losing their peer). The one write a rank other than 0 makes."""
        with _suppress_all():
            if run.summary().get("state", "running") == "running":
                run.update_summary(state="failed", error=f"rank {self.rank} failed: {plain_message(error)}")


SINGLE = DistContext()


class _suppress_all:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return True


def default_backend(device: str) -> str:
    """nccl for CUDA training (when built in), gloo for CPUs (and as the fallback)."""
    from xaidash.models.device import pick_device

    try:
        cuda = pick_device(device).type == "cuda"
    except ModelError:
        cuda = False
    return "nccl" if cuda and tdist.is_nccl_available() else "gloo"


def gpu_count() -> int:
    """CUDA devices visible: the Train form offers several processes (one per GPU) when there are two or more."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def process_choices(device: str = "auto") -> list[int]:
    """The numbers of training processes (one per GPU) the Train form offers for `device`: [] (no choice shown)
    below two visible GPUs or for a device that is not CUDA."""
    n = gpu_count()
    return list(range(1, n + 1)) if n > 1 and device.split(":")[0] in ("auto", "cuda") else []


def free_port() -> int:
    """A TCP port nobody listens on now, for the rendezvous of a one-machine run."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_from_env(backend: str | None, device: str) -> DistContext:
    """Join the process group described by the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT: what torchrun and elastic_launch set)."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    backend = backend or default_backend(device)
    if world > 1 and not tdist.is_initialized():
        if backend == "nccl" and torch.cuda.is_available():
            torch.cuda.set_device(local % torch.cuda.device_count())
        tdist.init_process_group(backend=backend, init_method="env://")
    return DistContext(rank=rank, world_size=world, local_rank=local, backend=backend)


def check_batch(batch_size: int | None, world_size: int) -> None:
    """The global batch is --batch-size (what the recipes tune the learning rate for), split evenly."""
    if batch_size is not None and batch_size % world_size:
        raise ModelError(
            f"Batch size {batch_size} does not split evenly over {world_size} processes: each takes an equal share "
            f"of the global batch. Give a multiple of {world_size} (--batch-size)."
        )
