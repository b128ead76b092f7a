"""One map as it is presented: one input x one method, with everything needed to draw and read it.

`MapFigure` holds the method, its legend (signed, units, meaning, scale group), the colour scale and whether
the map saturates on it (`render.is_clipped`, the one rule), the finite values' range, the caption's pieces,
and the drawn content: for images the map (overlay or heatmap, enlarged) and the map with its colour bar as PNG
bytes (`png.png_bytes`, reproducible), for text the highlighted words as HTML. `explanation_figures` builds the
figures of one input from the methods' `Explanation`s and a scale mode; the Explain page, its stored view, the
CLI, Compare's and Side by side's reports all build through it (`map_figure` for a scale chosen elsewhere), and
the dashboard's `map_card` draws any of them.

A method that declares what its values add up to (`MethodSpec.completeness`) is held to it: the caption says so
when the method's own check fails (`Caption.incomplete`, "⚠ values do not add up to f(x) − f(reference): off by
35% ..."), and what the method did to keep it ("steps raised 50 → 296 to reach gap 0.8%"), so every page, the CLI's
report and the HTML report show it with the map.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from PIL import Image

from xaidash.explainers.figures import render
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method

if TYPE_CHECKING:
    from xaidash.explainers.explanation import Explanation
    from xaidash.explainers.registry import CompletenessCheck, MethodSpec

Display = Literal["overlay", "heatmap", "tokens"]
IMAGE_DISPLAYS: tuple[str, ...] = ("overlay", "heatmap")
COLORBAR_MIN_WIDTH = 320  # px: the colour bar under a saved map is at least this wide, its text 14 px
COLORBAR_HEIGHT = 40
COLORBAR_FONT = 14


def fmt_number(v: float | int | None, digits: int = 3) -> str:
    """A value as people read it: counts (whole numbers) without decimals, others to `digits` decimals,
    very small or large ones in scientific notation, missing ones as '–' (pages, tables and the HTML report)."""
    if v is None:
        return "–"
    f = float(v)
    if not math.isfinite(f):
        return "–"
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    if f != 0 and (abs(f) < 10 ** (-digits) or abs(f) >= 1e6):
        return f"{f:.2e}"
    return f"{f:.{digits}f}"


def seconds_text(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 0.01 else "<0.01 s"


@dataclass(frozen=True)
class Caption:
    """What is said under a map: the class it explains, the method's time and over how many inputs that time
    was spent, whether it came from a cache or an attribution store, a note on its scale (e.g. which
    maps share it), and what the method's completeness check found when there is something to say
    (`completeness`: a promise that does not hold, or what the method did to keep it; `incomplete`: it does
    not hold). `rows`: the model rows the method ran, when the caller counts them (a prompt's methods)."""

    target: str
    seconds: float | None = None
    inputs: int = 1
    cached: bool = False
    stored: bool = False
    note: str = ""
    completeness: str = ""
    incomplete: bool = False
    rows: int | None = None

    def text(self) -> str:
        """'target cat · 0.12 s for 2 inputs · cached'; 'target cat · stored · 0.01 s'; with the completeness
        sentence last: 'target cat · 0.40 s · ⚠ values do not add up ...'."""
        parts = [f"target {self.target}"]
        if self.stored:
            parts.append("stored")
        if self.seconds is not None:
            parts.append(seconds_text(self.seconds) + (f" for {self.inputs} inputs" if self.inputs > 1 else ""))
        if self.rows is not None:
            parts.append(f"{self.rows:,} model row{'s' if self.rows != 1 else ''}")
        if self.cached:
            parts.append("cached")
        if self.completeness:
            parts.append(self.completeness_text())
        return " · ".join(parts)

    def completeness_text(self) -> str:
        """The completeness sentence as shown ('⚠ ' first when the promise does not hold); '' when none."""
        if not self.completeness:
            return ""
        return ("⚠ " if self.incomplete else "") + self.completeness

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "seconds": self.seconds,
            "inputs": self.inputs,
            "cached": self.cached,
            "stored": self.stored,
            "note": self.note,
            "completeness": self.completeness,
            "incomplete": self.incomplete,
        }
        if self.rows is not None:  # only where counted: the explain report's format stays as it was
            out["rows"] = self.rows
        return {**out, "text": self.text()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Caption:
        return cls(
            str(d["target"]),
            None if d.get("seconds") is None else float(d["seconds"]),
            int(d.get("inputs", 1)),
            bool(d.get("cached", False)),
            bool(d.get("stored", False)),
            str(d.get("note", "")),
            str(d.get("completeness", "")),
            bool(d.get("incomplete", False)),
            None if d.get("rows") is None else int(d["rows"]),
        )


def _percent(gap: float) -> str:
    """A relative gap as people read it: '0.8%', '35%', '>1000%'."""
    if not math.isfinite(gap) or gap > 10:
        return ">1000%"
    pct = 100 * gap
    return f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"


def completeness_sentence(check: CompletenessCheck | None) -> tuple[str, bool]:
    """What a map says about its method's completeness promise (its values add up to f(x) − f(reference)), from
    the method's own check: (sentence, whether the promise fails). Nothing when it holds as asked; what was done
    when the method raised its steps to keep it; a warning with the gap when it does not hold."""
    if check is None:
        return "", False
    raised = f"steps raised {check.steps_asked} → {check.steps_used}" if check.raised else ""
    if check.holds:
        return (f"{raised} to reach gap {_percent(check.gap)}" if raised else ""), False
    within = f"(tolerance {_percent(check.tolerance)})"
    did = f"; {raised}, the most allowed" if raised else ""
    return (
        f"values do not add up to f(x) − f(reference): off by {_percent(check.gap)} of it {within}{did}",
        True,
    )


@dataclass(frozen=True, eq=False)
class MapFigure:
    """One method's map of one input, ready to draw (see the module docstring). `values` is the attribution
    (H, W) or one score per word; `background` the input (H, W, 3) in [0, 1] an overlay is drawn on."""

    method: str
    label: str
    modality: str
    legend: render.MapLegend
    scale: float
    scale_mode: str
    clipped: bool
    value_range: tuple[float, float] | None
    target: int
    target_name: str
    caption: Caption
    display: str
    upscale: int = render.DEFAULT_UPSCALE
    map_png: bytes | None = None
    figure_png: bytes | None = None
    tokens_html: str | None = None
    words: tuple[str, ...] | None = None
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32), repr=False)
    background: np.ndarray | None = field(default=None, repr=False)

    @property
    def signed(self) -> bool:
        return self.legend.signed

    @property
    def map_width(self) -> int:
        """The drawn map's width in pixels (0 for text)."""
        return int.from_bytes(self.map_png[16:20], "big") if self.map_png else 0

    @property
    def cmap(self) -> str:
        return render.default_cmap(self.legend.signed)

    def colorbar_html(self, note: str | None = None, meaning: bool = True) -> str:
        """The legend under the map: ramp, end values (≥/≤ when clipped), units, this map's range, the
        caption's note (or `note`) and what the colours mean."""
        return render.colorbar_html(
            self.legend.signed,
            self.scale,
            self.legend.units,
            self.legend.meaning if meaning else "",
            value_range=self.value_range,
            clipped=self.clipped,
            note=self.caption.note if note is None else note,
        )

    def render(self, upscale: int | None = None) -> Image.Image | None:
        """The map drawn again at another size (the enlarged view); None for text."""
        if self.modality != "image":
            return None
        return draw_map(self.values, self.legend.signed, self.scale, self.display, self.background, upscale)

    def to_json(self) -> dict[str, Any]:
        """Everything but the drawn bytes and the values (those are files of a report)."""
        out: dict[str, Any] = {
            "method": self.method,
            "label": self.label,
            "modality": self.modality,
            "display": self.display,
            "legend": {
                "signed": self.legend.signed,
                "units": self.legend.units,
                "meaning": self.legend.meaning,
                "group": self.legend.group,
            },
            "colormap": self.cmap,
            "scale": self.scale,
            "scale_mode": self.scale_mode,
            "clipped": self.clipped,
            "value_range": None if self.value_range is None else list(self.value_range),
            "target": {"class": self.target, "name": self.target_name},
            "upscale": self.upscale,
            "caption": self.caption.to_json(),
        }
        if self.modality == "text":
            out["words"] = list(self.words or ())
            out["scores"] = [float(v) if np.isfinite(v) else None for v in np.asarray(self.values, np.float64)]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], values: Any | None = None, image: Any | None = None) -> MapFigure:
        """A figure read back from `to_json`. Text maps carry their scores; an image map's `values` (and the input
        `image` for an overlay) come from the report's files, and its PNGs are drawn again from them (the same
        bytes). Without values an image figure has no drawing."""
        lg = d["legend"]
        legend = render.MapLegend(str(lg["units"]), str(lg["group"]), bool(lg["signed"]), str(lg["meaning"]))
        modality = str(d["modality"])
        if values is None and modality == "text":
            values = [np.nan if v is None else v for v in d.get("scores", [])]
        vr = d.get("value_range")
        fig = cls(
            method=str(d["method"]),
            label=str(d["label"]),
            modality=modality,
            legend=legend,
            scale=float(d["scale"]),
            scale_mode=str(d["scale_mode"]),
            clipped=bool(d["clipped"]),
            value_range=None if vr is None else (float(vr[0]), float(vr[1])),
            target=int(d["target"]["class"]),
            target_name=str(d["target"]["name"]),
            caption=Caption.from_json(d["caption"]),
            display=str(d["display"]),
            upscale=int(d.get("upscale", render.DEFAULT_UPSCALE)),
            words=tuple(str(w) for w in d["words"]) if "words" in d else None,
            values=np.zeros(0, np.float32) if values is None else np.asarray(values, np.float32),
            background=None if image is None else render.image_hwc(image),
        )
        return fig if values is None else _with_drawing(fig)


