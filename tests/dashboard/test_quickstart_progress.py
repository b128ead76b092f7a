"""The quick start's progress counts work: every run's steps are planned before the first trains, the bar is each
run's steps done over all of them (never one third per run), it never goes back, and it reaches 100% at the end.
Home lists the demo runs whenever the run store holds them, even when another job trained since."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from app_pages import assert_ok, make_app
from inspect_runs import make_run

from xaidash.dashboard.components.job_status import queue_progress_text
from xaidash.dashboard.jobs import Job, JobManager, JobQueue
from xaidash.dashboard.services import job_manager
from xaidash.models.training.config import TrainConfig, TrainEvent
from xaidash.models.training.demo import DEMO_RUNS, planned_steps

# Three runs of very different sizes, as the demo's (129, 430 and 456 steps with their recipes).
PLAN = {"resnet_small": 12, "vit_tiny": 40, "text_transformer": 48}


class FakeRun:
    id = "fake-run"


class FakeResult:
    def __init__(self, state: str):
        self.run, self.state, self.error, self.test_acc, self.test_loss = FakeRun(), state, None, 0.99, 0.1


def demo_queue() -> JobQueue:
    cfgs = [TrainConfig(dataset=d, model=m) for d, m in DEMO_RUNS]
    return JobQueue(1, "Quick start", [Job(i + 1, c, 1, i + 1, len(cfgs)) for i, c in enumerate(cfgs)])


def test_progress_is_steps_done_over_every_runs_steps_and_never_goes_back():
    queue = demo_queue()
    seen: list[tuple[int, float, str]] = []  # (steps done so far across the queue, the bar's fraction, its text)
    done_before = {"steps": 0}

    def fake_train(cfg, callbacks, stop):
        total = PLAN[cfg.model]
        for cb in callbacks:
            cb(TrainEvent(kind="start", run_id="r", epochs=1, total_steps=total))
        snap = queue.snapshot()
        seen.append((done_before["steps"], snap.progress, queue_progress_text(snap)))
        for step in range(1, total + 1):
            for cb in callbacks:
                cb(TrainEvent(kind="step", run_id="r", epoch=1, epochs=1, step=step, total_steps=total))
            snap = queue.snapshot()
            seen.append((done_before["steps"] + step, snap.progress, queue_progress_text(snap)))
        done_before["steps"] += total
        return FakeResult("completed")

    queue.work(fake_train, plan_fn=lambda cfg: PLAN[cfg.model])
    final = queue.snapshot()
    total = sum(PLAN.values())
    assert final.total_steps == total and final.progress == 1.0 and final.steps_done == total
    fractions = [f for _, f, _ in seen]
    assert all(b >= a for a, b in itertools.pairwise(fractions)), "the bar went back"
    for steps, fraction, _ in seen:
        assert fraction == pytest.approx(steps / total)  # proportional to steps, not a third per run
    # After the first (small) run the bar says 12%, not 33% (one third per run); the text counts steps.
    first_done = next(f for s, f, _ in seen if s == PLAN["resnet_small"])
    assert first_done == pytest.approx(0.12)
    text = next(t for s, _, t in seen if s == 50)
    assert "Run 2 of 3 · step 50 of 100 (50%)" in text and "left" in text and "elapsed" in text


def test_progress_is_monotone_when_a_run_stops_early_and_the_rest_are_cancelled():
    queue = demo_queue()
    fractions: list[float] = []

    def fake_train(cfg, callbacks, stop):
        total = PLAN[cfg.model]
        for step in range(1, total // 2 + 1):
            for cb in callbacks:
                cb(TrainEvent(kind="step", run_id="r", epoch=1, epochs=1, step=step, total_steps=total))
            fractions.append(queue.snapshot().progress)
        if cfg.model == "vit_tiny":
            queue.cancel()  # the user stops: this run ends after its step, the last one is cancelled
            return FakeResult("stopped")
        return FakeResult("completed")

    queue.work(fake_train, plan_fn=lambda cfg: PLAN[cfg.model])
    fractions.append(queue.snapshot().progress)
    assert all(b >= a for a, b in itertools.pairwise(fractions))
    assert [j.state for j in queue.snapshot().jobs] == ["completed", "stopped", "cancelled"]


def test_time_left_is_the_current_runs_estimate_plus_the_queued_runs_at_its_pace():
    queue = demo_queue()
    for job, steps in zip(queue.jobs, PLAN.values(), strict=True):
        job.set_plan(steps)
    queue.jobs[0].mark_starting()
    assert queue.snapshot().eta_s is None  # nothing measured yet
    # Run 1 done; run 2 at step 10 of 40, 15 s left by its own estimate: 0.5 s per step, run 3's 48 steps 24 s.
    queue.jobs[0].on_event(TrainEvent(kind="step", run_id="r", epoch=1, epochs=1, step=12, total_steps=12))
    queue.jobs[0].set_plan(12)
    queue.jobs[0]._finish("completed", None)
    queue.jobs[1].mark_starting()
    queue.jobs[1].on_event(TrainEvent(kind="step", run_id="r", epoch=1, epochs=1, step=10, total_steps=40, eta_s=15.0))
    assert queue.snapshot().eta_s == pytest.approx(15.0 + 0.5 * 48)
    assert "about 39s left" in queue_progress_text(queue.snapshot())


def test_before_the_plan_the_text_says_it_is_counting_and_without_one_each_run_weighs_the_same():
    queue = demo_queue()
    queue.jobs[0].mark_starting()
    assert "counting the steps of the 3 runs" in queue_progress_text(queue.snapshot())
    assert queue.snapshot().weights == [1.0, 1.0, 1.0]


def test_planned_steps_are_the_engines_steps(tmp_path, monkeypatch):
    from xaidash.models.training.session import setup_run

    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    cfg = TrainConfig(dataset="shapes", model="mlp", epochs=2, batch_size=64, max_train_samples=300, device="cpu")
    session = setup_run(cfg)
    try:
        assert planned_steps(cfg) == session.total_steps == 2 * 5  # 270 training samples in batches of 64
    finally:
        if session.lock is not None:
            session.lock.release()


def test_the_manager_plans_a_queue_before_training(monkeypatch):
    manager = JobManager(train_fn=lambda cfg, callbacks, stop: FakeResult("completed"))
    queue = manager.start_queue(
        [TrainConfig(dataset=d, model=m) for d, m in DEMO_RUNS], name="Quick start", plan_fn=lambda c: PLAN[c.model]
    )
    manager.wait(10)
    done = manager.find_queue(queue.id)
    assert done is not None and done.finished and [j.planned_steps for j in done.jobs] == list(PLAN.values())


def test_home_shows_the_demo_runs_when_another_job_ran_last(tmp_path: Path, monkeypatch):
    root = tmp_path / "runs"
    demo = {model: make_run(root, dataset, model, epochs=1) for dataset, model in DEMO_RUNS}
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    # Another job, after the quick start (or in a server that never ran one): the last queue is not the demo's.
    manager = job_manager()  # the server's (AppTest shares it): a stand-in engine, no training here
    monkeypatch.setattr(manager, "train_fn", lambda cfg, callbacks, stop: FakeResult("completed"))
    manager.start(TrainConfig(dataset="digits", model="mlp", epochs=1))
    manager.wait(30)
    last = manager.queue()
    assert last is not None and last.name != "Quick start"
    at = make_app(timeout=120)
    at.run()
    assert_ok(at)
    text = "\n".join(str(m.value) for m in at.main.markdown)
    for model, run in demo.items():
        assert f"{model} on" in text and run.id in text, model
    assert any("demo models are trained" in str(s.value) for s in at.main.success)
    links = [(str(e.proto.label), str(e.proto.page)) for e in at.main.get("page_link")]
    assert sum(label == "Explain" for label, _ in links) >= 3
    assert [b.label for b in at.button if b.label.startswith("Train the demo models")] == [
        "Train the demo models again"
    ]
