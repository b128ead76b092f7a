"""The colour-scale policy: which value gets the strongest colour, and which colour a value gets.

Colour conventions:
- signed maps use a diverging map centred at 0 ('RdBu_r': red positive, blue negative, white 0);
- unsigned maps use a sequential map ('inferno') of the magnitude, never the diverging one;
- a scale fixes the value that gets the strongest colour, so several maps (e.g. one per method) can share one
  colour scale; by default each map uses its own max |value|.

Honest scales: `map_scales` picks one colour scale per map: each map's own high percentile, its own maximum, or one
scale shared only by maps in the same units (`legend.map_legend`'s group); `is_clipped` is the one rule that says
whether a map saturates on its scale. A `ColourScale` says what the colours of one drawn map mean; the drawing
(explainers/figures/render.py) and the HTML (explainers/figures/html_parts.py) colour values through it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import matplotlib
import numpy as np

from xaidash.explainers.params import ExplainError

SIGNED_CMAP = "RdBu_r"
UNSIGNED_CMAP = "inferno"
CLIP_PERCENTILE = 99.0  # 'percentile' scales saturate at this percentile of |value|
# How map_scales picks each map's colour scale.
ScaleMode = Literal["percentile", "max", "units"]
SCALE_MODES: dict[str, str] = {
    "percentile": f"each map on its own scale, saturating at its {CLIP_PERCENTILE:g}th percentile of |value|",
    "max": "each map on its own scale, saturating at its largest |value|",
    "units": "one scale shared by the maps of an input that are in the same units (else their own, as 'percentile')",
}


def as_array(a: Any) -> np.ndarray:
    """A map as NumPy (a torch tensor is detached and moved to the CPU)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def default_cmap(signed: bool) -> str:
    return SIGNED_CMAP if signed else UNSIGNED_CMAP


def tick_text(v: float) -> str:
    """A colour bar's end value as written under it: three significant digits, a true minus sign."""
    return "0" if v == 0 else f"{v:.3g}".replace("-", "−")


def shared_scale(maps: Iterable[Any]) -> float:
    """The largest |value| over several maps: pass it as `scale` to draw them on one colour scale."""
    values = [float(np.nanmax(np.abs(as_array(m)))) for m in maps if as_array(m).size]
    return max(values, default=0.0)


def robust_scale(values: Any, percentile: float = CLIP_PERCENTILE) -> float:
    """The `percentile`-th percentile of a map's finite |values| (its max when that percentile is 0,
    e.g. a sparse map; 0 for an all-zero map): a scale a few extreme pixels cannot wash out."""
    v = np.abs(as_array(values).astype(np.float64))
    v = v[np.isfinite(v)]
    if not v.size:
        return 0.0
    p = float(np.percentile(v, percentile, method="higher"))  # a value of the map, never interpolated toward 0
    return p if p > 0 else float(v.max())


def is_clipped(values: Any, scale: float) -> bool:
    """Whether a map drawn on colour `scale` saturates: some finite |value| lies beyond it (its colour bar's
    end values then read '≥ s' and '≤ −s'). NaN and inf are ignored; a scale of 0 or less (an all-zero map,
    drawn in the centre colour) never clips. The one rule every page, the CLI and the reports use."""
    if not (scale > 0 and math.isfinite(scale)):
        return False
    v = np.abs(as_array(values).astype(np.float64))
    v = v[np.isfinite(v)]
    return bool(v.size and v.max() > scale)


def finite_range(values: Any) -> tuple[float, float] | None:
    """(min, max) of a map's finite values; None when it has none."""
    v = as_array(values).astype(np.float64)
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else None


def map_scales(
    maps: Mapping[str, Any], groups: Mapping[str, str] | None = None, mode: ScaleMode = "percentile"
) -> dict[str, float]:
    """One colour scale per map (name -> scale, 1.0 for an all-zero map).

    percentile: each map's own `robust_scale`; max: each map's own largest |value|; units: maps whose
    `groups` entry is equal share the largest of their `robust_scale`s, a map in a group of its own
    keeps its own (so occlusion's logits never wash out IG's per-pixel values)."""
    if mode not in SCALE_MODES:
        raise ExplainError(f"Unknown scale mode {mode!r}; choose one of {', '.join(SCALE_MODES)}.")
    if mode == "max":
        own = {k: float(np.nanmax(np.abs(as_array(v)))) if as_array(v).size else 0.0 for k, v in maps.items()}
    else:
        own = {k: robust_scale(v) for k, v in maps.items()}
    if mode == "units":
        groups = groups or {}
        by_group: dict[str, float] = {}
        for k, s in own.items():
            g = groups.get(k, f"own|{k}")
            by_group[g] = max(by_group.get(g, 0.0), s)
        own = {k: by_group[groups.get(k, f"own|{k}")] for k in own}
    return {k: (s if s > 0 and math.isfinite(s) else 1.0) for k, s in own.items()}


