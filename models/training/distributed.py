"""Training one run in several processes (DistributedDataParallel): the process group, the launcher, reductions.

PyTorch does the distributed work: `torch.distributed` (process group, collectives), DistributedDataParallel
(gradient all-reduce, in models/training/engine.py) and its elastic launcher (`elastic_launch`, what `torchrun` runs)
to start and watch the processes, one machine or several. This module only wires them to the engine:

- `DistContext`: this process's rank, the world size and backend, and the few collectives the engine needs
  (sums of metrics, one agreed stop flag, rank 0's run folder, rank 0's BatchNorm buffers). The one-process
  run gets `SINGLE`, whose collectives are no-ops, so the engine has one code path.
- `train_distributed(cfg, callbacks, stop, resume, ...)`: `engine.train`'s signature, N processes. Rank 0's
  events reach the caller's callbacks through a queue; a stop request reaches every rank; a rank that crashes
  ends the run as failed with its rank and reason.
- `worker_main`: what every process runs (also the body of `python -m xaidash.models.training.worker` under
  torchrun).

NCCL on CUDA, gloo otherwise. On CPUs each process gets OMP_NUM_THREADS=1 (cores / processes otherwise
would fight over the same cores).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as tdist

from xaidash.data.errors import DatasetError
from xaidash.models.registry import ModelError

if TYPE_CHECKING:
    from xaidash.models.runs.store import Run
    from xaidash.models.training.engine import TrainConfig, TrainEvent, TrainResult

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the launcher passes on a stop request and looks for its processes' messages
MAX_PROCESSES = 64


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
                run.update_summary(state="failed", error=f"rank {self.rank} failed: {type(error).__name__}: {error}")


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


# ---- what each process runs ---------------------------------------------------------------------------------------


class _Msg:
    EVENT, RESULT, REFUSED, FAILED = "event", "result", "refused", "failed"


def _stop_on_signals(stop: threading.Event, signals: Sequence[signal.Signals]) -> None:
    """The first signal asks for a stop at the next agreed step (rank 0 then checkpoints); a second one aborts."""

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for s in signals:
        signal.signal(s, handler)


def _forward(source: Any, target: threading.Event) -> None:
    """Set `target` once `source` (any object with is_set(): a multiprocessing Event) is set."""
    while not target.is_set():
        if source.is_set():
            target.set()
            return
        time.sleep(POLL_S)


def worker_main(
    config: dict[str, Any],
    resume: str | None,
    backend: str | None,
    messages: Any = None,
    stop_source: Any = None,
    sigint_stops: bool = True,
    callbacks: Sequence[Callable[[TrainEvent], None]] = (),
) -> dict[str, Any] | None:
    """One training process: join the group, train its shard with the others, report. Rank 0 sends events and
    the result to `messages` (a multiprocessing queue, when a launcher listens); a stop comes from `stop_source`
    (an Event shared with the launcher) or from SIGINT/SIGTERM (Ctrl-C; torchrun passes them on); `callbacks` see
    rank 0's events in its own process (torchrun's progress bar). A crash marks
    the run failed (see DistContext.mark_failed), tells the launcher, and re-raises: the launcher ends the
    other processes."""
    from xaidash.models.training.engine import TrainConfig, train

    cfg = TrainConfig(**config)
    backend = backend or default_backend(cfg.device)
    if backend == "gloo" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    stop = threading.Event()
    _stop_on_signals(stop, [signal.SIGTERM] + ([signal.SIGINT] if sigint_stops else []))
    if not sigint_stops:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if stop_source is not None:
        threading.Thread(target=_forward, args=(stop_source, stop), daemon=True).start()
    ctx = init_from_env(backend, cfg.device)

    def put(*message: Any) -> None:
        if messages is not None:
            messages.put(message)

    try:
        listeners = [lambda e: put(_Msg.EVENT, asdict(e)), *callbacks] if ctx.main else []
        result = train(cfg, callbacks=listeners, stop=stop, resume=resume, dist=ctx)
    except (ModelError, DatasetError) as e:  # refused settings: every rank refuses alike
        if ctx.main:
            put(_Msg.REFUSED, type(e).__name__, str(e))
            if messages is None:  # torchrun: no launcher of ours to say it
                print(f"error: {e}", file=sys.stderr)
        if tdist.is_initialized():
            tdist.destroy_process_group()
        return None
    except BaseException as e:
        put(_Msg.FAILED, ctx.rank, f"{type(e).__name__}: {e}", traceback.format_exc(), time.time())
        if tdist.is_initialized():
            tdist.destroy_process_group()
        raise
    if tdist.is_initialized():  # all ranks done before any tears its connections down (none exits mid-talk)
        ctx.barrier()
        tdist.destroy_process_group()
    out = result.to_message()
    if ctx.main:
        put(_Msg.RESULT, out)
    return out


# ---- the launcher ---------------------------------------------------------------------------------------------------


@dataclass
class Launch:
    """Where the processes run: nproc on this machine, nnodes machines in all (node_rank is this one's place),
    meeting at master_addr:master_port (node 0's address; a free local port for one machine)."""

    nproc: int = 2
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    backend: str | None = None  # None: nccl on CUDA, gloo on CPUs

    def validate(self) -> None:
        problems = []
        if not (1 <= self.nproc <= MAX_PROCESSES):
            problems.append(f"--nproc must be between 1 and {MAX_PROCESSES}")
        if self.nnodes < 1 or not (0 <= self.node_rank < self.nnodes):
            problems.append("--nnodes must be at least 1 and --node-rank between 0 and nnodes - 1")
        if self.nnodes > 1 and self.master_port is None:
            problems.append("several machines need --master-addr and --master-port (node 0's, the same on all)")
        if self.backend not in (None, "gloo", "nccl"):
            problems.append(f"unknown backend {self.backend!r} (gloo, nccl)")
        if problems:
            raise ModelError("Invalid distributed settings: " + "; ".join(problems) + ".")


def _launch_config(launch: Launch) -> Any:
    from torch.distributed.launcher.api import LaunchConfig

    port = launch.master_port or free_port()
    return LaunchConfig(
        min_nodes=launch.nnodes,
        max_nodes=launch.nnodes,
        nproc_per_node=launch.nproc,
        run_id=f"xaidash-{uuid.uuid4().hex[:12]}" if launch.nnodes == 1 else f"xaidash-{launch.master_port}",
        rdzv_backend="static",  # torchrun's --master-addr/--master-port/--node-rank
        rdzv_endpoint=f"{launch.master_addr}:{port}",
        rdzv_configs={"rank": launch.node_rank},
        max_restarts=0,  # a crashed rank ends the run (as failed), it does not restart it
        monitor_interval=0.1,
        start_method="spawn",
    )


def check_batch(batch_size: int | None, world_size: int) -> None:
    """The global batch is --batch-size (what the recipes tune the learning rate for), split evenly."""
    if batch_size is not None and batch_size % world_size:
        raise ModelError(
            f"Batch size {batch_size} does not split evenly over {world_size} processes: each takes an equal share "
            f"of the global batch. Give a multiple of {world_size} (--batch-size)."
        )


def train_distributed(
    cfg: TrainConfig,
    callbacks: list[Callable[[TrainEvent], None]] | None = None,
    stop: Any = None,
    resume: str | Path | None = None,
    launch: Launch | None = None,
) -> TrainResult:
    """`engine.train` in `launch.nproc` processes (DistributedDataParallel), started and watched by PyTorch's
    elastic launcher. Same result and errors as `train`: ModelError/DatasetError for refused settings; a crashed
    process gives a failed run (summary: state failed, the rank and its error), or ModelError when it crashed
    before the run folder existed. On a machine other than node 0 the result is that of its local rank 0."""
    import multiprocessing as mp

    from torch.distributed.launcher.api import elastic_launch

    from xaidash.models.training.engine import TrainEvent

    launch = launch or Launch(nproc=cfg.nproc)
    launch.validate()
    cfg.validate()
    if resume is None:  # refused here, before any process starts (a resumed run's own settings: by its ranks)
        check_batch(cfg.with_recipe().batch_size, launch.nproc * launch.nnodes)
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    stop_shared = ctx.Event()
    backend = launch.backend or default_backend(cfg.device)
    outcome: dict[str, Any] = {}

    def run_agent() -> None:
        logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
        try:
            elastic_launch(_launch_config(launch), worker_main)(
                asdict(cfg), None if resume is None else str(resume), backend, messages, stop_shared, False
            )
        except BaseException as e:  # noqa: BLE001 - ChildFailedError and friends: reported below
            outcome["launcher"] = e

    agent = threading.Thread(target=run_agent, name="xaidash-ddp-agent", daemon=True)
    agent.start()
    run_id: str | None = None
    result: dict[str, Any] | None = None
    refused: tuple[str, str] | None = None
    failures: list[tuple[float, int, str]] = []

    def handle(message: tuple[Any, ...]) -> None:
        nonlocal run_id, result, refused
        kind = message[0]
        if kind == _Msg.EVENT:
            event = TrainEvent(**message[1])
            run_id = event.run_id
            for callback in callbacks or []:
                callback(event)
        elif kind == _Msg.RESULT:
            result = message[1]
        elif kind == _Msg.REFUSED:
            refused = (message[1], message[2])
        elif kind == _Msg.FAILED:
            failures.append((message[4], message[1], message[2]))
            log.error("training process rank %s crashed:\n%s", message[1], message[3])

    try:
        while agent.is_alive():
            if stop is not None and stop.is_set() and not stop_shared.is_set():
                stop_shared.set()
            try:
                handle(messages.get(timeout=POLL_S))
            except queue.Empty:
                continue
        while True:  # what the processes said just before they ended
            try:
                handle(messages.get(timeout=POLL_S))
            except queue.Empty:
                break
    finally:
        stop_shared.set()  # the caller gave up (an exception here): the processes stop and keep a checkpoint
        agent.join(timeout=60)
        messages.close()
    if refused is not None:
        raise (DatasetError if refused[0] == "DatasetError" else ModelError)(refused[1])
    if result is not None:
        from xaidash.models.training.engine import TrainResult

        return TrainResult.from_message(result)
    error = _failure_reason(failures, outcome.get("launcher"))
    if run_id is None:
        raise ModelError(f"Training crashed: {error}")
    return _failed_run(run_id, error)


def _failure_reason(failures: list[tuple[float, int, str]], launcher_error: BaseException | None) -> str:
    """The first rank's failure (later ones are usually ranks losing their peer), else what the launcher saw
    (a process killed without a word: its exit code or signal)."""
    if failures:
        _, rank, message = min(failures)
        return f"rank {rank} failed: {message}"
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if isinstance(launcher_error, ChildFailedError):
        rank, failure = launcher_error.get_first_failure()
        how = failure.message if isinstance(failure.message, str) else ""
        if how.startswith("To enable traceback"):  # no error file (a process that died before it could write one)
            how = ""
        if failure.signal_name() != "<N/A>":
            how = how or f"killed by {failure.signal_name()}"
        return f"rank {rank} failed: {how or f'exit code {failure.exitcode}'}"
    if launcher_error is not None:
        return f"the launcher failed: {type(launcher_error).__name__}: {launcher_error}"
    return "the training processes ended without a result"


def _failed_run(run_id: str, error: str) -> TrainResult:
    """The result of a run whose processes crashed; its summary says failed with the reason (written here when no
    process could: a rank killed by a signal writes nothing)."""
    from xaidash.models.runs.store import resolve_run
    from xaidash.models.training.engine import TrainResult

    run = resolve_run(run_id)
    summary = run.summary()
    if summary.get("state", "running") == "running":
        summary = run.update_summary(state="failed", error=error)
    return TrainResult(
        run=run,
        state="failed",
        error=summary.get("error") or error,
        test_acc=None,
        test_loss=None,
        epochs_done=summary.get("epochs_done", 0),
        partial_steps=summary.get("partial_steps", 0),
        kept=summary.get("kept") or "",
    )
