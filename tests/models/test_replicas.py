"""ReplicaPool: jobs get models of their own, wait in order when all are lent, and can leave the queue."""

from __future__ import annotations

import threading
import time

import pytest

from xaidash.dashboard.replicas import LeaseCancelled, ReplicaPool


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def make(self) -> dict[str, int]:
        self.n += 1
        return {"replica": self.n}


def test_a_second_job_gets_its_own_replica_while_the_first_holds_one() -> None:
    made = Counter()
    pool = ReplicaPool(made.make, size=2, first={"replica": 0})
    with pool.lease() as a, pool.lease() as b:
        assert a is not b
        assert pool.busy == 2
    assert made.n == 1 and pool.made == 2 and pool.busy == 0
    with pool.lease() as c:  # an idle replica is reused, not remade
        assert c in ({"replica": 0}, {"replica": 1})
    assert made.n == 1


def test_a_full_pool_queues_jobs_first_come_first_served_and_reports_their_place() -> None:
    pool = ReplicaPool(Counter().make, size=1)
    order: list[str] = []
    places: dict[str, list[int]] = {"b": [], "c": []}
    release = threading.Event()
    holding = threading.Event()

    def first() -> None:
        with pool.lease():
            holding.set()
            release.wait(5)
            order.append("a")

    def later(name: str) -> None:
        with pool.lease(on_wait=places[name].append):
            order.append(name)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    holding.wait(5)
    for name in ("b", "c"):
        t = threading.Thread(target=later, args=(name,))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while pool.waiting < len(threads) - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert pool.waiting == 2
    release.set()
    for t in threads:
        t.join(5)
    assert order == ["a", "b", "c"]
    assert places["b"] == [0]  # next in line from the start
    assert places["c"][0] == 1  # one job ahead at first
    assert places["c"] == sorted(places["c"], reverse=True)  # then only closer


def test_a_waiting_job_can_leave_the_queue_and_the_pool_stays_usable() -> None:
    pool = ReplicaPool(Counter().make, size=1)
    with pool.lease():
        with pytest.raises(LeaseCancelled), pool.lease(cancelled=lambda: True):
            pass
        assert pool.waiting == 0
    with pool.lease() as again:
        assert again == {"replica": 1}


def test_a_failed_load_frees_its_place_for_the_next_job() -> None:
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("weights file vanished")
        return "model"

    pool = ReplicaPool(flaky, size=1)
    with pytest.raises(OSError, match="vanished"), pool.lease():
        pass
    assert pool.made == 0
    with pool.lease() as m:
        assert m == "model"


def test_a_pool_needs_room_for_one_replica() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ReplicaPool(Counter().make, size=0)
