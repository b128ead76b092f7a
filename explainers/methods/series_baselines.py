"""What the series methods share (registers no method): the baselines a hidden stretch of a series takes, its time
windows and segments, and rows with some steps hidden, all on prepared (standardised) series on the device.

A series is standardised per channel, an affine map, so every baseline but `zero` is computed on the prepared series
directly and equals the prepared baseline of the raw one: the channel's training mean is 0 there, a series' own mean
and a Gaussian-smoothed copy (weights summing to 1, edges padded by repetition) commute with it, and so does a
straight line between two of its values. `zero` (the raw value 0) is prepared from a raw series of zeros.

`interpolation` hides a stretch [a, b) of steps by the straight line between the values just outside it (at a - 1
and b); at an end of the series the one neighbour there is is held flat, and a stretch that spans the whole series
takes the series' own mean. It depends on the stretch, so it is built per hidden stretch (`line_fill`)."""

from __future__ import annotations

import math
from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext
from xaidash.models.bundle import ModelBundle

# Baselines that are one series per input (gradients' references, the fill of hidden segments).
FIXED_BASELINES = ("zero", "mean", "series_mean", "smoothed")
# Baselines a perturbation method may hide a stretch with.
HIDE_BASELINES = (*FIXED_BASELINES, "interpolation")
SMOOTH_SIGMA = 1 / 32  # the Gaussian's standard deviation, as a share of the series' length (at least one step)
SEGMENTS = 16  # time segments KernelSHAP and LIME attribute by default (fewer for a short series)

_WORDS = {
    "zero": "zero: the raw value 0",
    "mean": "mean: each channel's training mean",
    "series_mean": "series_mean: the series' own mean per channel",
    "smoothed": "smoothed: a Gaussian-smoothed copy of the series (σ = T/32 steps)",
    "interpolation": "interpolation: a straight line across the hidden stretch between the values at its edges",
}


def baseline_words(name: str) -> str:
    """What a baseline is, in the words the legends and descriptions use."""
    return _WORDS[name]


def baseline_param(default: str, *, hide: bool = False) -> Param:
    """The `baseline` choice: the reference of a gradient method, or (`hide`) what hides a perturbed stretch."""
    choices = HIDE_BASELINES if hide else FIXED_BASELINES
    what = "What a hidden stretch of steps is replaced by" if hide else "The reference series the path starts from"
    return Param(
        "baseline", "choice", default, f"{what}; " + "; ".join(_WORDS[c] for c in choices) + ".", choices=choices
    )


def smoothed(x: torch.Tensor) -> torch.Tensor:
    """(N, C, T) -> the same series Gaussian-smoothed along time (σ = SMOOTH_SIGMA x T steps, at least 1; kernel
    out to 3σ, normalised; ends padded by repeating the first and last values)."""
    steps = x.shape[-1]
    sigma = max(1.0, SMOOTH_SIGMA * steps)
    radius = min(math.ceil(3 * sigma), steps - 1)
    if radius < 1:
        return x.clone()
    offsets = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)
    kernel = (kernel / kernel.sum()).view(1, 1, -1)
    flat = x.reshape(-1, 1, steps)
    padded = torch.nn.functional.pad(flat, (radius, radius), mode="replicate")
    return torch.nn.functional.conv1d(padded, kernel).view_as(x)


def fixed_baseline(name: str, bundle: ModelBundle, x: torch.Tensor) -> torch.Tensor:
    """The prepared (N, C, T) baseline series of each prepared series x for a baseline that does not depend on what
    is hidden."""
    x = x.detach()
    if name == "zero":
        return bundle.prepare(torch.zeros(1, *x.shape[1:], device=x.device)).expand_as(x).clone()
    if name == "mean":
        return torch.zeros_like(x)
    if name == "series_mean":
        return x.mean(dim=2, keepdim=True).expand_as(x).clone()
    if name == "smoothed":
        return smoothed(x)
    raise ExplainError(f"Baseline {name!r} is not one series per input; choose one of {', '.join(FIXED_BASELINES)}.")