def completeness_of(spec: MethodSpec, explanation: Explanation, index: int) -> tuple[str, bool]:
    """`completeness_sentence` of input `index` of an explanation, checked as its method's spec declares (nothing
    for a method that declares no total): what a `Caption`'s `completeness` and `incomplete` say. A caller that
    builds its own Caption for `map_figure` passes these on."""
    c = spec.completeness
    return completeness_sentence(None if c is None else c.check(explanation.diagnostics, index, explanation.params))


def _replace(fig: MapFigure, **changes: Any) -> MapFigure:
    from dataclasses import replace

    return replace(fig, **changes)


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


def _with_drawing(fig: MapFigure) -> MapFigure:
    """`fig` with its drawn content: the map and the map with its colour bar (PNG), or the highlighted words."""
    if fig.modality != "image":
        words = list(fig.words or ())
        if len(words) != fig.values.size:  # stored words that do not match: number the positions instead
            words = [str(j) for j in range(fig.values.size)]
        html = render.highlight_tokens(words, fig.values, scale=fig.scale, signed=fig.legend.signed)
        return _replace(fig, tokens_html=html, words=tuple(words))
    img = draw_map(fig.values, fig.legend.signed, fig.scale, fig.display, fig.background, fig.upscale)
    bar = render.colorbar(
        fig.legend.signed,
        fig.scale,
        width=max(img.width, COLORBAR_MIN_WIDTH),
        height=COLORBAR_HEIGHT,
        label=fig.legend.units,
        font_size=COLORBAR_FONT,
        clipped=fig.clipped,
    )
    return _replace(fig, map_png=png_bytes(img), figure_png=png_bytes(render.with_legend(img, bar)))


