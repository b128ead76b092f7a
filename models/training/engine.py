"""The training engine: `train()`, one loop for every zoo model and data set, composed of four steps that can be
called (and tested) one by one and share a `TrainingSession`:

- `setup_run` (session.py): settings, run folder, data (data.py), model, optimizer and schedule (optimizer.py),
  `restore_checkpoint` for a resumed run;
- `run_epoch` (loop.py): the training steps of one epoch and its validation (evaluation.py);
- `write_checkpoint` and `finish_run` (finish.py): what each epoch keeps, and the run's end.

Small data sets live on the device as tensors (no per-batch DataLoader overhead); image folders stream through a
DataLoader. bf16 autocast on CUDA and on CPUs that compute bf16 natively. Progress goes out as `TrainEvent`s
(config.py) to any number of callbacks (CLI progress bar, dashboard job); a stop request is honoured within one
step and leaves a valid checkpoint.
"""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from pathlib import Path

from xaidash.data.errors import XaidashError, plain_message
from xaidash.models.training.config import Callback, TrainConfig, TrainEvent, TrainingFailed, TrainResult
from xaidash.models.training.distributed import SINGLE, DistContext
from xaidash.models.training.finish import finish_run, finish_unsaved, save_failed, write_checkpoint
from xaidash.models.training.loop import run_epoch
from xaidash.models.training.session import setup_run


def train(
    cfg: TrainConfig,
    callbacks: list[Callback] | None = None,
    stop: threading.Event | None = None,
    resume: str | Path | None = None,
    dist: DistContext = SINGLE,
) -> TrainResult:
    """Train `cfg.model` on `cfg.dataset` into a new run folder (or continue run `resume`).

    Never raises for NaN loss or out-of-memory: the run is marked failed with the reason,
    which the result carries. Bad settings (unknown model, wrong data) raise ModelError/DatasetError
    before any run folder is written.

    `dist`: this process's place among several training the run together (models/training/launcher.py starts them
    and passes it; `cfg.nproc` alone does not launch them). Rank 0 writes the run folder and emits the events;
    on any other rank a failure is re-raised after marking the run failed (its launcher ends the others).
    """
    listeners = list(callbacks or []) if dist.main else []
    stop = stop or threading.Event()

    def emit(event: TrainEvent) -> None:
        for cb in listeners:
            cb(event)

    session = setup_run(cfg, resume, dist)
    try:
        emit(session.event("start", epoch=session.start_epoch, step=session.step, message=session.note or ""))
        session.started = time.perf_counter()
        state, error, epoch = "completed", None, session.start_epoch
        try:
            for epoch in range(session.start_epoch + 1, session.settings.epochs + 1):
                result = run_epoch(session, epoch, stop, emit)
                if result is None:  # stopped before this epoch's first step: it does not count
                    epoch -= 1
                    state = "stopped"
                    break
                try:
                    write_checkpoint(session, result)
                except OSError as e:  # disk full, folder gone: the last good checkpoint stays (atomic writes)
                    raise TrainingFailed(save_failed(e)) from None
                emit(result.event)
                if result.stopped:
                    state = "stopped"
                    break
        except (TrainingFailed, XaidashError) as e:  # NaN loss, out of memory, data that cannot be read (a bad JPEG)
            if dist.active and not dist.main:  # rank 0 cannot end the run for it: its crash does
                dist.mark_failed(session.run, e)
                raise
            state, error = "failed", str(e)
        except Exception as e:
            # A rank's crash, a lost peer, or a bug: the run says failed with the reason, never 'running' forever.
            if dist.active:
                dist.mark_failed(session.run, e)
            else:
                with suppress(Exception):
                    session.run.update_summary(state="failed", error=plain_message(e))
            raise
        try:
            return finish_run(session, state, error, epoch, emit)
        except OSError as e:  # the end could not be written either: say so wherever still possible
            return finish_unsaved(session, epoch, save_failed(e), emit)
    finally:
        if session.lock is not None:
            session.lock.release()