def _resolve_scale(values: np.ndarray, scale: float | None) -> float:
    if scale is None:
        finite = np.abs(values[np.isfinite(values)])
        scale = float(finite.max()) if finite.size else 0.0
    if scale < 0 or not math.isfinite(scale):
        raise ExplainError(f"Colour scale must be a finite value >= 0, got {scale}.")
    return scale if scale > 0 else 1.0  # an all-zero map stays at the centre colour


def normalize_values(values: Any, signed: bool = True, scale: float | None = None) -> np.ndarray:
    """Values mapped to [0, 1] colour-map positions: signed -> 0.5 + v / (2 scale), unsigned -> |v| / scale."""
    v = np.nan_to_num(as_array(values).astype(np.float64), nan=0.0)
    s = _resolve_scale(v, scale)
    pos = 0.5 + 0.5 * v / s if signed else np.abs(v) / s
    return np.clip(pos, 0.0, 1.0)


def colorize(values: Any, signed: bool = True, scale: float | None = None, cmap: str | None = None) -> np.ndarray:
    """RGB floats in [0, 1], shape values.shape + (3,)."""
    try:
        colormap = matplotlib.colormaps[cmap or default_cmap(signed)]
    except KeyError:
        raise ExplainError(
            f"Unknown colour map {cmap!r}; try {SIGNED_CMAP}, bwr, {UNSIGNED_CMAP} or viridis."
        ) from None
    return colormap(normalize_values(values, signed, scale))[..., :3]


@dataclass(frozen=True)
class ColourScale:
    """What the colours of one drawn map mean: values from `low` to `high` along colour map `cmap`.

    signed: a diverging map centred at 0, from −s to +s (`low` is then −`high`); otherwise `low` gets the
    darkest colour and `high` the brightest (e.g. attention stretched from the map's own minimum). `label`
    says what the values are (written under the bar); `clipped`: values beyond the ends get the end colours
    (the ends then read '≥'/'≤')."""

    low: float
    high: float
    label: str
    signed: bool = False
    cmap: str | None = None
    clipped: bool = False

    @classmethod
    def of(
        cls, values: Any, label: str, *, signed: bool = False, cmap: str | None = None, stretch: bool = False
    ) -> ColourScale:
        """The scale that spans a map's finite values: ±max |value| (signed), 0 to its max, or (stretch) its
        own minimum to its maximum."""
        rng = finite_range(values) or (0.0, 0.0)
        if signed:
            top = max(abs(rng[0]), abs(rng[1]))
            return cls(-top, top, label, True, cmap)
        return cls(rng[0] if stretch else min(0.0, rng[0]), rng[1], label, False, cmap)

    @property
    def span(self) -> float:
        """The value range the colours cover (1 when it is empty: such a map gets one colour)."""
        width = (max(abs(self.low), abs(self.high)) if self.signed else self.high - self.low) or 0.0
        return width if width > 0 and math.isfinite(width) else 1.0

    def positions(self, values: Any) -> np.ndarray:
        """Colour-map positions in [0, 1] of `values` on this scale (NaN -> the low end, or 0 when signed)."""
        v = np.nan_to_num(as_array(values).astype(np.float64), nan=0.0 if self.signed else self.low)
        pos = 0.5 + 0.5 * v / self.span if self.signed else (v - self.low) / self.span
        return np.clip(pos, 0.0, 1.0)

    def colours(self, values: Any) -> np.ndarray:
        """RGB floats in [0, 1], shape values.shape + (3,)."""
        try:
            colormap = matplotlib.colormaps[self.cmap or default_cmap(self.signed)]
        except KeyError:
            raise ExplainError(
                f"Unknown colour map {self.cmap!r}; try {SIGNED_CMAP}, {UNSIGNED_CMAP} or viridis."
            ) from None
        return colormap(self.positions(values))[..., :3]

    def ticks(self) -> list[tuple[float, str]]:
        """(position in [0, 1], text) of the bar's end values and, for signed scales, 0."""
        hi = tick_text(self.span if self.signed else self.high)
        lo = tick_text(-self.span if self.signed else self.low)
        if self.clipped:
            hi, lo = "≥ " + hi, ("≤ " + lo) if self.signed else lo
        return [(0.0, lo), (0.5, "0"), (1.0, hi)] if self.signed else [(0.0, lo), (1.0, hi)]