def map_figure(
    spec: render.LegendFacts,
    values: Any,
    *,
    target: int,
    classes: Sequence[str],
    scale: float,
    scale_mode: str = "percentile",
    image: Any | None = None,
    words: Sequence[str] | None = None,
    display: str = "overlay",
    caption: Caption | None = None,
    upscale: int = render.DEFAULT_UPSCALE,
    legend: render.MapLegend | None = None,
    target_name: str | None = None,
) -> MapFigure:
    """One map on a given colour `scale` (0 or less: an all-zero map, drawn in the centre colour).

    `image`: the input (C, H, W) or (H, W, C) in [0, 1], drawn under an 'overlay'; `words`: the words a text
    map scores. The legend comes from the method's spec (`render.map_legend`) unless given (a prompt's maps:
    their unit is the token or word chosen); `target_name` names a target that is not a class (a generated
    token)."""
    modality = "text" if words is not None else "image"
    a = np.asarray(values, dtype=np.float32)
    if modality == "image" and display not in IMAGE_DISPLAYS:
        raise ExplainError(f"Unknown display {display!r}; choose one of {', '.join(IMAGE_DISPLAYS)}.")
    s = float(scale) if scale > 0 and np.isfinite(scale) else 1.0
    name = target_name if target_name is not None else classes[target] if 0 <= target < len(classes) else str(target)
    fig = MapFigure(
        method=spec.id,
        label=spec.label,
        modality=modality,
        legend=legend or render.map_legend(spec, modality),
        scale=s,
        scale_mode=scale_mode,
        clipped=render.is_clipped(a, s),
        value_range=render.finite_range(a),
        target=int(target),
        target_name=name,
        caption=caption or Caption(name),
        display="tokens" if modality == "text" else display,
        upscale=upscale,
        words=None if words is None else tuple(str(w) for w in words),
        values=a,
        background=None if image is None or modality == "text" else render.image_hwc(image),
    )
    return _with_drawing(fig)


