"""Prompt attributions as they are presented: the Generate page, `xaidash generate` and the HTML report draw them
only through this module.

- `prompt_figures(task, explanations)`: one `MapFigure` per method (explainers/figures/map_figure.py), the prompt's
  features as its words and the attributions as their scores, with the legend of the method's declared facts in
  the prompt's unit (`legend.map_legend(spec, PROMPT.id, unit)`: "Δ log-probability per token", "log-probability
  contribution per word"), colour scales per legend group (`scales.map_scales`), and a caption that names the
  explained output ("log p(' Paris')", "log p(' Paris') − log p(' London')"), the time, the model rows run and
  what the method's completeness check found.
- `matrix_spec` / `matrix_html`: the prompt x generated-token matrix (one row per generated token, its own
  log-probability's attributions) as a Vega-Lite heatmap for the page and as a coloured table with its colour bar
  for the self-contained HTML report, both on one `scales.ColourScale`.
- `prompt_report(generation, task, explanations, faithfulness)`: everything as JSON; `prompt_report_html(report)`:
  that JSON as one offline HTML page (every text from the user or the model escaped).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xaidash.data.formatting import fmt_number
from xaidash.data.modalities import PROMPT
from xaidash.explainers.figures.html_parts import esc, hex_colour, scale_html
from xaidash.explainers.figures.html_report import CSS, map_card, table_html
from xaidash.explainers.figures.jsonable import jsonable
from xaidash.explainers.figures.legend import MapLegend, map_legend
from xaidash.explainers.figures.map_figure import (
    Caption,
    MapFigure,
    completeness_sentence,
    map_figure,
    shared_scale_note,
)
from xaidash.explainers.figures.scales import ColourScale, ScaleMode, is_clipped, map_scales, robust_scale
from xaidash.explainers.language.api import PromptExplanation
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.registry import PromptMethodSpec, get_prompt_method
from xaidash.models.language.generate import Generation

REPORT_FORMAT = 1
TOP_FEATURES = 5  # the features listed beside each map, strongest first


def quoted(text: str) -> str:
    """A token as it is shown in a caption: in quotes, its spaces kept, line breaks and tabs written out."""
    return "'" + text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + "'"


def target_tokens(task: PromptQuery) -> str:
    """The explained tokens' text (the span's tokens joined)."""
    start, stop = task.span
    return "".join(task.steps[start:stop])


def target_label(task: PromptQuery) -> str:
    """The explained output: "log p(' Paris')", a span's "log p(' Paris.')" (its tokens' log-probabilities
    summed), or with a contrast "log p(' Paris') − log p(' London')"."""
    label = f"log p({quoted(target_tokens(task))})"
    if task.contrast is not None:
        label += f" − log p({quoted(task.contrast_text or '')})"
    return label


def prompt_legend(spec: PromptMethodSpec, unit: str) -> MapLegend:
    return map_legend(spec, PROMPT.id, unit)


def completeness_of(spec: PromptMethodSpec, explanation: PromptExplanation) -> tuple[str, bool]:
    """(sentence, whether the method's completeness promise fails), from its own diagnostics (one prompt)."""
    if spec.completeness is None:
        return "", False
    diagnostics = {k: [float(v)] for k, v in explanation.diagnostics.items()}
    return completeness_sentence(spec.completeness.check(diagnostics, 0, explanation.params))


def prompt_figures(
    task: PromptQuery,
    explanations: Mapping[str, PromptExplanation],
    *,
    scale_mode: ScaleMode = "percentile",
) -> dict[str, MapFigure]:
    """One figure per method (method id -> figure, in the given order): the prompt's features highlighted by their
    attributions, on a colour scale picked per `scale_mode` among maps of the same legend group."""
    if not explanations:
        return {}
    specs = {m: get_prompt_method(e.method) for m, e in explanations.items()}
    legends = {m: prompt_legend(specs[m], task.unit) for m in explanations}
    values = {m: np.asarray(e.attributions, np.float32) for m, e in explanations.items()}
    groups = {m: legends[m].group for m in values}
    scales = map_scales(values, groups, scale_mode)
    name = target_label(task)
    out: dict[str, MapFigure] = {}
    labels = {m: specs[m].label for m in values}
    for m, e in explanations.items():
        note = shared_scale_note(m, groups, labels, scale_mode)
        promise, broken = completeness_of(specs[m], e)
        caption = Caption(name, e.seconds, 1, False, False, note, promise, broken, rows=e.rows)
        out[m] = map_figure(
            specs[m],
            values[m],
            target=task.target_ids[task.span[0]],
            classes=(),
            scale=scales[m],
            modality=PROMPT.id,
            scale_mode=scale_mode,
            words=e.labels,
            caption=caption,
            legend=legends[m],
            target_name=name,
        )
    return out


def top_features(labels: Sequence[str], values: Any, k: int = TOP_FEATURES) -> list[tuple[int, str, float]]:
    """(position, label, value) of the `k` features with the largest values, largest first (non-finite skipped)."""
    v = np.asarray(values, np.float64).reshape(-1)
    order = [int(i) for i in np.argsort(-np.nan_to_num(v, nan=-np.inf), kind="stable") if np.isfinite(v[i])]
    return [(i, str(labels[i]), float(v[i])) for i in order[:k]]


# ---- the prompt x generated-token matrix ---------------------------------------------------------------------------


def step_labels(task: PromptQuery) -> list[str]:
    """The generated tokens the task reads, in order (the matrix's rows)."""
    return list(task.steps)


def matrix_scale(spec: PromptMethodSpec, per_step: Any, unit: str) -> ColourScale:
    """The matrix's colour scale: ± its 99th percentile of |value| for a signed method (0 to it otherwise), the
    ends marked when values lie beyond."""
    a = np.asarray(per_step, np.float64)
    s = robust_scale(a) or 1.0
    units = f"{prompt_legend(spec, unit).units}, each generated token's own log-probability"
    clipped = is_clipped(a, s)
    if spec.signed:
        return ColourScale(-s, s, units, signed=True, clipped=clipped)
    return ColourScale(0.0, s, units, signed=False, clipped=clipped)


def _labelled(labels: Sequence[str]) -> str:
    """A Vega expression mapping an axis position to its label (labels may repeat, so positions are the field)."""
    return f"{json.dumps([quoted(t) for t in labels])}[datum.value]"


def matrix_spec(task: PromptQuery, explanation: PromptExplanation) -> dict[str, Any] | None:
    """The prompt x generated-token matrix of one method as a Vega-Lite heatmap (None when the method made no
    per-step rows): prompt features across, generated tokens down, the value as colour on the same scale as
    `matrix_html`, exact values in the tooltip."""
    if explanation.per_step is None:
        return None
    spec = get_prompt_method(explanation.method)
    a = np.asarray(explanation.per_step, np.float64)
    scale = matrix_scale(spec, a, task.unit)
    steps = step_labels(task)[: a.shape[0]]
    rows = [
        {
            "step": s,
            "token": steps[s],
            "feature": f,
            "label": explanation.labels[f],
            "value": float(a[s, f]) if math.isfinite(a[s, f]) else None,
        }
        for s in range(a.shape[0])
        for f in range(a.shape[1])
    ]
    colour: dict[str, Any] = {
        "field": "value",
        "type": "quantitative",
        "title": scale.label,
        "scale": {"domain": [scale.low if not scale.signed else -scale.span, scale.high], "clamp": True},
    }
    if scale.signed:
        colour["scale"].update(scheme="redblue", reverse=True, domainMid=0)
    else:
        colour["scale"].update(scheme="inferno")
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": f"{spec.label}: prompt × generated tokens",
        "data": {"values": rows},
        "mark": "rect",
        "encoding": {
            "x": {
                "field": "feature",
                "type": "ordinal",
                "title": f"prompt {task.unit}s",
                "axis": {"labelExpr": _labelled(explanation.labels), "labelAngle": -60},
            },
            "y": {
                "field": "step",
                "type": "ordinal",
                "title": "generated tokens",
                "axis": {"labelExpr": _labelled(steps)},
            },
            "color": colour,
            "tooltip": [
                {"field": "token", "title": "generated"},
                {"field": "label", "title": f"prompt {task.unit}"},
                {"field": "value", "type": "quantitative", "format": ".4g"},
            ],
        },
        "config": {"view": {"step": 22}},
    }


