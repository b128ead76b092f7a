"""Resuming and extending a run: the learning rate goes on where the schedule planned over the new total says, and
an extended run keeps one test record (its own)."""

from __future__ import annotations

import pytest
import torch
from train_configs import quick

from xaidash.models.training.engine import train
from xaidash.models.training.optimizer import lr_at, make_optimizer, make_schedule
from xaidash.models.training.session import setup_run


def fresh_lr(session, step: int) -> float:
    """The learning rate an uninterrupted run of the session's settings has after `step` steps."""
    params = [torch.nn.Parameter(torch.zeros(1))]
    opt = make_optimizer(session.settings, 0.9, params, torch.device("cpu"))
    schedule = make_schedule(session.settings, opt, session.total_steps)
    for _ in range(step):
        opt.step()
        schedule.step()
    return float(opt.param_groups[0]["lr"])


@pytest.mark.parametrize("schedule", ["cosine", "onecycle"])
def test_a_resumed_run_goes_on_at_the_learning_rate_of_its_schedule(schedule):
    stop = __import__("threading").Event()
    events = []

    def stop_mid_epoch(e):
        events.append(e)
        if e.kind == "step" and e.step >= 5:
            stop.set()

    first = train(quick(epochs=2, schedule=schedule), callbacks=[stop_mid_epoch], stop=stop)
    assert first.state == "stopped"
    session = setup_run(quick(epochs=2, schedule=schedule), resume=first.run.id)
    try:
        assert session.step > 0
        assert session.optimizer.param_groups[0]["lr"] == pytest.approx(fresh_lr(session, session.step), rel=1e-6)
    finally:
        session.lock.release()


def test_extending_a_finished_run_replans_the_schedule_and_keeps_one_test_record():
    first = train(quick(epochs=1, schedule="cosine"))
    assert first.state == "completed"
    session = setup_run(quick(epochs=3, schedule="cosine"), resume=first.run.id)
    try:
        expected = lr_at(session.settings, session.total_steps, session.step)
        assert session.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-6)
        assert expected > 0.5 * session.settings.lr  # a third of the way along the longer cosine: well above its floor
    finally:
        session.lock.release()
    extended = train(quick(epochs=3), resume=first.run.id)
    assert extended.state == "completed" and extended.epochs_done == 3
    assert [r["kind"] for r in extended.run.metrics()].count("test") == 1