def shared_scale_note(method: str, groups: Mapping[str, str], labels: Mapping[str, str], scale_mode: str) -> str:
    """What a map's caption says when its colour scale is shared ('units' mode) with the other maps of its legend
    group: 'shared scale: A, B'; '' otherwise."""
    peers = [o for o in groups if groups[o] == groups[method]]
    if scale_mode != "units" or len(peers) < 2:
        return ""
    return "shared scale: " + ", ".join(labels[o] for o in peers)


def explanation_figures(
    explanations: Mapping[str, Explanation],
    index: int,
    *,
    classes: Sequence[str],
    image: Any | None = None,
    scale_mode: render.ScaleMode = "percentile",
    display: str = "overlay",
    cached: Mapping[str, bool] | None = None,
    stored: bool = False,
    upscale: int = render.DEFAULT_UPSCALE,
    scales: Mapping[str, float] | None = None,
    notes: Mapping[str, str] | None = None,
) -> dict[str, MapFigure]:
    """The figures of input `index` for every method's explanation (method id -> figure, in the given order).

    Colour scales come from `render.map_scales(maps, legend groups, scale_mode)`; with 'units', maps that share
    a scale say so in their caption's note. `image` is input `index` itself (for overlays); `cached` marks the
    methods whose explanation came from a cache, `stored` the ones read from an attribution store. `scales` and
    `notes` (method -> value) replace the scale mode's choice where a caller compares maps across models."""
    if not explanations:
        return {}
    modality = next(iter(explanations.values())).modality
    specs = {m: get_method(e.method, modality) for m, e in explanations.items()}
    legends = {m: render.map_legend(specs[m], modality) for m in explanations}
    maps = {m: e.item(index) for m, e in explanations.items()}
    groups = {m: legends[m].group for m in maps}
    own = render.map_scales(maps, groups, scale_mode)
    out: dict[str, MapFigure] = {}
    labels = {m: specs[m].label for m in maps}
    for m, e in explanations.items():
        note = "" if scales is not None else shared_scale_note(m, groups, labels, scale_mode)
        if notes is not None and m in notes:
            note = notes[m]
        target = int(e.targets[index])
        promise, broken = completeness_of(specs[m], e, index)
        caption = Caption(
            classes[target] if 0 <= target < len(classes) else str(target),
            e.seconds if e.seconds >= 0 else None,
            len(e),
            bool((cached or {}).get(m, False)),
            stored,
            note,
            promise,
            broken,
        )
        out[m] = map_figure(
            specs[m],
            maps[m],
            target=target,
            classes=classes,
            scale=scales[m] if scales is not None and m in scales else own[m],
            scale_mode=scale_mode,
            image=image,
            words=(e.tokens or [[]])[index] if modality == "text" else None,
            display=display,
            caption=caption,
            upscale=upscale,
        )
    return out
