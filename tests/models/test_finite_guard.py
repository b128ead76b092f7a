"""FiniteGuard: non-finite losses noted on the device, read at checks, the last good weights put back."""

from __future__ import annotations

import math

import torch

from xaidash.models.training.finite_guard import FiniteGuard


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))


def test_finite_losses_pass_and_each_check_keeps_the_current_weights():
    m = model()
    guard = FiniteGuard(m, torch.device("cpu"))
    for step in range(1, 4):
        guard.watch(torch.tensor(0.5), step)
    with torch.no_grad():
        m[0].weight.add_(1.0)
    assert guard.check(3) is None and guard.good_step == 3
    saved = m[0].weight.clone()
    guard.watch(torch.tensor(float("inf")), 4)
    guard.watch(torch.tensor(float("nan")), 5)  # later bad steps do not hide the first
    with torch.no_grad():
        m[0].weight.fill_(float("nan"))
        m[1].running_mean.fill_(float("nan"))
    found = guard.check(5)
    assert found is not None and found.step == 4 and math.isinf(found.loss) and found.restored_step == 3
    assert torch.equal(m[0].weight, saved) and torch.isfinite(m[1].running_mean).all()


def test_integer_buffers_are_left_as_they_are():
    m = model()
    guard = FiniteGuard(m, torch.device("cpu"))
    m[1].num_batches_tracked.fill_(7)
    guard.watch(torch.tensor(float("nan")), 1)
    assert guard.check(1) is not None
    assert int(m[1].num_batches_tracked) == 7


def test_a_non_finite_loss_seen_by_another_process_puts_the_weights_back_here_too():
    m = model()
    guard = FiniteGuard(m, torch.device("cpu"))
    start = m[0].weight.clone()
    guard.watch(torch.tensor(1.0), 1)
    with torch.no_grad():
        m[0].weight.mul_(2)
    found = guard.check(1, agree=lambda mine: True)  # this rank saw nothing; another did
    assert found is not None and found.step == -1 and found.restored_step == 0
    assert torch.equal(m[0].weight, start)


def test_watch_never_reads_the_loss_on_the_host(monkeypatch):
    guard = FiniteGuard(model(), torch.device("cpu"))
    reads = []
    monkeypatch.setattr(torch.Tensor, "item", lambda self: reads.append(1))
    monkeypatch.setattr(torch.Tensor, "__bool__", lambda self: reads.append(1) or True)
    for step in range(1, 50):
        guard.watch(torch.tensor(float(step)), step)
    assert reads == []
