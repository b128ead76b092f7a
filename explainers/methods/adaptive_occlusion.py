"""Adaptive occlusion: occlude, then shrink the occluded area while the prediction stays changed, to find the
smallest region whose occlusion changes the prediction.

The search starts with the whole image hidden (by the `fill`). Each step tries four smaller rectangles, the
current one with its top, bottom, left or right side moved in by `cut` of its height or width, and keeps the one
that leaves the target the least probability among those that still change the prediction (the target's
probability at most `keep` times its value on the unoccluded image). When none does, the cut is halved (down to
one pixel) and the step is spent. The number of steps is fixed, so one call's model passes are known beforehand:
per input 1 unoccluded, 1 fully occluded and 4 per step (the speed benchmark and its pass-count test read them).

The map: each pixel gets the target's probability drop with the smallest rectangle hidden, times the share of the
search's rectangles (the whole image and every kept one) that contain it; the smallest rectangle is brightest,
the rectangles the search passed through fade outwards. When hiding the whole image does not change the
prediction there is no such region: every pixel gets the drop with the whole image hidden and the diagnostic
`changed` is 0.

On a text the same search runs over a span of words: every word hidden (its ids take the padding id in place, as
text KernelSHAP's absent words), then the span shrinks from either end (2 candidates, 2 rows per step); each word
gets its value as a pixel does. Each text's rows run in passes of their own, cut to its width.

The occluding passes are the ones occlusion.py makes (the fill in pixel space, normalised like the input, rows
built on the device and run in shared batched passes by `scored_rows`): captum's `Occlusion` slides a fixed
window and returns per-pixel means, and `FeatureAblation` hides one group of a partition at a time, while the
search scores nested, overlapping rectangles chosen from the previous step's scores. Only the shrinking search
below is written by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.methods.text_perturb import padded_rows, trim_padding, word_layout
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.explainers.segmentation import fill

SIDES = 4  # an image's candidates per step: the top, bottom, left or right side moved in


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, n * (2 + SIDES * int(params["steps"]))


def box_masks(boxes: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """(..., H, W) float masks of boxes (..., 4) given as [top, bottom, left, right) in pixels."""
    rows = torch.arange(hw[0], device=boxes.device)
    cols = torch.arange(hw[1], device=boxes.device)
    r = (rows >= boxes[..., 0:1]) & (rows < boxes[..., 1:2])  # (..., H)
    c = (cols >= boxes[..., 2:3]) & (cols < boxes[..., 3:4])  # (..., W)
    return (r[..., :, None] & c[..., None, :]).float()


def candidates(boxes: torch.Tensor, cut: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The shrunk boxes of each box (N, 2d) given as [lo, hi) per dimension (an image's rows then columns, a text's
    words): each side moved in by `cut` (N,) of its dimension's size (at least one) -> (N, 2d, 2d) in the order
    lo_1, hi_1, lo_2, ...; and whether each still holds something (N, 2d)."""
    sides = boxes.shape[1]
    size = boxes[:, 1::2] - boxes[:, 0::2]  # (N, d)
    step = torch.clamp((cut[:, None] * size).floor().long(), min=1)
    out = boxes[:, None, :].repeat(1, sides, 1)
    side = torch.arange(sides, device=boxes.device)
    sign = 1 - 2 * (side % 2)  # a low side moves up, a high side down
    out[:, side, side] += sign * step[:, side // 2]
    valid = (out[..., 1::2] > out[..., 0::2]).all(-1)
    return out, valid


@dataclass
class Search:
    """Where the search ended for each input: the smallest box found (N, 2d), the target's probability with it
    hidden and unhidden (N,), whether hiding the whole input changed the prediction (N,), and every box it kept,
    one per step, zero-size boxes for the steps that kept none (N, steps + 1, 2d), the whole input first."""

    box: torch.Tensor
    hidden: torch.Tensor
    plain: torch.Tensor
    changed: torch.Tensor
    history: torch.Tensor

    def drop(self) -> torch.Tensor:
        return self.plain - self.hidden

    def kept(self) -> torch.Tensor:
        """(N,) how many boxes each input's search kept, the whole input included."""
        return (self.history[..., 1::2] > self.history[..., 0::2]).all(-1).sum(1).float()


def shrink(score: Callable[[torch.Tensor], torch.Tensor], whole: torch.Tensor, params: dict[str, Any]) -> Search:
    """The shrinking search, written by hand (see the module docstring). score: boxes (N, K, 2d) -> the target's
    probability with each hidden (N, K), a zero-size box hiding nothing."""
    n = len(whole)
    p0 = score(torch.zeros_like(whole)[:, None])[:, 0]
    bar = params["keep"] * p0  # at or below this, the prediction counts as changed
    current, p_current = whole.clone(), score(whole[:, None])[:, 0]
    changed = p_current <= bar
    history = [whole.clone()]
    cut = torch.full((n,), float(params["cut"]), device=whole.device)
    for _ in range(int(params["steps"])):
        boxes, valid = candidates(current, cut)
        p = score(boxes)
        ok = valid & (p <= bar[:, None]) & changed[:, None]  # inputs with no changing region do not search
        best = torch.where(ok, p, torch.inf).argmin(1)
        took = ok.any(1)
        current = torch.where(took[:, None], boxes[torch.arange(n, device=whole.device), best], current)
        p_current = torch.where(took, p.gather(1, best[:, None])[:, 0], p_current)
        cut = torch.where(took, cut, cut / 2)
        history.append(torch.where(took[:, None], current, torch.zeros_like(current)))
    return Search(current, p_current, p0, changed, torch.stack(history, 1))


def diagnostics(search: Search, size: torch.Tensor | float, used: int) -> dict[str, list[float]]:
    """Whether a region was found, its share of the input (size: pixels or words per input), the target's
    probability with it hidden, the rows per pass that ran."""
    box = search.box
    share = (box[:, 1::2] - box[:, 0::2]).prod(1).float() / size
    n = len(box)
    return {
        "changed": search.changed.float().tolist(),
        "region_share": share.tolist(),
        "probability_hidden": search.hidden.tolist(),
        "batch_size": [float(used)] * n,
    }


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, _, h, w = ctx.x.shape
    device = ctx.x.device
    baselines = ctx.bundle.prepare(fill(ctx.raw.to(device), params["fill"]))
    used = [0]

    def score(boxes: torch.Tensor) -> torch.Tensor:
        k = boxes.shape[1]

        def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            i = index // k
            m = box_masks(boxes.view(-1, 4)[index], (h, w)).unsqueeze(1).to(ctx.x.dtype)
            return ctx.x[i] + m * (baselines[i] - ctx.x[i]), ctx.targets[i]

        probs, used[0] = scored_rows(ctx, n * k, build, probability=True, what="Adaptive occlusion")
        return probs.view(n, k)

    search = shrink(score, torch.tensor([0, h, 0, w], device=device).repeat(n, 1), params)
    inside = box_masks(search.history, (h, w)).sum(1)  # (N, H, W): the kept boxes that contain each pixel
    attr = search.drop()[:, None, None] * inside / search.kept()[:, None, None]
    return MethodOutput(attributions=attr.detach(), diagnostics=diagnostics(search, h * w, used[0]))


def _compute_text(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    # The same search over a span of words: hidden words take the padding id in place (text KernelSHAP's absent
    # words, text_perturb.padded_rows); special tokens always stay. Spans run over the words that have ids.
    layout, pad = word_layout(ctx), ctx.bundle.tokenizer.pad_id
    player = layout.players()  # (N, L): each id position's word among those with ids, -1 for none
    n = len(layout.words)
    used = [0]

    def score(spans: torch.Tensor) -> torch.Tensor:
        # One input's rows at a time, cut to its own width: a text then gives the same probabilities alone as in
        # a batch (padded to another width, a transformer's sums run in another order), and the search the same
        # decisions. A step has only 2 rows per input, so little is lost by not sharing passes across inputs.
        out = []
        for i in range(n):

            def build(index: torch.Tensor, i: int = i) -> tuple[torch.Tensor, torch.Tensor]:
                span, pos = spans[i, index], player[i].expand(len(index), -1)
                hidden = (pos >= 0) & (pos >= span[:, :1]) & (pos < span[:, 1:])
                rows = padded_rows(ctx.x[i].expand(len(index), -1), ~hidden, pad)
                return trim_padding(rows, pad), ctx.targets[i].expand(len(index))

            probs, used[0] = scored_rows(ctx, spans.shape[1], build, probability=True, what="Adaptive occlusion")
            out.append(probs)
        return torch.stack(out)

    counts = torch.tensor([len(have) for have in layout.present], device=ctx.x.device)
    search = shrink(score, torch.stack([torch.zeros_like(counts), counts], 1), params)
    kept, drop = search.kept().cpu(), search.drop().cpu()
    history = search.history.cpu()
    values = []
    for i, have in enumerate(layout.present):
        word = torch.arange(len(have))
        inside = ((word >= history[i, :, :1]) & (word < history[i, :, 1:])).sum(0).float()
        row = torch.zeros(len(layout.words[i]))  # a word the tokenizer dropped scores 0
        row[have] = drop[i] * inside / kept[i]
        values.append(row.numpy())
    out = diagnostics(search, counts.float().clamp(min=1), used[0])
    return MethodOutput(attributions=values, words=layout.words, diagnostics=out)


SEARCH_PARAMS = (
    Param("steps", "int", 24, "Shrinking steps; each tries every side moved in (one pass each).", min=1, max=200),
    Param(
        "keep",
        "float",
        0.5,
        "The prediction counts as changed when the target's probability falls to at most this share of "
        "its value on the unchanged input.",
        min=0.01,
        max=0.99,
    ),
    Param(
        "cut",
        "float",
        0.5,
        "First cut: the share of a side moved in per step (halved when none helps).",
        min=0.05,
        max=0.9,
    ),
)

register(
    MethodSpec(
        id="adaptive_occlusion",
        label="Adaptive occlusion",
        modalities=("image",),
        compute=_compute,
        params=(
            *SEARCH_PARAMS,
            Param(
                "fill",
                "choice",
                "blur",
                "What the hidden rectangle shows: a blurred copy (the default: it found the object best on shapes), "
                "the image's mean colour, or black pixels.",
                choices=("blur", "mean", "zero"),
            ),
        ),
        signed=True,
        family="perturbation",
        output="probability",
        passes=_passes,
        description=(
            "Hides the whole image, then shrinks the hidden rectangle side by side while hiding it still changes "
            "the prediction, to the smallest region that does; brightest there, fading over the larger rectangles "
            "the search passed through; flat, with the diagnostic changed = 0, when hiding the whole image does "
            "not change it. 2 + 4 x steps forward passes per image."
        ),
    )
)

register(
    MethodSpec(
        id="adaptive_occlusion",
        label="Adaptive occlusion",
        modalities=("text",),
        compute=_compute_text,
        params=SEARCH_PARAMS,
        signed=True,
        family="perturbation",
        output="probability",
        description=(
            "Hides every word (padding ids), then shrinks the hidden span from either end while hiding it still "
            "changes the prediction, to the shortest span that does; brightest there, fading over the longer "
            "spans the search passed through; flat, with the diagnostic changed = 0, when hiding every word does "
            "not change it. 2 + 2 x steps forward passes per text."
        ),
    )
)
