"""The quick start's time left prices each queued run by its own model: its planned steps at its probe's seconds
per step, scaled by what the running job measured against its own probe, plus a run's measured overhead (the issue:
a fast first model priced the slow ViT queued after it; a slow ViT priced the fast text model after it)."""

from __future__ import annotations

import time

import pytest

from xaidash.dashboard.jobs import Job, JobQueue
from xaidash.models.training.config import TrainConfig, TrainEvent
from xaidash.models.training.probe import RunPlan, step_seconds

CFGS = [TrainConfig(dataset="shapes", model=m) for m in ("resnet_small", "vit_tiny", "text_transformer")]


def queue_of(plans: list[RunPlan]) -> JobQueue:
    queue = JobQueue(1, "Quick start", [Job(i + 1, c, 1, i + 1, len(CFGS)) for i, c in enumerate(CFGS)])
    for job, plan in zip(queue.jobs, plans, strict=True):
        job.set_plan(plan)
    return queue


def step(job: Job, step: int, total: int, eta: float | None, elapsed: float) -> None:
    job.on_event(
        TrainEvent(
            kind="step", run_id="r", epoch=1, epochs=1, step=step, total_steps=total, eta_s=eta, elapsed_s=elapsed
        )
    )


def test_queued_runs_are_priced_by_their_own_models_probe_scaled_by_the_running_jobs_measure():
    # Run 1 (probe 0.1 s/step) trains at 0.2 s/step: the machine runs at twice the probes' time. Run 2's model is
    # 5x slower per step than run 1's, run 3's half as slow: priced 40 x 0.5 x 2 and 100 x 0.05 x 2.
    queue = queue_of([RunPlan(20, 0.1), RunPlan(40, 0.5), RunPlan(100, 0.05)])
    queue.jobs[0].mark_starting()
    step(queue.jobs[0], 10, 20, eta=2.0, elapsed=2.0)
    snap = queue.snapshot()
    assert snap.scale == pytest.approx(2.0)
    assert snap.price_s(snap.jobs[1]) == pytest.approx(40.0)
    assert snap.price_s(snap.jobs[2]) == pytest.approx(10.0)
    assert snap.eta_s == pytest.approx(2.0 + 40.0 + 10.0)  # at run 1's pace it read 2 + 28 s


def test_a_runs_measured_overhead_is_added_to_each_queued_run():
    queue = queue_of([RunPlan(20, 0.1), RunPlan(40, 0.5), RunPlan(100, 0.05)])
    first = queue.jobs[0]
    first.mark_starting()
    first._began = time.time() - 30.0  # handed to the trainer 30 s ago; 4 s training, 6 s start-up and test, ended
    step(first, 20, 20, eta=0.0, elapsed=4.0)
    first._finish("completed", None)
    queue.jobs[1].mark_starting()
    snap = queue.snapshot()
    assert snap.jobs[0].overhead_s == pytest.approx(26.0, abs=0.5)
    assert snap.scale == pytest.approx(2.0)  # 4 s over 20 steps of a 0.1 s probe
    # Run 2 is starting (nothing measured of its own): priced in full less what it has spent starting.
    assert snap.eta_s == pytest.approx((40 * 1.0 + 26.0) + (100 * 0.1 + 26.0), abs=1.0)


def test_without_probes_queued_runs_go_at_the_current_runs_pace():
    queue = queue_of([RunPlan(20), RunPlan(40), RunPlan(100)])
    queue.jobs[0].mark_starting()
    step(queue.jobs[0], 10, 20, eta=2.0, elapsed=2.0)
    assert queue.snapshot().eta_s == pytest.approx(2.0 + 0.2 * 140)


@pytest.mark.slow  # builds the three models and times a few steps of each (about 10 s)
def test_the_probe_tells_the_demo_models_apart():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        resnet, vit, text = (
            step_seconds(TrainConfig(dataset=d, model=m))
            for d, m in (("shapes", "resnet_small"), ("shapes", "vit_tiny"), ("cues", "text_transformer"))
        )
    finally:
        torch.set_num_threads(threads)
    # the text transformer's steps cost a fraction of the image models' (3-5x on a quiet machine; 2.3x seen once
    # while other tests shared the cores: timings, so a margin the load cannot take away)
    assert min(resnet, vit) > 1.8 * text


def test_each_queued_run_pays_the_loading_of_its_own_data_set():
    # Run 1's 26 s outside its steps were 20 s of loading its data; run 3's data loads in 2 s.
    queue = queue_of([RunPlan(20, 0.1, 20.0), RunPlan(40, 0.5, 0.0), RunPlan(100, 0.05, 2.0)])
    first = queue.jobs[0]
    first.mark_starting()
    first._began = time.time() - 30.0
    step(first, 20, 20, eta=0.0, elapsed=4.0)
    first._finish("completed", None)
    snap = queue.snapshot()
    assert snap.overhead_s == pytest.approx(6.0, abs=0.5)
    assert snap.price_s(snap.jobs[2]) == pytest.approx(100 * 0.1 + 6.0 + 2.0, abs=0.5)


def test_the_pace_is_the_recent_one_when_the_load_changes():
    # Run 1 went at 1 s a step for its first 10 steps (a loaded machine), then at 0.1 s: the recent pace counts.
    queue = queue_of([RunPlan(100, 0.1), RunPlan(40, 0.5), RunPlan(100, 0.05)])
    queue.jobs[0].mark_starting()
    step(queue.jobs[0], 10, 100, eta=90.0, elapsed=10.0)
    for n in range(12, 52, 2):
        step(queue.jobs[0], n, 100, eta=40.0, elapsed=10.0 + 0.1 * (n - 10))
    snap = queue.snapshot()
    assert snap.jobs[0].measured_step_s == pytest.approx(0.1)
    assert snap.scale == pytest.approx(1.0)
    assert snap.eta_s == pytest.approx(50 * 0.1 + 40 * 0.5 + 100 * 0.05)  # at its average pace: 50 x 0.28


def test_the_current_run_is_priced_with_the_end_a_run_took_here():
    # Run 1: 6 s from its hand-over to its first step, 4 s of steps, then 20 s of test evaluation and exit.
    queue = queue_of([RunPlan(20, 0.1), RunPlan(40, 0.5), RunPlan(100, 0.05)])
    first = queue.jobs[0]
    first.mark_starting()
    first._began = time.time() - 30.0
    first._first_event = first._began + 6.0
    step(first, 20, 20, eta=0.0, elapsed=4.0)
    first._finish("completed", None)
    second = queue.jobs[1]
    second.mark_starting()
    step(second, 20, 40, eta=10.0, elapsed=10.0)
    snap = queue.snapshot()
    assert snap.finish_s == pytest.approx(20.0, abs=0.5)
    assert snap.eta_s == pytest.approx(10.0 + 20.0 + (100 * 0.05 * 1.0 + 26.0), abs=1.0)
