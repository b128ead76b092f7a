"""One writer per run folder: a lock file naming the process that trains the run.

`RunLock.acquire(run)` creates `<run>/.lock` exclusively (O_CREAT | O_EXCL, so two processes cannot both
win) with the owner's pid, host and start time. A second writer is refused with RunLocked naming the
owner; a lock whose owner is gone (a training killed with SIGKILL) is stale and taken over. Holding the
lock also means no one else writes there, so leftover temporary files of an interrupted write are
removed then. `is_locked(run)` tells readers and `delete_run` whether a live process owns the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xaidash.models.registry import ModelError

LOCK = ".lock"


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


def read_lock(folder: Path) -> dict[str, Any] | None:
    """The lock's owner ({pid, host, started}) when a live process holds it, else None (none, stale or unreadable)."""
    try:
        owner = json.loads((folder / LOCK).read_text())
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname():  # another machine's process cannot be checked: trust its lock
        return owner
    return owner if _pid_alive(pid) else None


def is_locked(folder: Path) -> bool:
    return read_lock(folder) is not None


def remove_leftover_temporaries(folder: Path) -> list[Path]:
    """Delete the `.NAME.*.tmp` files an interrupted atomic write left (only safe while holding the lock)."""
    removed = []
    for tmp in [*folder.glob(".*.tmp"), *folder.glob("*/.*.tmp")]:
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


@dataclass
class RunLock:
    folder: Path
    token: str  # what this process wrote into the lock, so release() never removes another's

    @classmethod
    def acquire(cls, folder: Path, run_id: str | None = None) -> RunLock:
        """Take the run's lock, or raise RunLocked naming the live process that holds it."""
        folder = Path(folder)
        token = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()})
        path = folder / LOCK
        for _ in range(3):  # a stale lock is removed and creation retried; a racing writer wins fairly
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_lock(folder)
                # Our own process may take its lock again (a session set up by hand, then resumed by train()).
                if owner is not None and not (owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()):
                    since = time.strftime("%H:%M:%S", time.localtime(float(owner.get("started", 0))))
                    raise RunLocked(
                        f"Run {run_id or folder.name} is being trained by process {owner['pid']} on "
                        f"{owner['host']} (since {since}): wait for it to end or stop it, then try again."
                    ) from None
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # stale: its owner is gone
                continue
            with os.fdopen(fd, "w") as f:
                f.write(token)
            remove_leftover_temporaries(folder)
            return cls(folder, token)
        raise RunLocked(f"Run {run_id or folder.name}: could not take its lock (another process keeps taking it).")

    def release(self) -> None:
        path = self.folder / LOCK
        with contextlib.suppress(OSError):
            if path.read_text() == self.token:
                path.unlink()
