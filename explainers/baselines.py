"""Reference inputs for path methods (Integrated Gradients, DeepLift) and text's padding references.

Each image baseline is built in pixel space ([0, 1], where 'black' and 'white' mean something)
and then normalised the way the model reads its inputs, so it is comparable with `ctx.x`.
SHAP's gradient and deep explainers compare against a background set (`shap_background`).
A text's reference replaces its word pieces with padding (special tokens kept): as ids (KernelSHAP's
absent words) or, with the input's ids kept, as embeddings (the start of text IG's path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torchvision.transforms.functional as TF

from xaidash.data.transforms import denormalize, normalize
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.segmentation import blur
from xaidash.models.bundle import ModelBundle

BASELINES: tuple[str, ...] = ("black", "white", "mean", "blur", "noise")

BASELINE_HELP = (
    "Reference image the attribution is measured against: black (all 0), white (all 1), "
    "mean (per-channel data set mean), blur (the input, Gaussian-blurred), noise (uniform, one image per seed)."
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
        # One noise image from the seed alone, for every input: an input's baseline does not depend on
        # the other inputs of the call. Drawn on the CPU so the same seed gives the same noise on any device.
        gen = torch.Generator().manual_seed(int(seed))
        image = torch.rand(pixels.shape[1:], generator=gen, dtype=torch.float32).to(pixels.device, pixels.dtype)
        base = image.expand_as(pixels).clone()
    return normalize(base, bundle.input_info)


def padding_ids(bundle: ModelBundle, texts: Sequence[str], ids: torch.Tensor) -> torch.Tensor:
    """`ids` (N, L), the encoded `texts`, with every word piece replaced by the padding id; special
    tokens ([CLS], [SEP]) and padding kept."""
    base = torch.full_like(ids, bundle.tokenizer.pad_id)
    for i, text in enumerate(texts):
        for pos, word in enumerate(bundle.tokenizer.word_ids(text)[: ids.shape[1]]):
            if word is None:
                base[i, pos] = ids[i, pos]
    return base


@torch.no_grad()
def logits_with_embeddings_of(
    bundle: ModelBundle, ids: torch.Tensor, other_ids: torch.Tensor, batch_size: int = 256
) -> torch.Tensor:
    """Logits (N, classes) of the model on `ids` with its token embedding's output replaced by the
    embedding of `other_ids`, `batch_size` rows per pass: the ids (and so the model's padding mask)
    stay those of the input."""
    if not bundle.spec.embedding:
        raise ExplainError(f"{bundle.spec.name} declares no token embedding layer.")
    layer = bundle.layer(bundle.spec.embedding)
    step = max(1, int(batch_size))
    out = []
    for start in range(0, len(ids), step):
        replacement = layer(other_ids[start : start + step])
        handle = layer.register_forward_hook(lambda module, inputs, output, r=replacement: r)
        try:
            out.append(bundle.model(ids[start : start + step]).float())
        finally:
            handle.remove()
    return torch.cat(out)


def shap_background(
    bundle: ModelBundle, background: torch.Tensor | None, size: int, seed: int = 0
) -> torch.Tensor | None:
    """At most `size` of the prepared background samples given (a seeded pick), on the device; None when none are."""
    if background is None:
        return None
    bg = torch.as_tensor(background, dtype=torch.float32).to(bundle.device)
    shape = tuple(bundle.info.input_shape)
    if bg.dim() != 4 or tuple(bg.shape[1:]) != shape:
        raise ExplainError(
            f"Background samples must have shape (N, {', '.join(map(str, shape))}), got {tuple(bg.shape)}."
        )
    if len(bg) == 0:
        raise ExplainError("The background set is empty: pass some prepared training images.")
    if len(bg) > size:
        pick = torch.randperm(len(bg), generator=torch.Generator().manual_seed(int(seed)))[:size]
        bg = bg[pick.to(bg.device)]
    return bg


def stand_in_background(bundle: ModelBundle, image01: torch.Tensor) -> torch.Tensor:
    """The background one image (1, C, H, W) in [0, 1] is compared against when no training images can be
    loaded: its blurred copy and a black image, prepared. Each input's own, so no input's depends on another."""
    return bundle.prepare(torch.cat([blur(image01), torch.zeros_like(image01)]))