def matrix_html(labels: Sequence[str], steps: Sequence[str], per_step: Any, scale: ColourScale) -> str:
    """The matrix as a coloured table (generated tokens down, prompt features across, values as tooltips) with the
    scale's colour bar: offline HTML for the report."""
    a = np.asarray(per_step, np.float64)
    colours = scale.colours(a)
    head = "".join(
        f'<th style="writing-mode:vertical-rl;transform:rotate(180deg);font-weight:400">{esc(quoted(t))}</th>'
        for t in labels
    )
    body = []
    for s in range(a.shape[0]):
        cells = "".join(
            f'<td title="{esc(fmt_number(a[s, f], 4))}" style="background:{hex_colour(colours[s, f])};'
            'min-width:16px;padding:0"></td>'
            for f in range(a.shape[1])
        )
        token = steps[s] if s < len(steps) else str(s)
        body.append(f"<tr><th>{esc(quoted(token))}</th>{cells}</tr>")
    return (
        '<div class="matrix"><table style="border-collapse:collapse"><tr><th>generated \\ prompt</th>'
        + head
        + "</tr>"
        + "".join(body)
        + f"</table>{scale_html(scale)}</div>"
    )


# ---- the report ----------------------------------------------------------------------------------------------------


def prompt_report(
    generation: Generation,
    task: PromptQuery,
    explanations: Mapping[str, PromptExplanation],
    faithfulness: Mapping[str, Any] | None = None,
    *,
    scale_mode: ScaleMode = "percentile",
) -> dict[str, Any]:
    """One prompt's answer and its explanations as JSON: the model, the prompt (rendered text, tokens, which are
    features), the generation (each step's probability and alternatives), the explained target, and per method its
    figure (`MapFigure.to_json`: legend, scale, caption, features and values), the run's facts, the strongest
    features and the prompt x generated-token matrix when made; `faithfulness` (method -> metrics) as given."""
    prompt = task.prompt
    figures = prompt_figures(task, explanations, scale_mode=scale_mode)
    methods: dict[str, Any] = {}
    for m, e in explanations.items():
        methods[m] = {
            **e.summary(),
            "label": figures[m].label,
            "figure": figures[m].to_json(),
            "top": [{"feature": i, "label": t, "value": v} for i, t, v in top_features(e.labels, e.attributions)],
            "per_step": None if e.per_step is None else jsonable(np.asarray(e.per_step, np.float64)),
        }
    start, stop = task.span
    return {
        "format": REPORT_FORMAT,
        "source": "xaidash generate",
        "model": task.model,
        "device": next((e.device for e in explanations.values()), None),
        "prompt": {
            "text": prompt.text,
            "rendered": prompt.rendered,
            "chat": prompt.chat,
            "notice": prompt.notice,
            "tokens": list(prompt.tokens),
            "ids": list(prompt.ids),
            "features": list(prompt.features),
        },
        "generation": generation.to_json(),
        "target": {
            "span": [start, stop],
            "text": target_tokens(task),
            "ids": list(task.target_ids[start:stop]),
            "contrast": None if task.contrast is None else {"id": task.contrast, "text": task.contrast_text},
            "label": target_label(task),
        },
        "features": {
            "unit": task.unit,
            "labels": list(task.labels),
            "positions": [list(g) for g in task.features],
            "baseline_id": task.baseline_id,
        },
        "steps": step_labels(task),
        "scale_mode": scale_mode,
        "methods": methods,
        "faithfulness": None if faithfulness is None else jsonable(faithfulness),
    }


