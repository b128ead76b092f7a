"""Occlusion over time for series models: a window of `window` steps slides along the series by `stride`, the steps
under it are hidden (replaced by the chosen baseline: the raw value 0, the channel's training mean, the series' own
mean, a smoothed copy, or a straight line across the window between the values at its edges) and the drop of the
target logit is the window's value; each step gets the mean over the windows that cover it. The windows span every
channel (one map over steps, (N, 1, T)), or with `channels=each` one channel at a time ((N, C, T)).

The windows are captum's `Occlusion` windows (starts 0, stride, 2 x stride, ... until the series is covered, the
last one cut at the end), so the values equal captum's on the same model, window, stride and baseline series; but
every window of every series of the call is built on the device and scored in one stream of shared passes
(`_common.scored_rows`), as the table and image methods are."""

from __future__ import annotations

import math
from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.methods.series_baselines import baseline_param, fixed_baseline, line_fill
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

CHANNEL_MODES = ("together", "each")


def window_and_stride(steps: int, params: dict[str, Any]) -> tuple[int, int]:
    """The window and stride in steps: 0 means the default, a window of T/16 steps (at least 1) and half a window."""
    window = int(params["window"]) or max(1, steps // 16)
    if window > steps:
        raise ExplainError(f"Occlusion window={window} is longer than the series ({steps} steps).")
    stride = int(params["stride"]) or max(1, window // 2)
    if stride > window:
        raise ExplainError(f"Occlusion stride={stride} is longer than its window ({window}): steps would be skipped.")
    return window, stride


def window_starts(steps: int, window: int, stride: int) -> torch.Tensor:
    """captum Occlusion's window starts: ceil((T - window) / stride) + 1 of them, stride apart."""
    return torch.arange(math.ceil((steps - window) / stride) + 1) * stride


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    x = ctx.x.detach()
    n, channels, steps = x.shape
    window, stride = window_and_stride(steps, params)
    starts = window_starts(steps, window, stride).to(x.device)
    stops = (starts + window).clamp(max=steps)
    t = torch.arange(steps, device=x.device)
    covers = (t >= starts[:, None]) & (t < stops[:, None])  # (W, T): which steps each window hides
    each = params["channels"] == "each" and channels > 1
    lanes = channels if each else 1
    features = len(starts) * lanes  # window w of channel lane c is feature w * lanes + c
    kind = str(params["baseline"])
    fill = None if kind == "interpolation" else fixed_baseline(kind, ctx.bundle, ctx.x)
    lane_mask = torch.eye(channels, dtype=torch.bool, device=x.device) if each else None

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row r < n: series r as it is; then row n + i * F + f: series i with feature f hidden.
        plain = index < n
        rest = (index - n).clamp(min=0)
        i = torch.where(plain, index, rest // features)
        w, c = (rest % features) // lanes, rest % lanes
        hide = covers[w].unsqueeze(1) & ~plain.view(-1, 1, 1)  # (R, 1, T)
        if lane_mask is not None:
            hide = hide & lane_mask[c].unsqueeze(2)
        rows = x[i]
        hidden = line_fill(rows, starts[w, None], stops[w, None]) if fill is None else fill[i]
        return torch.where(hide, hidden, rows), ctx.targets[i]

    scores, used = scored_rows(ctx, n + n * features, build, what="Occlusion")
    drops = (scores[:n, None] - scores[n:].view(n, features)).view(n, len(starts), lanes)
    spread = torch.einsum("nwc,wt->nct", drops, covers.to(drops.dtype))
    counts = covers.sum(0).to(drops.dtype)  # every step is under at least one window
    return MethodOutput(
        spread / counts,
        {"batch_size": [float(used)] * n, "window": [float(window)] * n, "stride": [float(stride)] * n},
    )


def _passes(
    bundle: ModelBundle, params: dict[str, Any], n: int, background: int, hw: tuple[int, int]
) -> tuple[int, int]:
    """f(x) and one row per window (per window and channel with channels=each) for each series."""
    channels, steps = (int(v) for v in bundle.info.input_shape)
    window, stride = window_and_stride(steps, params)
    lanes = channels if params["channels"] == "each" else 1
    return 0, n * (1 + lanes * len(window_starts(steps, window, stride)))


register(
    MethodSpec(
        id="occlusion",
        label="Occlusion",
        modalities=("series",),
        compute=_compute,
        params=(
            Param("window", "int", 0, "Steps hidden at once; 0: a sixteenth of the series (at least 1).", min=0),
            Param("stride", "int", 0, "Steps the window moves by; 0: half the window (at least 1).", min=0),
            baseline_param("interpolation", hide=True),
            Param(
                "channels",
                "choice",
                "together",
                "together: a window hides every channel at once (one map over steps); each: one channel at a time "
                "(a channel x step map for a multivariate series).",
                choices=CHANNEL_MODES,
            ),
        ),
        signed=True,
        family="perturbation",
        output="logit",
        description="Slides a window along the series, hides the steps under it (the baseline: zero, the training "
        "mean, the series' mean, a smoothed copy, or a straight line across the window) and records the drop of "
        "the target logit; each step gets the mean drop of the windows covering it (captum's Occlusion, batched).",
        passes_on_model=_passes,
        featured=2,
    )
)
