"""Clearing up after a run's dead writer, whenever the run is listed, opened or resumed.

A training killed with SIGKILL (or by the out-of-memory killer, or a power cut) leaves its run folder as it was:
`"state": "running"` in summary.json and maybe the temporary file of a write it was in the middle of
(`checkpoints/.epoch_001.safetensors.<random>.tmp`). Readers already tell such a run from a live one by its lock
(`run_liveness`); `settle_run` also makes the folder say so, so that scripts reading summary.json see the truth:

- only when no live process holds the run's lock (a live writer's state and temporary files are its own);
- under the run's lock, taken for a moment as a `tidy` lock (models/runs/lock.py): two readers never both write,
  and a writer starting meanwhile waits for it;
- the temporary files of the writer's files are removed (`leftover_temporaries`), and a summary still saying
  `running` is rewritten atomically as `interrupted`, with `interrupted_at` (ISO 8601, UTC: when this was found).

A folder that cannot be written (read-only runs root, another user's run) is left as it is: readers still report
its state from the lock.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from xaidash.models.registry import ModelError
from xaidash.models.runs.lock import RunLock, RunLocked, leftover_temporaries, read_lock
from xaidash.models.runs.store import Run

INTERRUPTED = "interrupted"


@dataclass
class Settled:
    """What `settle_run` did to a run folder."""

    removed: list[Path] = field(default_factory=list)  # leftover temporary files deleted
    interrupted_at: str | None = None  # set when the summary was rewritten from 'running' to 'interrupted'

    def __bool__(self) -> bool:
        return bool(self.removed) or self.interrupted_at is not None


def _says_running(run: Run) -> bool:
    try:
        return run.summary().get("state") == "running"
    except ModelError:  # a damaged summary is reported by whoever reads it; nothing to settle here
        return False


def settle_run(run: Run) -> Settled:
    """Clear up after `run`'s dead writer (see the module's docstring); an empty Settled when there is nothing to
    do, a live process holds its lock, or the folder cannot be written. Never raises for the folder's state."""
    done = Settled()
    if not leftover_temporaries(run.path) and not _says_running(run):
        return done
    if read_lock(run.path) is not None:  # a live writer (or another reader settling it right now)
        return done
    try:
        before = run.path.stat()
        lock = RunLock.acquire(run.path, run.id, heartbeat=False, tidy=True)
    except (RunLocked, OSError):
        return done
    try:
        done.removed = lock.removed
        if _says_running(run):  # read again under the lock: a writer may have ended it meanwhile
            when = datetime.now(UTC).isoformat(timespec="seconds")
            with contextlib.suppress(OSError):
                run.update_summary(state=INTERRUPTED, interrupted_at=when)
                done.interrupted_at = when
    finally:
        lock.release()
        # The folder's time orders the runs (newest first): clearing up is no activity of the run.
        with contextlib.suppress(OSError):
            os.utime(run.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return done
