"""One writer per run folder: a lock file naming the process that trains the run.

`RunLock.acquire(run)` creates `<run>/.lock` exclusively (O_CREAT | O_EXCL, so two processes cannot both
win) with the owner's pid, host, start time and a heartbeat. While the lock is held a daemon thread
rewrites the heartbeat every HEARTBEAT_S seconds (atomically: temporary file, then rename), so a reader
on another machine, which cannot ask about the pid, can still tell a live owner from a dead one.

Whether an owner is alive is decided here, once, for every reader:
- on this host, by its pid (a training killed with SIGKILL leaves a lock naming a dead pid);
- on another host, by its heartbeat: older than STALE_S seconds means the owner is gone (a lock written
  before heartbeats existed, from another host, is trusted as before).
A second writer is refused with RunLocked naming the owner; a lock whose owner is gone is stale and taken
over. Holding the lock also means no one else writes there, so leftover temporary files of an interrupted
write are removed then. `is_locked(run)` tells readers and `delete_run` whether a live process owns the run.

A reader that finds a run whose writer is gone takes the lock for a moment to clear up after it (tidy.py): such
a lock says `tidy`, is no writer (`writer_of`), and a writer that meets it waits for it instead of being refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaidash.models.registry import ModelError
from xaidash.models.runs.files import CHECKPOINTS, WRITER_FILES

LOCK = ".lock"
TIDY = "tidy"  # set in the lock of a reader that clears up after a dead writer (models/runs/tidy.py), not a writer
TIDY_WAIT_S = 5.0  # how long a writer waits for such a reader to finish before giving up
HEARTBEAT_S = 5.0  # how often the owner refreshes its heartbeat
STALE_S = 60.0  # a heartbeat older than this (owner on another host) means the owner is gone


class RunLocked(ModelError):
    """Another live process writes this run."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def read_lock_file(folder: Path) -> dict[str, Any] | None:
    """The lock file's content ({pid, host, started, heartbeat, token}) whether or not its owner lives; None when
    there is no lock or it is unreadable."""
    try:
        owner = json.loads((Path(folder) / LOCK).read_text())
        int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return owner if isinstance(owner, dict) else None


def owner_alive(owner: dict[str, Any], now: float | None = None) -> bool:
    """Is the process named by a lock still there? By pid on this host, by heartbeat age on another."""
    if str(owner["host"]) == socket.gethostname():
        return _pid_alive(int(owner["pid"]))
    beat = owner.get("heartbeat")
    if not isinstance(beat, (int, float)):  # an older lock from another machine: nothing to judge by, trust it
        return True
    return (now if now is not None else time.time()) - float(beat) <= STALE_S


def read_lock(folder: Path) -> dict[str, Any] | None:
    """The lock's owner ({pid, host, started, heartbeat}) when a live process holds it, else None (none, stale or
    unreadable)."""
    owner = read_lock_file(folder)
    if owner is None:
        return None
    try:
        return owner if owner_alive(owner) else None
    except (ValueError, TypeError):
        return None


def is_locked(folder: Path) -> bool:
    return read_lock(folder) is not None


def writer_of(folder: Path) -> dict[str, Any] | None:
    """The live process that writes the run (trains it), else None: a reader tidying a run after its dead writer
    (`TIDY`, held for milliseconds) is no writer."""
    owner = read_lock(folder)
    return None if owner is None or owner.get(TIDY) else owner


def leftover_temporaries(folder: Path) -> list[Path]:
    """The temporary files (`.NAME.<random>.tmp`) an interrupted write of the run's writer left: of the files it
    writes (WRITER_FILES), of its per-epoch checkpoints and of its lock's heartbeat. Other writers' (calibration,
    caches under the run folder, which write without the lock) are theirs: never listed here."""
    folder = Path(folder)
    prefixes = (*(f".{name}." for name in WRITER_FILES), f"{LOCK}.")
    found = [folder / name for name in _names(folder) if name.endswith(".tmp") and name.startswith(prefixes)]
    checkpoints = folder / CHECKPOINTS
    found += [checkpoints / name for name in _names(checkpoints) if name.startswith(".") and name.endswith(".tmp")]
    return sorted(found)


