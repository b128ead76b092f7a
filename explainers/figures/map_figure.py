"""One map as it is presented: one input x one method, with everything needed to draw and read it.

`MapFigure` holds the method, its legend (signed, units, meaning, scale group), the colour scale and whether
the map saturates on it (`scales.is_clipped`, the one rule), the finite values' range, the caption's pieces,
and the drawn content: for images the map (overlay or heatmap, enlarged) and the map with its colour bar as PNG
bytes (`png.png_bytes`, reproducible), for text the highlighted words as HTML. `explanation_figures` builds the
figures of one input from the methods' `Explanation`s and a scale mode; the Explain page, its stored view, the
CLI, Compare's and Side by side's reports all build through it (`map_figure` for a scale chosen elsewhere), and
the dashboard's `map_card` draws any of them.

A method that declares what its values add up to (`MethodSpec.completeness`) is held to it: the caption says so
when the method's own check fails (`Caption.incomplete`, "⚠ values do not add up to f(x) − f(baseline): off by
35% ...", the total in the words the method's `Completeness.total` declares), and what the method did to keep it ("steps raised 50 → 296 to reach gap 0.8%"), so every page, the CLI's
report and the HTML report show it with the map.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from PIL import Image

from xaidash.data.formatting import seconds_text
from xaidash.data.modalities import IMAGE
from xaidash.data.registry import RegressionTarget
from xaidash.explainers.figures.html_parts import colorbar_html
from xaidash.explainers.figures.legend import LegendFacts, MapLegend, map_legend
from xaidash.explainers.figures.render import DEFAULT_UPSCALE
from xaidash.explainers.figures.scales import ScaleMode, default_cmap, finite_range, is_clipped, map_scales
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method

if TYPE_CHECKING:
    from xaidash.explainers.explanation import Explanation
    from xaidash.explainers.registry import CompletenessCheck, MethodSpec

Display = Literal["overlay", "heatmap", "tokens"]


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
    """What a map says about its method's completeness promise (its values add up to the total it declares, in
    its words: `check.total`), from the method's own check: (sentence, whether the promise fails). Nothing when
    it holds as asked; what was done when the method raised its steps to keep it; for a total less an absorbed
    share (LRP's biases), that share when it is larger than the tolerance; a warning with the gap when the
    promise does not hold."""
    if check is None:
        return "", False
    raised = f"steps raised {check.steps_asked} → {check.steps_used}" if check.raised else ""
    if check.holds:
        if check.absorbed and check.gap > check.tolerance:
            return (
                f"values differ from {check.adds_up_to} by {_percent(check.gap)} of it: what {check.absorbed} absorb",
                False,
            )
        return (f"{raised} to reach gap {_percent(check.gap)}" if raised else ""), False
    within = f"(tolerance {_percent(check.tolerance)})"
    did = f"; {raised}, the most allowed" if raised else ""
    return (
        f"values do not add up to {check.total}: off by {_percent(check.gap)} of it {within}{did}",
        True,
    )


@dataclass(frozen=True, eq=False)
class MapFigure:
    """One method's map of one input, ready to draw (see the module docstring). `values` is the attribution
    (H, W) or one score per word; `background` the input (H, W, 3) in [0, 1] an overlay is drawn on."""

    method: str
    label: str
    modality: str
    legend: MapLegend
    scale: float
    scale_mode: str
    clipped: bool
    value_range: tuple[float, float] | None
    target: int
    target_name: str
    caption: Caption
    display: str
    upscale: int = DEFAULT_UPSCALE
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
        return default_cmap(self.legend.signed)

    def colorbar_html(self, note: str | None = None, meaning: bool = True) -> str:
        """The legend under the map: ramp, end values (≥/≤ when clipped), units, this map's range, the
        caption's note (or `note`) and what the colours mean."""
        return colorbar_html(
            self.legend.signed,
            self.scale,
            self.legend.units,
            self.legend.meaning if meaning else "",
            value_range=self.value_range,
            clipped=self.clipped,
            note=self.caption.note if note is None else note,
        )

    def render(self, upscale: int | None = None) -> Image.Image | None:
        """The map drawn again at another size (the enlarged view); None where a map has no size (a word strip)."""
        return adapter_of(self.modality).redraw(
            self.values,
            signed=self.legend.signed,
            scale=self.scale,
            display=self.display,
            background=self.background,
            upscale=upscale,
        )

    def to_json(self) -> dict[str, Any]:
        """Everything but the drawn bytes and the values (those are files of a report)."""
        out: dict[str, Any] = {
            "method": self.method,
            "label": self.label,
            "modality": self.modality,
            "display": self.display,
            "legend": self.legend.to_json(),
            "colormap": self.cmap,
            "scale": self.scale,
            "scale_mode": self.scale_mode,
            "clipped": self.clipped,
            "value_range": None if self.value_range is None else list(self.value_range),
            "target": {"class": self.target, "name": self.target_name},
            "upscale": self.upscale,
            "caption": self.caption.to_json(),
        }
        return {**out, **adapter_of(self.modality).figure_json(self.values, self.words)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], values: Any | None = None, image: Any | None = None) -> MapFigure:
        """A figure read back from `to_json`. Text maps carry their scores; an image map's `values` (and the input
        `image` for an overlay) come from the report's files, and its PNGs are drawn again from them (the same
        bytes). Without values an image figure has no drawing."""
        modality = str(d["modality"])
        adapter = adapter_of(modality)
        if values is None:
            values = adapter.values_from_json(dict(d))
        vr = d.get("value_range")
        fig = cls(
            method=str(d["method"]),
            label=str(d["label"]),
            modality=modality,
            legend=MapLegend.from_json(d["legend"]),
            scale=float(d["scale"]),
            scale_mode=str(d["scale_mode"]),
            clipped=bool(d["clipped"]),
            value_range=None if vr is None else (float(vr[0]), float(vr[1])),
            target=int(d["target"]["class"]),
            target_name=str(d["target"]["name"]),
            caption=Caption.from_json(d["caption"]),
            display=str(d["display"]),
            upscale=int(d.get("upscale", DEFAULT_UPSCALE)),
            words=adapter.labels_from_json(dict(d)),
            values=np.zeros(0, np.float32) if values is None else np.asarray(values, np.float32),
            background=adapter.background_image(image),
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


def _with_drawing(fig: MapFigure) -> MapFigure:
    """`fig` with its drawn content, as its modality draws a map (see `modalities.Drawing`)."""
    drawn = adapter_of(fig.modality).draw(
        fig.values,
        signed=fig.legend.signed,
        scale=fig.scale,
        clipped=fig.clipped,
        units=fig.legend.units,
        display=fig.display,
        background=fig.background,
        labels=fig.words,
        upscale=fig.upscale,
    )
    return _replace(
        fig,
        map_png=drawn.map_png,
        figure_png=drawn.figure_png,
        tokens_html=drawn.tokens_html,
        words=drawn.labels if drawn.labels is not None else fig.words,
    )


def map_figure(
    spec: LegendFacts,
    values: Any,
    *,
    target: int,
    classes: Sequence[str],
    scale: float,
    modality: str = IMAGE.id,
    scale_mode: str = "percentile",
    image: Any | None = None,
    words: Sequence[str] | None = None,
    display: str | None = None,
    caption: Caption | None = None,
    upscale: int = DEFAULT_UPSCALE,
    legend: MapLegend | None = None,
    target_name: str | None = None,
) -> MapFigure:
    """One map of a `modality`'s input on a given colour `scale` (0 or less: an all-zero map, drawn in the centre
    colour), the one builder of every figure: a classifier's, a prompt's, a perturbation's.

    `image`: the input (C, H, W) or (H, W, C) in [0, 1], drawn under an 'overlay'; `words`: the features a map
    of named features scores (a text's words, a prompt's tokens). `display`: one of the modality's displays (its
    default when None). The legend comes from the method's spec (`legend.map_legend`) unless given (a prompt's
    maps: their unit is the token or word chosen); `target_name` names a target that is not a class (a generated
    token)."""
    adapter = adapter_of(modality)
    a = np.asarray(values, dtype=np.float32)
    if display is not None and display not in adapter.displays and len(adapter.displays) > 1:
        raise ExplainError(f"Unknown display {display!r}; choose one of {', '.join(adapter.displays)}.")
    s = float(scale) if scale > 0 and np.isfinite(scale) else 1.0
    name = target_name if target_name is not None else classes[target] if 0 <= target < len(classes) else str(target)
    fig = MapFigure(
        method=spec.id,
        label=spec.label,
        modality=modality,
        legend=legend or map_legend(spec, modality),
        scale=s,
        scale_mode=scale_mode,
        clipped=is_clipped(a, s),
        value_range=finite_range(a),
        target=int(target),
        target_name=name,
        caption=caption or Caption(name),
        display=adapter.display(display),
        upscale=upscale,
        words=None if words is None else tuple(str(w) for w in words),
        values=a,
        background=adapter.background_image(image),
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
    scale_mode: ScaleMode = "percentile",
    display: str | None = None,
    cached: Mapping[str, bool] | None = None,
    stored: bool = False,
    upscale: int = DEFAULT_UPSCALE,
    scales: Mapping[str, float] | None = None,
    notes: Mapping[str, str] | None = None,
    regression: RegressionTarget | None = None,
) -> dict[str, MapFigure]:
    """The figures of input `index` for every method's explanation (method id -> figure, in the given order).

    Colour scales come from `scales.map_scales(maps, legend groups, scale_mode)`; with 'units', maps that share
    a scale say so in their caption's note. `image` is input `index` itself (for overlays); `cached` marks the
    methods whose explanation came from a cache, `stored` the ones read from an attribution store. `scales` and
    `notes` (method -> value) replace the scale mode's choice where a caller compares maps across models.
    `regression`: the number the model predicts (the legends say its name and units)."""
    if not explanations:
        return {}
    modality = next(iter(explanations.values())).modality
    adapter = adapter_of(modality)
    specs = {m: get_method(e.method, modality) for m, e in explanations.items()}
    legends = {m: map_legend(specs[m], modality, target=regression) for m in explanations}
    shown = adapter.display(display)
    maps = {m: adapter.display_values(e, index, shown) for m, e in explanations.items()}
    groups = {m: legends[m].group for m in maps}
    own = map_scales(maps, groups, scale_mode)
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
            modality=modality,
            scale_mode=scale_mode,
            image=image,
            words=adapter.map_labels(e.tokens, index),
            display=display,
            caption=caption,
            upscale=upscale,
            legend=legends[m],
        )
    return out
