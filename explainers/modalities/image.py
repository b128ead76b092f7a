"""Images, explained: files read through `image_files`, maps at the input's resolution (coarse maps upsampled,
channels summed), drawn as an overlay on a grey copy of the input or as a heatmap, with the colour bar below."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.modalities import IMAGE, ImageModality
from xaidash.data.registry import ImageSplit, load_split
from xaidash.explainers.figures import render
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.inspection.attention import LEADING, TokenLayout, query_row
from xaidash.explainers.map_arrays import grid_magnitudes, image_batch, image_maps, map_ssim
from xaidash.explainers.modalities.base import ADAPTERS, Drawing, ExplainingModality, Maps, extend
from xaidash.explainers.modalities.image_files import load_image_and_note
from xaidash.explainers.perturbation_curves import CurveResult, Mode, perturbation_curve
from xaidash.explainers.registry import MethodOutput
from xaidash.models.bundle import ModelBundle

COLORBAR_MIN_WIDTH = 320  # px: the colour bar under a saved map is at least this wide, its text 14 px
COLORBAR_HEIGHT = 40
COLORBAR_FONT = 14


@dataclass(frozen=True)
class ImageAdapter(ExplainingModality, ImageModality):
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        x, note = load_image_and_note(spec, bundle.info, fit)
        return x, f"file {note}"

    def sample_problem(self, raw: Any, bundle: ModelBundle, name: str) -> str | None:
        shape, wanted = tuple(raw.shape), tuple(bundle.info.input_shape)
        return None if shape == wanted else f"{name} has shape {shape}, not the model's {wanted}."

    def checked(self, bundle: ModelBundle, inputs: Any) -> torch.Tensor:
        images = self.as_batch(inputs)
        if images.dim() != 4 or tuple(images.shape[1:]) != tuple(bundle.info.input_shape):
            raise ExplainError(
                f"Images must have shape {tuple(bundle.info.input_shape)} for this model, got {tuple(images.shape)}; "
                "convert them with xaidash.explainers.modalities.image_files.load_image first."
            )
        return images

    def background(self, bundle: ModelBundle, n: int, seed: int) -> torch.Tensor | None:
        if n <= 0 or not bundle.has_dataset:
            return None
        try:
            split = load_split(bundle.info.name, "train")
        except DatasetError:
            return None
        if not isinstance(split, ImageSplit):
            return None
        pick = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))[:n].tolist()
        return bundle.prepare(split.batch(pick))

    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """(N, C, H, W) -> channel sum (the channels kept); (N, h, w) coarse maps -> bilinear upsampling."""
        hw = (int(bundle.info.input_shape[1]), int(bundle.info.input_shape[2]))
        attr = torch.as_tensor(out.attributions).detach().float()
        channels = None
        if attr.dim() == 4 and attr.shape[1] == 1 and attr.shape[-2:] != hw:
            attr = attr[:, 0]
        if attr.dim() == 4:
            channels = attr.cpu().numpy()
            attr = attr.sum(1)
        if attr.shape[-2:] != hw:
            attr = F.interpolate(attr.unsqueeze(1), size=hw, mode="bilinear", align_corners=False)[:, 0]
        return Maps(attr.cpu().numpy().astype(np.float32), None, channels)

    def attention_map(self, bundle: ModelBundle, raw: Any, x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
        """(N, T, T) -> (N, gh, gw): the class token's row over the patches (the mean row without a class token)."""
        gh, gw, lead = patch_grid(bundle, matrix.shape[-1])
        row = query_row(matrix, "first")[:, lead:] if lead else query_row(matrix, "mean")
        return row.reshape(len(row), gh, gw)

    def token_layout(self, bundle: ModelBundle, raw: Any, tokens: int) -> TokenLayout:
        grid = getattr(bundle.model, "grid", None)
        if grid is None:
            raise ExplainError(f"{bundle.spec.name} does not say how its tokens lie on the image (no `grid`).")
        gh, gw = int(grid[0]), int(grid[1])
        lead = tokens - gh * gw  # leading tokens: a class token, DeiT's distillation token, register tokens
        if not 0 <= lead <= len(LEADING):
            raise ExplainError(f"{tokens} attention tokens do not fit a {gh}x{gw} patch grid.")
        patches = [f"patch ({r},{c})" for r in range(gh) for c in range(gw)]
        return TokenLayout(list(LEADING[:lead]) + patches, (gh, gw), 0 if lead else None)

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        return np.asarray(maps, dtype=np.float32)[None], None

    def background_image(self, image: Any) -> np.ndarray | None:
        return None if image is None else render.image_hwc(image)

    def draw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        clipped: bool,
        units: str,
        display: str,
        background: np.ndarray | None,
        labels: Sequence[str] | None,
        upscale: int,
    ) -> Drawing:
        img = draw_map(values, signed, scale, display, background, upscale)
        bar = render.colorbar(
            signed,
            scale,
            width=max(img.width, COLORBAR_MIN_WIDTH),
            height=COLORBAR_HEIGHT,
            label=units,
            font_size=COLORBAR_FONT,
            clipped=clipped,
        )
        return Drawing(map_png=png_bytes(img), figure_png=png_bytes(render.with_legend(img, bar)))

    def redraw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        display: str,
        background: np.ndarray | None,
        upscale: int | None,
    ) -> Image.Image | None:
        return draw_map(values, signed, scale, display, background, upscale)

    # ---- metrics -----------------------------------------------------------------------------------------------
    def metric_inputs(self, bundle: ModelBundle, inputs: Any) -> torch.Tensor:
        """Images (N, C, H, W) in [0, 1] as float32 on the model's device, shape-checked."""
        return image_batch(bundle, inputs)

    def metric_maps(self, attributions: Any) -> list[np.ndarray]:
        """One (H, W) map per image (per-channel maps summed)."""
        return list(image_maps(attributions))

    def magnitudes(self, attributions: Any, device: torch.device | None) -> list[torch.Tensor]:
        """|map| of every image as one (N, H*W) tensor on `device`."""
        return grid_magnitudes(attributions, device)

    def map_similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """SSIM of |a| and |b|, each scaled by its max; NaN for a map smaller than SSIM's 7x7 window."""
        value = map_ssim(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        return float("nan") if value is None else value

    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """Pixels moved from the image to a black substrate (deletion) or from a blurred copy into it (insertion)."""
        return perturbation_curve(bundle, raw, attributions, mode=mode, steps=steps, batch_size=batch_size)


def patch_grid(bundle: ModelBundle, tokens: int) -> tuple[int, int, int]:
    """(rows, cols, leading tokens) of the patch grid behind `tokens` attention positions: the patches come last,
    after a class token (and DeiT's distillation token, or register tokens) when the model has them."""
    grid = getattr(bundle.model, "grid", None)
    if grid is not None:
        gh, gw = int(grid[0]), int(grid[1])
        if 0 <= tokens - gh * gw <= len(LEADING):
            return gh, gw, tokens - gh * gw
    for lead in (1, 0):
        side = math.isqrt(max(tokens - lead, 0))
        if side > 0 and side * side == tokens - lead:
            return side, side, lead
    raise ExplainError(f"Cannot lay {tokens} attention tokens out on a patch grid (the model declares no `grid`).")


def draw_map(
    values: np.ndarray,
    signed: bool,
    scale: float,
    display: str,
    background: np.ndarray | None,
    upscale: int | None = render.DEFAULT_UPSCALE,
) -> Image.Image:
    """An image map as shown: over a grey copy of the input ('overlay', opacity growing with |value|) or alone."""
    if display == "overlay" and background is not None:
        return render.overlay(
            render.greyscale(background),
            values,
            signed=signed,
            scale=scale,
            alpha=render.OVERLAY_ALPHA,
            upscale=upscale,
        )
    return render.heatmap(values, signed=signed, scale=scale, upscale=upscale)


IMAGE_ADAPTER = ADAPTERS.register(
    extend(
        IMAGE,
        ImageAdapter,
        displays=("overlay", "heatmap"),
        metrics=(
            "deletion_auc",
            "insertion_auc",
            "road_morf",
            "road_lerf",
            "pointing_game",
            "energy_in_mask",
            "completeness_gap",
            "sparseness",
            "complexity",
            "infidelity",
            "max_sensitivity",
            "local_lipschitz",
            "random_logit",
            "seconds",
        ),
        region="region",
        gradient_unit="pixel",
        attackable=True,
    )
)
