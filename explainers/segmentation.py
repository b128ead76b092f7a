"""Superpixels for LIME and KernelSHAP, and the fill that replaces a switched-off region.

scikit-image's segmenters are tuned for photos: on a 28x28 grey digit lime's default quickshift
gives one segment. Here each method's scale parameter is derived from the image size and the
wanted segment count, and a short ladder of settings is tried until the count is close to the target;
if a method still yields too few segments the image gets a regular grid instead (recorded in
`Segmentation.grid_fallback`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from xaidash.explainers.params import ExplainError, Param

METHODS = ("slic", "quickshift", "felzenszwalb")
FILLS = ("mean", "zero", "blur")
MIN_SEGMENTS = 8  # fewer superpixels than this make a LIME/KernelSHAP map nearly meaningless


@dataclass
class Segmentation:
    """masks: (N, H, W) int64 labels 0..K_i-1 per image; counts: K_i; grid_fallback: the method
    gave fewer than the minimum and a regular grid was used instead."""

    masks: np.ndarray
    counts: list[int]
    grid_fallback: list[bool]


def _channels_last(images01: np.ndarray | torch.Tensor) -> np.ndarray:
    """(N, H, W, C) float64 from numpy (N, H, W, C) / (N, H, W) or torch (N, C, H, W) / (N, H, W)."""
    if isinstance(images01, torch.Tensor):
        a = images01.detach().cpu().double().numpy()
        if a.ndim == 4:
            a = a.transpose(0, 2, 3, 1)
    else:
        a = np.asarray(images01, dtype=np.float64)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4 or a.shape[-1] not in (1, 3):
        raise ExplainError(
            f"superpixels needs images (N, H, W, C) with 1 or 3 channels (torch: (N, C, H, W)), got shape {a.shape}."
        )
    return a


def grid(h: int, w: int, n_segments: int) -> np.ndarray:
    """A regular grid of about n_segments cells, labels 0..K-1."""
    rows = int(min(h, max(1, round(math.sqrt(n_segments * h / w)))))
    cols = int(min(w, max(1, round(n_segments / rows))))
    r = np.arange(h)[:, None] * rows // h
    c = np.arange(w)[None, :] * cols // w
    return (r * cols + c).astype(np.int64)


def _relabel(labels: np.ndarray) -> np.ndarray:
    return np.unique(labels, return_inverse=True)[1].reshape(labels.shape).astype(np.int64)


def _tune(run: Callable[[float], np.ndarray], ladder: Sequence[float], target: int, floor: int) -> np.ndarray:
    """Try parameter values in order of preference; keep the first whose segment count lies in
    [0.6, 1.6] x target (and not below `floor`), else the closest one seen."""
    lo, hi = max(0.6 * target, floor), max(1.6 * target, floor)
    seen: list[tuple[int, np.ndarray]] = []
    for value in ladder:
        labels = run(value)
        k = len(np.unique(labels))
        if lo <= k <= hi:
            return labels
        seen.append((k, labels))
    return min(seen, key=lambda kl: (kl[0] < floor, abs(math.log(kl[0] / target))))[1]


def _segment_one(img: np.ndarray, method: str, n_segments: int, floor: int, seed: int) -> np.ndarray:
    from skimage.color import gray2rgb
    from skimage.segmentation import felzenszwalb, quickshift, slic

    h, w, c = img.shape
    side = math.sqrt(h * w / n_segments)  # edge of an average superpixel, in pixels
    if method == "slic":
        # compactness lives on the image's scale: [0, 1] intensities for grey, Lab (0..100) for colour.
        # Lowest first: it follows edges best; on tiny noisy images it can merge everything into a few
        # segments (connectivity enforcement), then a more compact setting is taken. sigma=0.5 tames pixel noise.
        base = 0.1 if c == 1 else 10.0
        src, axis = (img[..., 0], None) if c == 1 else (img, -1)
        return _tune(
            lambda comp: slic(
                src, n_segments=n_segments, compactness=comp, sigma=0.5, channel_axis=axis, start_label=0
            ),
            [base * f for f in (0.3, 1, 3, 10)],
            n_segments,
            floor,
        )
    if method == "quickshift":
        rgb = gray2rgb(img[..., 0]) if c == 1 else img  # quickshift works in Lab and needs 3 channels
        # Both the kernel (capped: cost grows with its square) and the link cut-off scale with the
        # superpixel edge; on large images the kernel sets the count, on tiny ones max_dist does.
        # Small (cheap, fine) settings are tried first.
        return _tune(
            lambda f: quickshift(
                rgb, kernel_size=min(6.0, max(1.0, side * f / 8)), max_dist=side * f, ratio=0.5, rng=seed
            ),
            (0.25, 0.5, 1, 2, 4),
            n_segments,
            floor,
        )
    if method == "felzenszwalb":
        min_size = max(1, int(0.25 * side * side))
        src, axis = (img[..., 0], None) if c == 1 else (img, -1)
        return _tune(
            lambda scale: felzenszwalb(src, scale=scale, sigma=0.5, min_size=min_size, channel_axis=axis),
            [1, 3, 10, 30, 100, 300, 1000],  # finest first
            n_segments,
            floor,
        )
    raise ExplainError(f"Unknown segmentation {method!r}: choose one of {', '.join(METHODS)}.")


def segment(
    images01: np.ndarray | torch.Tensor, method: str = "slic", n_segments: int = 30, seed: int = 0
) -> Segmentation:
    """Superpixels of images in [0, 1]: numpy (N, H, W, C) or (N, H, W), torch (N, C, H, W)."""
    if method not in METHODS:
        raise ExplainError(f"Unknown segmentation {method!r}: choose one of {', '.join(METHODS)}.")
    if n_segments < 2:
        raise ExplainError(f"Ask for at least 2 superpixels, got {n_segments}.")
    imgs = _channels_last(images01)
    floor = min(MIN_SEGMENTS, n_segments)
    masks, counts, fallback = [], [], []
    for img in imgs:
        labels = _relabel(_segment_one(img, method, n_segments, floor, seed))
        too_few = int(labels.max()) + 1 < floor
        if too_few:
            labels = grid(img.shape[0], img.shape[1], n_segments)
        masks.append(labels)
        counts.append(int(labels.max()) + 1)
        fallback.append(too_few)
    return Segmentation(masks=np.stack(masks), counts=counts, grid_fallback=fallback)


def superpixels(images01: np.ndarray | torch.Tensor, method: str = "slic", n_segments: int = 30) -> np.ndarray:
    """(N, H, W) int64 superpixel labels, 0..K_i-1 per image (see `segment` for the details)."""
    return segment(images01, method, n_segments).masks


def blur(images01: torch.Tensor, sigma: float | None = None) -> torch.Tensor:
    """Gaussian blur of (N, C, H, W) images; default sigma: an eighth of the shorter side."""
    from torchvision.transforms.functional import gaussian_blur

    h, w = images01.shape[-2:]
    sigma = sigma or max(0.5, min(h, w) / 8)
    k = 2 * math.ceil(2.5 * sigma) + 1
    k = max(3, min(k, 2 * ((min(h, w) - 1) // 2) + 1))  # reflect padding must stay inside the image
    return gaussian_blur(images01, kernel_size=[k, k], sigma=[sigma, sigma])


def segment_means(images01: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Each superpixel painted with its own mean colour (lime's default hide colour). masks (N, H, W)."""
    n, c, h, w = images01.shape
    masks = masks.to(images01.device).long()
    k = int(masks.max()) + 1
    flat = masks.view(n, 1, h * w).expand(n, c, h * w)
    sums = torch.zeros(n, c, k, device=images01.device, dtype=images01.dtype).scatter_add_(
        2, flat, images01.reshape(n, c, h * w)
    )
    sizes = torch.zeros(n, 1, k, device=images01.device, dtype=images01.dtype).scatter_add_(
        2, masks.view(n, 1, h * w), torch.ones(n, 1, h * w, device=images01.device, dtype=images01.dtype)
    )
    means = sums / sizes.clamp_min(1)
    return means.gather(2, flat).view(n, c, h, w)