def _steps_table(report: Mapping[str, Any]) -> str:
    start, stop = report["target"]["span"]
    rows = []
    for k, s in enumerate(report["generation"]["steps"]):
        alts = ", ".join(f"{esc(quoted(a['token']))} {a['probability']:.1%}" for a in s["alternatives"])
        mark = ' style="background:#fff8c5"' if start <= k < stop else ""
        rows.append(
            f"<tr{mark}><td>{k}</td><td><code>{esc(quoted(s['token']))}</code></td>"
            f"<td>{s['probability']:.1%}</td><td class='small'>{alts}</td></tr>"
        )
    return table_html(["step", "token", "probability", "top alternatives"], rows)


def _card(entry: Mapping[str, Any]) -> str:
    fig = MapFigure.from_json(entry["figure"])
    top = ", ".join(f"{esc(quoted(t['label']))} {fmt_number(t['value'])}" for t in entry["top"])
    return map_card(fig, esc(fig.label), extra=f'<div class="small">strongest: {top}</div>')


def _faithfulness_table(faithfulness: Any) -> str:
    """Each method's scalar metrics, and the directions and units the metric states (curves stay in report.json)."""
    if not isinstance(faithfulness, Mapping) or not faithfulness:
        return ""
    rows = {m: v for m, v in faithfulness.items() if isinstance(v, Mapping)}
    names = sorted(
        {k for v in rows.values() for k, x in v.items() if not isinstance(x, bool) and isinstance(x, (int, float))}
    )
    if not names:
        return ""
    body = (
        f"<tr><td>{esc(m)}</td>" + "".join(f"<td>{fmt_number(v.get(n))}</td>" for n in names) + "</tr>"
        for m, v in rows.items()
    )
    first = next(iter(rows.values()), {})
    said = [f"{k}: {d}" for k, d in (first.get("directions") or {}).items()]
    if first.get("units"):
        said.append(f"in {first['units']}")
    notes = f'<p class="small muted">{esc("; ".join(said))}</p>' if said else ""
    return "<h3>Faithfulness</h3>" + table_html(["method", *(esc(n) for n in names)], body) + notes


