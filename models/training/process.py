"""Training in a process of its own, behind `train()`'s signature.

Why: the dashboard trains in the background while its pages redraw. In a thread of the server process the
training loop shares the GIL with every redraw (charts, tables, run listings), and small models on a CPU
are mostly Python between short kernels: measured on this project's 2-core CPU, the quick start's
resnet_small trained at 238 samples/s inside the server against about 1,900 alone. A process of its own
keeps the loop at full speed, and a crash in it (a segfault in a library, the kernel's OOM killer) cannot
take the server down: the job reports it and the run is marked failed.

`train_in_process(cfg, callbacks, stop, resume)` starts a fresh interpreter (spawn: forking a threaded
server is unsafe), which runs `engine.train` and sends every `TrainEvent` back through a queue; the caller's
callbacks see them in the caller's process, and a stop request is passed on within a fraction of a second.
The child also stops (keeping its checkpoint, as with Stop) if the process that started it disappears.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import torch

from xaidash.data.errors import DatasetError, plain_message
from xaidash.models.registry import ModelError
from xaidash.models.training.config import TrainConfig, TrainEvent, TrainResult
from xaidash.models.training.engine import train
from xaidash.models.training.launcher import train_distributed

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the parent looks for a stop request or a dead child
PARENT_CHECK_S = 1.0  # how often the child looks for its parent


class _Outcome:
    """Message kinds sent by the child besides events."""

    EVENT, RESULT, REFUSED, CRASHED = "event", "result", "refused", "crashed"


def _watch_parent(parent_pid: int, stop: Any) -> None:
    """In the child: ask for a stop when the parent is gone (it is re-parented, so getppid() changes)."""
    while not stop.is_set():
        if os.getppid() != parent_pid:
            stop.set()
            return
        time.sleep(PARENT_CHECK_S)


def _leave_a_core_for_the_server() -> None:
    """CPU training threads: one fewer than the cores (the dashboard's server and its browser tabs need one).
    torch's threads wait for each other at every operator, so a trainer using every core stalls whenever the
    live view redraws: on 2 cores a run took 2.9x as long with its Train page open as with the tab closed."""
    if "OMP_NUM_THREADS" in os.environ:  # the user's say
        return
    torch.set_num_threads(max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) - 1)))


def _child(config: dict[str, Any], resume: str | None, events: Any, stop: Any, parent_pid: int) -> None:
    """The child's body: train, forwarding events, then report how it ended (never raises)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the server's terminal is the server's to handle
    threading.Thread(target=_watch_parent, args=(parent_pid, stop), daemon=True).start()
    try:
        cfg = TrainConfig(**config)
        _leave_a_core_for_the_server()
        # cfg.nproc > 1: several processes (DistributedDataParallel), started from here by PyTorch's launcher
        result = (train if cfg.nproc == 1 else train_distributed)(
            cfg,
            callbacks=[lambda e: events.put((_Outcome.EVENT, asdict(e)))],
            stop=cast(threading.Event, stop),  # a multiprocessing Event: same is_set()/set()
            resume=resume,
        )
    except (ModelError, DatasetError) as e:
        events.put((_Outcome.REFUSED, type(e).__name__, str(e)))
    except BaseException as e:  # noqa: BLE001 - whatever happened, the parent must hear of it
        import traceback

        events.put((_Outcome.CRASHED, plain_message(e), traceback.format_exc()))
    else:
        events.put((_Outcome.RESULT, result.to_message()))  # TrainResult holds a Run: its path goes instead


class TrainingProcessDied(ModelError):
    """The child training process ended without a word (killed, crashed in native code): its run was left as the
    process left it, which run readers report as `interrupted` with its last checkpoint (models/runs/store.py)."""


def _death_message(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    else:
        how = f"ended unexpectedly (exit code {exitcode})"
    return f"The training process {how}; the run is interrupted and keeps its last checkpoint (resume it)."


def train_in_process(
    cfg: TrainConfig,
    callbacks: list[Callable[[TrainEvent], None]] | None = None,
    stop: threading.Event | None = None,
    resume: str | Path | None = None,
) -> TrainResult:
    """`engine.train` in a child process; same arguments, same result, same errors (ModelError or DatasetError
    for settings it refuses). A child that dies without a word raises TrainingProcessDied saying how it died."""
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    child_stop = ctx.Event()
    process = ctx.Process(
        target=_child,
        args=(asdict(cfg), None if resume is None else str(resume), events, child_stop, os.getpid()),
        name=f"xaidash-train-{cfg.model}-{cfg.dataset}",
        daemon=cfg.nproc == 1,  # ends with the server; a daemon cannot start the processes of a distributed run
    )
    process.start()
    last_run: str | None = None
    try:
        while True:
            if stop is not None and stop.is_set() and not child_stop.is_set():
                child_stop.set()
            try:
                message = events.get(timeout=POLL_S)
            except queue.Empty:
                if process.is_alive():
                    continue
                try:  # it may have written its last words just before exiting
                    message = events.get(timeout=POLL_S)
                except queue.Empty:
                    raise TrainingProcessDied(_death_message(process.exitcode)) from None
            kind = message[0]
            if kind == _Outcome.EVENT:
                event = TrainEvent(**message[1])
                last_run = event.run_id
                for callback in callbacks or []:
                    callback(event)
                continue
            if kind == _Outcome.REFUSED:
                error_type = DatasetError if message[1] == "DatasetError" else ModelError
                raise error_type(message[2])
            if kind == _Outcome.CRASHED:
                log.error("training process crashed (run %s):\n%s", last_run, message[2])
                raise ModelError(f"Training crashed: {message[1]}")
            return TrainResult.from_message(message[1])
    finally:
        child_stop.set()  # when the caller gave up early (an exception here), the child stops and keeps its checkpoint
        process.join(timeout=30)
        if process.is_alive():  # it reported but hangs on exit (a stuck library thread): end it
            process.terminate()
            process.join(timeout=10)
        events.close()
