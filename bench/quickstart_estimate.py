"""Is the quick start's "about N left" honest? The quick-start queue trained as the Home page trains it (the dashboard's
job manager, each run in a child process, the page's own planning and pricing), with the queue's estimated time
left sampled as the page shows it, against the time the queue really took from then.

    XAIDASH_RUNS=/tmp/quickstart-bench/runs python bench/quickstart_estimate.py [--every 0.5]

Prints one line per sample point (at the first estimate, i.e. the start, and at about a quarter, half and three
quarters of the steps) and a last line per run with its measured time and the time it was priced at before it
started. The issue's goal: every estimate within a factor of 1.5 of the measured time left.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

MARKS = (0.0, 0.25, 0.5, 0.75)  # the queue's progress at which the estimate is compared with what followed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=0.5, help="seconds between samples of the estimate")
    args = ap.parse_args()
    os.environ.setdefault("XAIDASH_RUNS", str(Path(tempfile.mkdtemp(prefix="quickstart-bench-")) / "runs"))
    from xaidash.dashboard.components.quickstart import NAME, demo_configs
    from xaidash.dashboard.jobs import JobManager
    from xaidash.models.training.probe import plan_run
    from xaidash.models.training.process import train_in_process

    manager = JobManager(train_fn=train_in_process)
    t0 = time.time()
    queue = manager.start_queue(demo_configs(), name=NAME, plan_fn=plan_run)
    samples: list[tuple[float, float, float, float | None]] = []  # (time, progress, estimate, run priced)
    priced: dict[int, float] = {}  # job id -> its price when it was still queued (the last one seen)
    marks = list(MARKS)
    while True:
        q = manager.find_queue(queue.id)
        assert q is not None
        if q.finished:
            break
        eta = q.eta_s
        for job in q.jobs:
            price = q.price_s(job) if job.queued else None
            if price is not None:
                priced[job.id] = price
        if eta is not None and marks and q.progress >= marks[0]:
            while marks and q.progress >= marks[0]:
                marks.pop(0)
            samples.append((time.time(), q.progress, eta, None))
        time.sleep(args.every)
    end = time.time()
    q = manager.find_queue(queue.id)
    assert q is not None
    print(f"quick start: {end - t0:.1f} s in all ({os.environ['XAIDASH_RUNS']})")
    worst = 1.0
    for t, progress, eta, _ in samples:
        actual = end - t
        ratio = eta / actual if actual > 0 else float("inf")
        worst = max(worst, ratio, 1 / ratio if ratio else float("inf"))
        print(
            f"at {100 * progress:3.0f}% ({t - t0:5.1f} s in): estimated {eta:6.1f} s left, took {actual:6.1f} s "
            f"(estimate / actual {ratio:.2f})"
        )
    for job in q.jobs:
        took = (job.finished or end) - (job.started or end)
        price = priced.get(job.id)
        note = f", priced at {price:.1f} s while queued (x{price / took:.2f})" if price and took else ""
        print(f"  {job.label}: {job.state}, {took:.1f} s{note}")
    print(f"worst factor between estimate and actual: {worst:.2f} (goal: 1.5 or less)")


if __name__ == "__main__":
    main()
