"""Integrated Gradients' path integral, refined where it misses what it promises (registers no method).

IG's attributions add up to f(x) - f(reference) only as far as the quadrature of the path integral is exact.
On a smooth path the `steps` Gauss-Legendre points captum uses are plenty; on a path with sharp turns they are
not: a trained `text_transformer`'s attention switches from one key to another within 0.1% of the path from the
padding embedding to the words (its pre-norm LayerNorm blows the small mix of position and word embedding up
about 20x), so the target logit jumps by ~1 there and 50, even 800, evenly spread points miss or overweigh the
jump (completeness gaps of 35-100% of the logit change; see docs/explanations.md).

`refined_path` integrates one input's path again as composite Gauss-Legendre quadrature on segments of [0, 1]
and splits the segments whose own check fails, |integral over [a, b] - (f(b) - f(a))| > tolerance x (b - a) x
|f(x) - f(reference)|, until the segments' gaps add up to at most the tolerance or the point budget is spent.
The segments' checks telescope to the whole path's, so what is left of the gap is bounded by their sum.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import torch

from xaidash.explainers.registry import CHANGE_FLOOR, COMPLETENESS_TOLERANCE

IG_TOLERANCE = COMPLETENESS_TOLERANCE  # IG's declared promise (1%): beyond it the path is refined
NODES = 8  # Gauss-Legendre points per segment
RAISE = 8  # the path's points may be raised to this many times the steps asked ...
MAX_STEPS = 4000  # ... and never beyond this many

# alphas (P,) float64 on the CPU -> (f at those path points (P,), the per-feature integrand (P, *features):
# the gradient of f times (input - reference), summed over whatever the caller does not attribute separately).
Integrand = Callable[[torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]
# alphas (P,) -> f at those path points (P,), no gradient.
Values = Callable[[torch.Tensor], torch.Tensor]


def step_budget(steps: int) -> int:
    """How many points the path of an input explained with `steps` may be raised to."""
    return max(int(steps), min(RAISE * int(steps), MAX_STEPS))


def first_segments(steps: int) -> int:
    """How many segments `refined_path` starts from: about twice as fine as the `steps` asked, within budget."""
    return max(1, min(step_budget(steps) // NODES, math.ceil(2 * steps / NODES)))


def refinement_passes(steps: int, steps_used: int) -> tuple[int, int]:
    """(forward+backward, forward-only) rows `refined_path` sent through the model for one input explained with
    `steps` that ended on `steps_used` points (none when it was not refined). Each split evaluates f at one new
    edge and integrates two new halves, so from the final segment count: the points of every segment ever
    integrated (the first ones and two per split) and f at every edge."""
    if steps_used == steps:
        return 0, 0
    segments = steps_used // NODES
    splits = segments - first_segments(steps)
    return NODES * (first_segments(steps) + 2 * splits), segments + 1


def _chunks(alphas: torch.Tensor, rows: int) -> list[torch.Tensor]:
    return list(alphas.split(max(1, int(rows))))


def refined_path(
    integrand: Integrand,
    values: Values,
    change: float,
    *,
    steps: int,
    tolerance: float,
    rows: int,
) -> tuple[torch.Tensor, int]:
    """One input's attributions (*features) integrated on an adaptively split path, and the points it used.

    `change` is f(x) - f(reference) at the path's ends (the two `values` of alpha 1 and 0); `steps` the points
    asked for: the first split is about twice as fine, and the points never exceed `step_budget(steps)`.
    `rows`: path points per model pass."""
    budget = step_budget(steps)
    nodes, weights = np.polynomial.legendre.leggauss(NODES)
    unit_nodes, unit_weights = (nodes + 1.0) / 2.0, weights / 2.0  # on [0, 1]
    allowed = tolerance * max(abs(change), CHANGE_FLOOR)
    first = first_segments(steps)
    edges = [i / first for i in range(first + 1)]
    f_at = dict(zip(edges, _evaluate(values, edges, rows), strict=True))
    segments = list(itertools.pairwise(edges))
    integrals: dict[tuple[float, float], torch.Tensor] = {}
    pending = segments
    while True:
        if pending:
            alphas = torch.tensor([a + (b - a) * u for a, b in pending for u in unit_nodes], dtype=torch.float64)
            grads = torch.cat([integrand(chunk)[1].detach() for chunk in _chunks(alphas, rows)])
            w = torch.tensor(
                [(b - a) * v for a, b in pending for v in unit_weights], dtype=grads.dtype, device=grads.device
            )
            per_point = grads * w.view(-1, *([1] * (grads.dim() - 1)))
            for j, seg in enumerate(pending):
                integrals[seg] = per_point[j * NODES : (j + 1) * NODES].sum(0)
        errors = {s: abs(float(integrals[s].sum()) - (f_at[s[1]] - f_at[s[0]])) for s in segments}
        points = NODES * len(segments)
        room = (budget - points) // NODES
        if sum(errors.values()) <= allowed or room <= 0:
            break
        failing = sorted(
            (s for s in segments if errors[s] > allowed * (s[1] - s[0])), key=lambda s: errors[s], reverse=True
        )[:room]
        if not failing:
            break
        mids = [(a + b) / 2.0 for a, b in failing]
        f_at.update(zip(mids, _evaluate(values, mids, rows), strict=True))
        split = set(failing)
        pending = [half for (a, b), m in zip(failing, mids, strict=True) for half in ((a, m), (m, b))]
        segments = sorted([s for s in segments if s not in split] + pending)
        for s in split:
            integrals.pop(s, None)
    total = torch.stack([integrals[s] for s in segments]).sum(0)
    return total, NODES * len(segments)


def _evaluate(values: Values, alphas: list[float], rows: int) -> list[float]:
    at = torch.tensor(alphas, dtype=torch.float64)
    with torch.no_grad():
        return [float(v) for chunk in _chunks(at, rows) for v in values(chunk).double().cpu()]


def refined_line(
    model: torch.nn.Module, start: torch.Tensor, diff: torch.Tensor, target: int, change: float, steps: int, rows: int
) -> tuple[torch.Tensor, int]:
    """IG of one input integrated on an adaptively split path along the straight line `start` + a * `diff` (both
    (1, ...) on the model's device): (attributions shaped like `diff`, the points used). Images and table rows both
    refine through it."""

    def run(alphas: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        a = alphas.to(device=diff.device, dtype=diff.dtype).view(-1, *([1] * (diff.dim() - 1)))
        points = (start + a * diff).requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            out = model(points).float()[:, target]
            g = torch.autograd.grad(out.sum(), points)[0] if grad else None
        return out.detach(), None if g is None else g * diff

    def integrand(alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, g = run(alphas, True)
        assert g is not None
        return out, g

    return refined_path(
        integrand, lambda alphas: run(alphas, False)[0], change, steps=steps, tolerance=IG_TOLERANCE, rows=rows
    )
