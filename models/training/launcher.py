"""Launching one run in several processes (DistributedDataParallel) and what each of them runs.

- `train_distributed(cfg, callbacks, stop, resume, launch)`: `engine.train`'s signature, N processes started and
  watched by PyTorch's elastic launcher (`elastic_launch`, what `torchrun` runs), one machine or several (`Launch`).
  Rank 0's events reach the caller's callbacks through a queue; a stop request reaches every rank; a rank that
  crashes ends the run as failed with its rank and reason.
- `worker_main`: what every process runs: join the group (models/training/distributed.py), `train` its share,
  report (also the body of `python -m xaidash.models.training.worker` under torchrun).

NCCL on CUDA, gloo otherwise. On CPUs each process gets OMP_NUM_THREADS=1 (cores / processes otherwise
would fight over the same cores).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist

from xaidash.data.errors import DatasetError, plain_message
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import resolve_run
from xaidash.models.training.config import TrainConfig, TrainEvent, TrainResult
from xaidash.models.training.distributed import check_batch, default_backend, free_port, init_from_env
from xaidash.models.training.engine import train

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the launcher passes on a stop request and looks for its processes' messages
MAX_PROCESSES = 64


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
        put(_Msg.FAILED, ctx.rank, plain_message(e), traceback.format_exc(), time.time())
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


@dataclass
class _Heard:
    """What the training processes said: their events (passed on to `callbacks`), the run's id, rank 0's result, a
    refusal of the settings, and each crashed rank's (time, rank, error)."""

    callbacks: list[Callable[[TrainEvent], None]]
    run_id: str | None = None
    result: dict[str, Any] | None = None
    refused: tuple[str, str] | None = None
    failures: list[tuple[float, int, str]] = field(default_factory=list)

    def handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == _Msg.EVENT:
            event = TrainEvent(**message[1])
            self.run_id = event.run_id
            for callback in self.callbacks:
                callback(event)
        elif kind == _Msg.RESULT:
            self.result = message[1]
        elif kind == _Msg.REFUSED:
            self.refused = (message[1], message[2])
        elif kind == _Msg.FAILED:
            self.failures.append((message[4], message[1], message[2]))
            log.error("training process rank %s crashed:\n%s", message[1], message[3])


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
    heard = _Heard(callbacks or [])
    try:
        while agent.is_alive():
            if stop is not None and stop.is_set() and not stop_shared.is_set():
                stop_shared.set()
            try:
                heard.handle(messages.get(timeout=POLL_S))
            except queue.Empty:
                continue
        while True:  # what the processes said just before they ended
            try:
                heard.handle(messages.get(timeout=POLL_S))
            except queue.Empty:
                break
    finally:
        stop_shared.set()  # the caller gave up (an exception here): the processes stop and keep a checkpoint
        agent.join(timeout=60)
        messages.close()
    if heard.refused is not None:
        raise (DatasetError if heard.refused[0] == "DatasetError" else ModelError)(heard.refused[1])
    if heard.result is not None:
        return TrainResult.from_message(heard.result)
    error = _failure_reason(heard.failures, outcome.get("launcher"))
    if heard.run_id is None:
        raise ModelError(f"Training crashed: {error}")
    return _failed_run(heard.run_id, error)


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
        return f"the launcher failed: {plain_message(launcher_error)}"
    return "the training processes ended without a result"


def _failed_run(run_id: str, error: str) -> TrainResult:
    """The result of a run whose processes crashed; its summary says failed with the reason (written here when no
    process could: a rank killed by a signal writes nothing)."""
    run = resolve_run(run_id)
    summary = run.summary()
    # 'interrupted': the run store may have found the dead writer first (listing settles a run) and said so
    if summary.get("state", "running") in ("running", "interrupted"):
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