def line_fill(x: torch.Tensor, start: torch.Tensor, stop: torch.Tensor) -> torch.Tensor:
    """The `interpolation` fill of rows x (R, C, T): at every step t, the value at t of the straight line across
    the stretch [start, stop) that t is hidden in; `start` and `stop` are (R, T) or (T,) long (a row's window, or
    each step's segment). Only the values at hidden steps are used."""
    rows, _, steps = x.shape
    a = start.expand(rows, steps)
    b = stop.expand(rows, steps)
    t = torch.arange(steps, device=x.device).expand(rows, steps)
    left_at, right_at = (a - 1).clamp(min=0), b.clamp(max=steps - 1)
    left = x.gather(2, left_at.unsqueeze(1).expand(-1, x.shape[1], -1))
    right = x.gather(2, right_at.unsqueeze(1).expand(-1, x.shape[1], -1))
    has_left, has_right = (a > 0).unsqueeze(1), (b < steps).unsqueeze(1)
    share = ((t - (a - 1)).to(x.dtype) / (b - (a - 1)).to(x.dtype)).unsqueeze(1)
    line = left + share * (right - left)
    flat_left = torch.where(has_left, left, right)  # one neighbour: held flat
    whole = x.mean(dim=2, keepdim=True).expand_as(x)
    return torch.where(has_left & has_right, line, torch.where(has_left | has_right, flat_left, whole))


def segment_bounds(steps: int, segments: int) -> torch.Tensor:
    """(k + 1,) long edges of k = min(segments, steps) equal time segments covering the steps."""
    k = max(1, min(int(segments), steps))
    return torch.round(torch.linspace(0, steps, k + 1, dtype=torch.float64)).long()


def segment_labels(steps: int, segments: int) -> torch.Tensor:
    """(T,) long: the segment each step is in (0 .. k - 1)."""
    edges = segment_bounds(steps, segments)
    return torch.bucketize(torch.arange(steps), edges[1:], right=True)


def segment_fill(name: str, bundle: ModelBundle, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The prepared (N, C, T) series every hidden segment of the prepared series x takes its values from: a fixed
    baseline, or with `interpolation` each segment's own line between the values just outside it. With every
    segment hidden a series is this one: what KernelSHAP's values add up to the change from (the completeness
    metric's f(baseline) for a series method, from the explanation's params and segment labels)."""
    if name != "interpolation":
        return fixed_baseline(name, bundle, x)
    edges = segment_bounds(len(labels), int(labels.max()) + 1).to(x.device)
    labels = torch.as_tensor(labels).to(x.device)
    return line_fill(x.detach(), edges[labels], edges[labels + 1])


def segments_param(default: int = SEGMENTS) -> Param:
    return Param(
        "segments",
        "int",
        default,
        "Equal time segments the series is cut into (fewer for a series shorter than this many steps).",
        min=1,
        max=1000,
    )


def step_count(ctx: MethodContext) -> int:
    return int(ctx.x.shape[-1])


def resolved_segments(ctx: MethodContext, params: dict[str, Any]) -> torch.Tensor:
    """(T,) segment labels of the series of this call."""
    return segment_labels(step_count(ctx), int(params["segments"]))


def scored_coalitions(
    ctx: MethodContext,
    fill: torch.Tensor,
    on: torch.Tensor,
    labels: torch.Tensor,
    *,
    probability: bool = False,
    what: str = "the explanation",
) -> tuple[torch.Tensor, int]:
    """The target's logit (or probability) of every series of the call showing each coalition of segments (`on`
    (S, k) 0/1), its other segments taken from `fill` (N, C, T): (N, S) float32 scores on the device and the batch
    size that ran. A coalition drawn more than once (KernelSHAP draws the smallest and largest ones often) is
    scored once: the same values as scoring every draw, in fewer passes. All series share one stream of passes
    (`_common.scored_rows`)."""
    x = ctx.x.detach()
    distinct, inverse = torch.unique(on, dim=0, return_inverse=True)
    shown = distinct.to(x.device)[:, labels.to(x.device)].bool()  # (U, T): each coalition spread over its steps
    count = len(distinct)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * U + u: series i showing the segments of distinct coalition u.
        i, u = index // count, index % count
        return torch.where(shown[u].unsqueeze(1), x[i], fill[i]), ctx.targets[i]

    scores, used = scored_rows(ctx, len(x) * count, build, probability=probability, what=what)
    return scores.view(len(x), count)[:, inverse.to(scores.device)], used
