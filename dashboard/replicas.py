"""Model replicas for concurrent jobs: sessions of one server explain the same run at the same time without
waiting for each other's whole job.

A method that hooks a model's layers (Grad-CAM, DeepLift, sanity checks) or flips its train/eval flags cannot
share one model object with another job running at the same moment, and one lock around every explanation made
a three-word sentence wait minutes behind someone's large image. A `ReplicaPool` lends each job a model of its
own: an idle replica when there is one, a new one (loaded by the factory, e.g. from the run folder) while the pool
is below its size, and otherwise a first-come-first-served queue whose position the caller can show
("2 jobs ahead of yours") and leave (cancel) at any time.

Written by hand: a bounded object pool with a visible FIFO queue is a few lines of threading, which neither
torch nor Streamlit provides.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

WAIT_POLL_S = 0.25  # how often a waiting job reports its place in the queue and checks whether it was cancelled


class LeaseCancelled(Exception):
    """The job left the queue before a replica was free (its `cancelled()` said so)."""


class ReplicaPool(Generic[T]):
    """At most `size` replicas made by `factory`, lent one job at a time (see the module docstring)."""

    def __init__(self, factory: Callable[[], T], size: int = 2, first: T | None = None) -> None:
        if size < 1:
            raise ValueError("a replica pool holds at least one replica")
        self.size = size
        self._factory = factory
        self._idle: list[T] = [] if first is None else [first]
        self._made = 0 if first is None else 1
        self._queue: deque[int] = deque()  # tickets of the jobs waiting, oldest first
        self._tickets = itertools.count()
        self._cond = threading.Condition()

    @property
    def made(self) -> int:
        """Replicas that exist (idle or lent)."""
        return self._made

    @property
    def busy(self) -> int:
        """Replicas lent out now."""
        with self._cond:
            return self._made - len(self._idle)

    @property
    def waiting(self) -> int:
        """Jobs in the queue now."""
        with self._cond:
            return len(self._queue)

    def _take(self, ticket: int) -> tuple[T | None, bool]:
        """(an idle replica, False) or (None, True: make one) when `ticket` heads the queue and one is free."""
        if self._queue[0] != ticket:
            return None, False
        if self._idle:
            return self._idle.pop(), False
        if self._made < self.size:
            self._made += 1  # reserved now, made outside the lock (loading can take seconds)
            return None, True
        return None, False

    @contextmanager
    def lease(
        self,
        on_wait: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[T]:
        """A replica for the duration of the block. While none is free, `on_wait(jobs_ahead)` (0: next in line)
        is called whenever the place in the queue changes and `cancelled()` is polled; when it returns True the job leaves the
        queue and LeaseCancelled is raised."""
        ticket = next(self._tickets)
        replica: T | None = None
        make = False
        last_ahead = -1
        with self._cond:
            self._queue.append(ticket)
            try:
                while True:
                    replica, make = self._take(ticket)
                    if replica is not None or make:
                        break
                    ahead = self._queue.index(ticket)  # 0: next in line, all replicas busy
                    if on_wait is not None and ahead != last_ahead:
                        last_ahead = ahead
                        self._cond.release()  # the callback may draw on a page: never under the pool's lock
                        try:
                            on_wait(ahead)
                        finally:
                            self._cond.acquire()
                    if cancelled is not None and cancelled():
                        raise LeaseCancelled("The job was cancelled while it waited for the model.")
                    self._cond.wait(WAIT_POLL_S)
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()
        if make:
            try:
                replica = self._factory()
            except BaseException:
                with self._cond:
                    self._made -= 1
                    self._cond.notify_all()
                raise
        assert replica is not None
        try:
            yield replica
        finally:
            with self._cond:
                self._idle.append(replica)
                self._cond.notify_all()