def fill(images01: torch.Tensor, how: str, masks: torch.Tensor | None = None) -> torch.Tensor:
    """What a hidden region shows, in [0, 1] pixel space, (N, C, H, W):
    zero = black pixels; blur = a blurred copy; mean = each superpixel's mean colour when `masks`
    is given, else each image's mean colour per channel."""
    if how == "zero":
        return torch.zeros_like(images01)
    if how == "blur":
        return blur(images01)
    if how == "mean":
        if masks is not None:
            return segment_means(images01, masks)
        return images01.mean(dim=(2, 3), keepdim=True).expand_as(images01).clone()
    raise ExplainError(f"Unknown fill {how!r}: choose one of {', '.join(FILLS)}.")


def superpixel_params() -> tuple[Param, Param]:
    """The segmentation and segment-count parameters every superpixel method (LIME, KernelSHAP) takes."""
    return (
        Param("segmentation", "choice", "slic", "How the image is cut into superpixels.", choices=METHODS),
        Param(
            "segments",
            "int",
            30,
            "Target number of superpixels (the count reached is in the diagnostic segments).",
            min=2,
            max=500,
        ),
    )


def hide_param(help_suffix: str = "") -> Param:
    """What a switched-off superpixel shows."""
    return Param(
        "hide",
        "choice",
        "mean",
        f"What a switched-off superpixel shows: its own mean colour{help_suffix}, black, or a blurred copy.",
        choices=FILLS,
    )
