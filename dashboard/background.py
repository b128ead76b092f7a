"""One background job at a time in a daemon thread of the server, shared by every session (the self-influence
job, the SAE training job): pages read `snapshot()`, an immutable dataclass the worker replaces under a lock;
Stop sets an event the work checks between its chunks. Plain threading, no Streamlit: a worker thread cannot write
a session's state (Streamlit drops writes made outside a script run)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar


class JobState(Protocol):
    """What every job snapshot has: its state word and whether it is still working."""

    @property
    def state(self) -> str: ...

    @property
    def active(self) -> bool: ...


class JobClock:
    """For job snapshot dataclasses with `state`, `started` and `finished`: whether the job is active (its state is
    one of the class's ACTIVE_STATES) and how long it has run."""

    ACTIVE_STATES: ClassVar[tuple[str, ...]] = ("starting", "running", "stopping")
    state: str
    started: float | None
    finished: float | None

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started


S = TypeVar("S", bound=JobState)


class BackgroundJob(Generic[S]):
    """Runs one job at a time; `launch` refuses another while the current one is active."""

    def __init__(self, idle: S, thread_name: str) -> None:
        self._lock = threading.Lock()
        self._snap = idle
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_name = thread_name

    def snapshot(self) -> S:
        with self._lock:
            return self._snap

    def launch(self, first: S, work: Callable[..., None], *args: Any) -> bool:
        """Run `work(stop_event, *args)` in a new thread with `first` as the snapshot; False when a job is active."""
        with self._lock:
            if self._snap.active:
                return False
            self._stop = threading.Event()
            self._snap = first
            self._thread = threading.Thread(target=work, args=(self._stop, *args), name=self._thread_name, daemon=True)
            self._thread.start()
        return True

    def stop(self) -> bool:
        """Ask the active job to stop after its chunk or step (False when none is active)."""
        with self._lock:
            if not self._snap.active:
                return False
            self._stop.set()
            self._snap = replace(self._snap, state="stopping")  # type: ignore[type-var]
        return True

    def change(self, update: Callable[[S], S]) -> None:
        """Replace the snapshot by `update(snapshot)`, under the lock (the worker's progress and its end)."""
        with self._lock:
            self._snap = update(self._snap)

    def wait(self, timeout: float | None = None) -> S:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.snapshot()
