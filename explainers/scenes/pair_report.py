"""Side by side's report for two scene models: one self-contained HTML page with both models' predictions, then per
object and method model A's map beside model B's (each with its colour bar and the explained box), and each model's
metrics table. The cards, tables and page are `figures`' (the Scenes page's report), arranged in pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from xaidash.explainers.figures.html_parts import esc
from xaidash.explainers.figures.png import data_uri
from xaidash.explainers.scenes.api import DEFAULT_MIN_SCORE, SceneExplanation
from xaidash.explainers.scenes.figures import (
    REPORT_NOTE,
    boxes_png,
    card_html,
    document_html,
    metrics_table_html,
    scene_figure,
)
from xaidash.models.scenes.predictions import Detections, ScenePrediction


@dataclass
class ReportSide:
    """One model of the pair: what to call it ('Model A: fasterrcnn_small · run …') and its prediction."""

    name: str
    prediction: ScenePrediction


@dataclass
class ReportObject:
    """One object: its name and each model's maps of it (empty when that model has no target for it)."""

    name: str
    a: Sequence[SceneExplanation]
    b: Sequence[SceneExplanation]


def _shown(prediction: ScenePrediction) -> ScenePrediction:
    return prediction.above(DEFAULT_MIN_SCORE) if isinstance(prediction, Detections) else prediction


def _pair_cards(image: Any, obj: ReportObject, sides: tuple[ReportSide, ReportSide], classes: tuple[str, ...]) -> str:
    """Per method (in the order model A's maps came, then any only B has), A's card and B's card."""
    by_side = [{e.method: e for e in obj.a}, {e.method: e for e in obj.b}]
    methods = list(dict.fromkeys([e.method for e in obj.a] + [e.method for e in obj.b]))
    rows = []
    for method in methods:
        cards = []
        for side, found in zip(sides, by_side, strict=True):
            who = side.name.split(":")[0]
            e = found.get(method)
            if e is None:
                cards.append(f'<div class="card error"><div class="title">{esc(who)}</div>no box of this object</div>')
                continue
            boxes = _shown(side.prediction)
            fig = scene_figure(image, e, boxes if isinstance(boxes, Detections) else None, classes)
            cards.append(card_html(replace(fig, label=f"{who} · {fig.label}")))
        rows.append(f'<div class="maps">{"".join(cards)}</div>')
    return "".join(rows)


def scene_pair_report_html(
    image: Any,
    sides: tuple[ReportSide, ReportSide],
    objects: Sequence[ReportObject],
    classes: tuple[str, ...],
    *,
    title: str = "Two scene models side by side",
    subtitle: str = "",
) -> str:
    """The page: both predictions, then per object the pairs of maps and each model's metrics table (every text
    escaped, PNGs inline, no scripts)."""
    pictures = "".join(
        f'<figure class="card" style="margin:0"><div class="title">{esc(side.name)}</div>'
        f'<img class="input-img" style="width:288px" alt="{esc(side.name)} predictions" '
        f'src="{data_uri(boxes_png(image, _shown(side.prediction), classes))}"></figure>'
        for side in sides
    )
    sections = [f'<section><h2>Predictions</h2><div class="maps">{pictures}</div></section>']
    for obj in objects:
        tables = "".join(
            f"<h3>{esc(side.name.split(':')[0])}</h3>{metrics_table_html(items)}"
            for side, items in zip(sides, (obj.a, obj.b), strict=True)
            if items
        )
        sections.append(f"<section><h2>{esc(obj.name)}</h2>{_pair_cards(image, obj, sides, classes)}{tables}</section>")
    return document_html(title, subtitle, REPORT_NOTE, sections)
