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
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from xaidash.models.runs.files import CHECKPOINTS
from xaidash.models.runs.lock import RunLock, RunLocked, leftover_temporaries, read_lock
from xaidash.models.runs.store import SUMMARY, Run

INTERRUPTED = "interrupted"


@dataclass
class Settled:
    """What `settle_run` did to a run folder."""

    removed: list[Path] = field(default_factory=list)  # leftover temporary files deleted
    interrupted_at: str | None = None  # set when the summary was rewritten from 'running' to 'interrupted'

    def __bool__(self) -> bool:
        return bool(self.removed) or self.interrupted_at is not None


# Runs found with nothing to settle, by (folder, checkpoints) modification times: a temporary file or a new summary
# changes one of them (summary.json is replaced by a rename in the folder), so a clean run is not read again until
# then. A run found `running` is always read again: its writer may die without a trace in its folder.
_clean: dict[Path, tuple[int, int]] = {}
COARSE_NS = 2_000_000_000  # a folder changed this recently is not remembered (file systems with 1-2 s timestamps)


def _stamp(folder: Path) -> tuple[int, int] | None:
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        return None
    try:
        return mtime, (folder / CHECKPOINTS).stat().st_mtime_ns
    except OSError:
        return mtime, -1


def _says_running(run: Run) -> bool:
    """Whether summary.json says `running` (read raw: every listing asks this of every run; a damaged summary is
    reported by whoever reads it, and has nothing to settle)."""
    try:
        summary = json.loads(run.file(SUMMARY).read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(summary, dict) and summary.get("state") == "running"


def settle_run(run: Run) -> Settled:
    """Clear up after `run`'s dead writer (see the module's docstring); an empty Settled when there is nothing to
    do, a live process holds its lock, or the folder cannot be written. Never raises for the folder's state."""
    done = Settled()
    stamp = _stamp(run.path)
    if stamp is not None and _clean.get(run.path) == stamp:
        return done  # found clean before, and neither the folder nor its checkpoints changed since
    if not leftover_temporaries(run.path) and not _says_running(run):
        if stamp is not None and time.time_ns() - max(stamp) > COARSE_NS:
            if len(_clean) > 4096:
                _clean.clear()
            _clean[run.path] = stamp
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