def _matrices(report: Mapping[str, Any]) -> str:
    unit = report["features"]["unit"]
    parts = []
    for m, entry in report["methods"].items():
        if entry.get("per_step") is None:
            continue
        a = np.asarray([[np.nan if x is None else x for x in row] for row in entry["per_step"]], np.float64)
        scale = matrix_scale(get_prompt_method(m), a, unit)
        parts.append(
            f"<h3>{esc(entry['label'])}</h3>" + matrix_html(entry["figure"]["words"], report["steps"], a, scale)
        )
    if not parts:
        return ""
    return "<section><h2>Prompt × generated tokens</h2>" + "".join(parts) + "</section>"


def prompt_report_html(report: Mapping[str, Any]) -> str:
    """`prompt_report`'s JSON as one self-contained page (inline CSS, no scripts or fetched files)."""
    prompt, target = report["prompt"], report["target"]
    title = f"Prompt attributions · {report['model']}"
    notice = f'<p class="muted">{esc(prompt["notice"])}</p>' if prompt.get("notice") else ""
    cards = "".join(_card(e) for e in report["methods"].values())
    answer = (
        f"<h3>Prompt</h3><blockquote>{esc(prompt['text'])}</blockquote>{notice}"
        f"<details><summary>as the model reads it ({'chat template' if prompt['chat'] else 'raw text'})</summary>"
        f"<blockquote>{esc(prompt['rendered'])}</blockquote></details>"
        f"<h3>Answer</h3><blockquote>{esc(report['generation']['text'])}</blockquote>"
        f'<p class="small muted">stopped at {esc(report["generation"]["stopped"])} · '
        f"{esc(fmt_number(report['generation']['seconds']))} s</p>" + _steps_table(report)
    )
    explained = (
        f"<section><h2>Which prompt {esc(report['features']['unit'])}s produced {esc(target['label'])}</h2>"
        f'<div class="maps">{cards}</div>{_faithfulness_table(report.get("faithfulness"))}</section>'
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header><div class="inner"><h1>{esc(title)}</h1></div></header>'
        f"<main><section>{answer}</section>{explained}{_matrices(report)}</main>"
        f'<footer class="small muted">xaidash generate report, format version {report["format"]} '
        "(the same content as report.json).</footer></body></html>\n"
    )
