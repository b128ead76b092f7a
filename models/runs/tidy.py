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
from typing import Any

from xaidash.data.atomic import atomic_write_json
from xaidash.models.runs.files import CHECKPOINTS, SUMMARY, WEIGHTS
from xaidash.models.runs.lock import RunLock, RunLocked, leftover_temporaries, read_lock

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


def _summary(folder: Path) -> dict[str, Any] | None:
    """summary.json, read raw (every listing asks this of every run); None when absent or damaged (whoever reads it
    reports that: nothing to settle)."""
    try:
        summary = json.loads((folder / SUMMARY).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return summary if isinstance(summary, dict) else None


def _says_running(folder: Path) -> bool:
    summary = _summary(folder)
    return summary is not None and summary.get("state") == "running"


def settle_run(folder: Path) -> Settled:
    """Clear up after the dead writer of the run in `folder` (see the module's docstring); an empty Settled when
    there is nothing to do, a live process holds its lock, or the folder cannot be written. Never raises for the
    folder's state."""
    folder = Path(folder)
    done = Settled()
    stamp = _stamp(folder)
    if stamp is not None and _clean.get(folder) == stamp:
        return done  # found clean before, and neither the folder nor its checkpoints changed since
    if not leftover_temporaries(folder) and not _says_running(folder):
        if stamp is not None and time.time_ns() - max(stamp) > COARSE_NS:
            if len(_clean) > 4096:
                _clean.clear()
            _clean[folder] = stamp
        return done
    if read_lock(folder) is not None:  # a live writer (or another reader settling it right now)
        return done
    try:
        before = folder.stat()
        lock = RunLock.acquire(folder, folder.name, heartbeat=False, tidy=True)
    except (RunLocked, OSError):
        return done
    try:
        done.removed = lock.removed
        summary = _summary(folder)  # read again under the lock: a writer may have ended it meanwhile
        if summary is not None and summary.get("state") == "running":
            when = datetime.now(UTC).isoformat(timespec="seconds")
            with contextlib.suppress(OSError):
                kept = summary.get("kept") if (folder / WEIGHTS).exists() else "nothing"  # not "nothing yet"
                settled = {
                    **summary,
                    "state": INTERRUPTED,
                    "interrupted_at": when,
                    "kept": kept,
                    "updated": time.time(),
                }
                atomic_write_json(folder / SUMMARY, settled)
                done.interrupted_at = when
    finally:
        lock.release()
        # The folder's time orders the runs (newest first): clearing up is no activity of the run.
        with contextlib.suppress(OSError):
            os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))
    return done
