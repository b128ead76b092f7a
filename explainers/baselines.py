"""Reference inputs for path methods (Integrated Gradients, DeepLift).

Each baseline is built in pixel space ([0, 1], where 'black' and 'white' mean something)
and then normalised the way the model reads its inputs, so it is comparable with `ctx.x`.
"""

from __future__ import annotations

import math

import torch
import torchvision.transforms.functional as TF

from xaidash.data.transforms import denormalize, normalize
from xaidash.explainers.params import ExplainError, Param
from xaidash.models.bundle import ModelBundle

BASELINES: tuple[str, ...] = ("black", "white", "mean", "blur", "noise")

BASELINE_HELP = (
    "Reference image the attribution is measured against: black (all 0), white (all 1), "
    "mean (per-channel data set mean), blur (the input, Gaussian-blurred), noise (uniform, seeded)."
)


def baseline_param(default: str = "black") -> Param:
    """The `baseline` choice every path method declares."""
    return Param("baseline", "choice", default, BASELINE_HELP, choices=BASELINES)


def blur_sigma(height: int, width: int) -> float:
    """A blur strong enough to wipe out object detail: a tenth of the shorter side, at least 1 px."""
    return max(1.0, 0.1 * min(height, width))


def _blur(pixels: torch.Tensor) -> torch.Tensor:
    h, w = pixels.shape[-2:]
    sigma = blur_sigma(h, w)
    # 3 sigma each side, odd, and small enough for the reflect padding torchvision uses.
    k = min(2 * math.ceil(3 * sigma) + 1, 2 * (min(h, w) // 2) - 1)
    k = max(k, 1)
    return TF.gaussian_blur(pixels, kernel_size=[k, k], sigma=[sigma, sigma])


def _channel_mean(bundle: ModelBundle, like: torch.Tensor, background: torch.Tensor | None) -> torch.Tensor:
    """Per-channel mean in pixel space, (C, 1, 1): from background samples when given, else the declared mean."""
    if background is not None and len(background):
        bg = denormalize(torch.as_tensor(background).to(like.device, like.dtype), bundle.input_info)
        return bg.mean(dim=(0, 2, 3)).view(-1, 1, 1)
    mean = bundle.input_info.mean
    if not mean:
        raise ExplainError(
            f"Data set {bundle.info.name} declares no per-channel mean: pass background samples "
            "or choose another baseline (black, white, blur, noise)."
        )
    c = like.shape[1]
    values = mean if len(mean) == c else tuple(mean) * c if len(mean) == 1 else None
    if values is None:
        raise ExplainError(f"Data set mean has {len(mean)} values for {c}-channel images.")
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, 1, 1)


def make_baselines(
    kind: str,
    bundle: ModelBundle,
    x: torch.Tensor,
    background: torch.Tensor | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Baselines shaped like `x` (prepared, normalised inputs (N, C, H, W)), normalised the same way."""
    if kind not in BASELINES:
        raise ExplainError(f"Unknown baseline {kind!r}: choose one of {', '.join(BASELINES)}.")
    pixels = denormalize(x.detach(), bundle.input_info)
    if kind == "black":
        base = torch.zeros_like(pixels)
    elif kind == "white":
        base = torch.ones_like(pixels)
    elif kind == "mean":
        base = _channel_mean(bundle, pixels, background).expand_as(pixels).clone()
    elif kind == "blur":
        base = _blur(pixels).clamp(0.0, 1.0)
    else:
        # Drawn on the CPU with its own generator so the same seed gives the same noise on any device.
        gen = torch.Generator().manual_seed(int(seed))
        base = torch.rand(pixels.shape, generator=gen, dtype=torch.float32).to(pixels.device, pixels.dtype)
    return normalize(base, bundle.input_info)