def _names(folder: Path) -> list[str]:
    """The names in `folder` (one directory read: runs are listed on every page); none when it is absent."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


def remove_leftover_temporaries(folder: Path) -> list[Path]:
    """Delete `leftover_temporaries` (only safe while holding the lock: a live writer's are still being written)."""
    removed = []
    for tmp in leftover_temporaries(folder):
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def _content(owner: dict[str, Any]) -> str:
    return json.dumps({**owner, "heartbeat": time.time()})


@dataclass
class RunLock:
    folder: Path
    token: str  # a random id written into the lock, so the heartbeat and release() never touch another's
    owner: dict[str, Any] = field(default_factory=dict)
    removed: list[Path] = field(default_factory=list)  # leftover temporary files removed when the lock was taken
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @classmethod
    def acquire(cls, folder: Path, run_id: str | None = None, heartbeat: bool = True, tidy: bool = False) -> RunLock:
        """Take the run's lock, or raise RunLocked naming the live process that holds it. `heartbeat`: refresh
        the lock's heartbeat from a daemon thread until release(). `tidy`: a reader clearing up after a dead writer
        (models/runs/tidy.py): refused by any live holder, its own process included; a writer that meets such a
        lock waits for it (up to TIDY_WAIT_S) instead of being refused."""
        folder = Path(folder)
        token = uuid.uuid4().hex
        owner: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "token": token,
            **({TIDY: True} if tidy else {}),
        }
        path = folder / LOCK
        deadline = time.monotonic() + TIDY_WAIT_S
        tries = 0
        while tries < 3:  # a stale lock is removed and creation retried; a racing writer wins fairly
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_lock(folder)
                if holder is not None and holder.get(TIDY) and not tidy and time.monotonic() < deadline:
                    time.sleep(0.02)  # a reader tidying after a dead writer: done within milliseconds
                    continue
                # Our own process may take its lock again (a session set up by hand, then resumed by train()).
                ours = holder is not None and holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
                if holder is not None and (tidy or holder.get(TIDY) or not ours):
                    since = time.strftime("%H:%M:%S", time.localtime(float(holder.get("started", 0))))
                    raise RunLocked(
                        f"Run {run_id or folder.name} is being trained by process {holder['pid']} on "
                        f"{holder['host']} (since {since}): wait for it to end or stop it, then try again."
                    ) from None
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # stale: its owner is gone
                tries += 1
                continue
            with os.fdopen(fd, "w") as f:
                f.write(_content(owner))
            removed = remove_leftover_temporaries(folder)
            lock = cls(folder, token, owner, removed)
            if heartbeat:
                lock._thread = threading.Thread(target=lock._beat, name=f"runlock-{folder.name}", daemon=True)
                lock._thread.start()
            return lock
        raise RunLocked(f"Run {run_id or folder.name}: could not take its lock (another process keeps taking it).")

    def _ours(self) -> bool:
        found = read_lock_file(self.folder)
        return found is not None and found.get("token") == self.token

    def beat(self) -> bool:
        """Refresh the heartbeat (atomically: a reader never sees half a lock); False when the lock is no longer
        ours (removed, or taken over after this process stalled for longer than STALE_S)."""
        if not self._ours():
            return False
        tmp = self.folder / f"{LOCK}.{self.token}.tmp"
        try:
            tmp.write_text(_content(self.owner))
            os.replace(tmp, self.folder / LOCK)
        except OSError:  # the folder was deleted or the disk is full: the next beat tries again
            with contextlib.suppress(OSError):
                tmp.unlink()
            return False
        return True

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.beat()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=HEARTBEAT_S)
        path = self.folder / LOCK
        with contextlib.suppress(OSError):
            if self._ours():
                path.unlink()
