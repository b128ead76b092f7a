"""An `ExplainReport` as one self-contained HTML page: the run(s) and settings, every input with its
predictions and out-of-distribution hint, every map with its colour bar (PNG as data: URIs, the bytes of the
report's files), and one metrics table per input with each metric's direction.

Offline by construction: inline CSS, no scripts, fonts, links to fetch or external images. Every text that
comes from a user or a file (input names, typed text, class names, run ids, parameters, errors) is
HTML-escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xaidash.data.formatting import fmt_number
from xaidash.explainers.figures.html_parts import esc
from xaidash.explainers.figures.png import data_uri
from xaidash.explainers.figures.predictions import prediction_text, truth_text, verdict_text
from xaidash.explainers.figures.report_extras import extras_html
from xaidash.explainers.figures.scales import tick_text

if TYPE_CHECKING:
    from xaidash.explainers.figures.map_figure import MapFigure

# An ExplainReport and its ScoredMap entries (explainers/figures/report.py), which imports this module for
# `to_html`: typed by name only here, so the two modules do not import each other.
ExplainReport = Any
ScoredMap = Any

ARROWS = {"higher is better": "↑", "lower is better": "↓"}
BEST = "★"

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;margin:0;
 background:#f6f7f9;font-size:14px;line-height:1.45}
header,main,footer{max-width:1480px;margin:0 auto;padding:10px 12px}
header{background:#fff;border-bottom:1px solid #d0d7de;max-width:none}
header .inner{max-width:1480px;margin:0 auto}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:18px 0 8px}h3{font-size:15px;margin:8px 0}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:10px 12px;margin:12px 0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
.muted{color:#57606a}.small{font-size:12px}
.head{display:flex;flex-wrap:wrap;gap:20px;align-items:flex-start}
.input-img{width:160px;height:auto;image-rendering:pixelated;border:1px solid #d0d7de}
blockquote{margin:0;padding:6px 12px;border-left:4px solid #d0d7de;background:#f6f8fa;max-width:640px;
 white-space:pre-wrap;word-break:break-word}
.bar{display:inline-block;height:10px;background:#4c78a8;border-radius:2px;vertical-align:middle}
.bar.true{background:#2da44e}
.ood{padding:6px 10px;border-radius:6px;background:#f6f8fa;max-width:560px}
.ood.flagged{background:#fff8c5;border:1px solid #d4a72c}
.maps{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{width:336px;border:1px solid #d0d7de;border-radius:6px;padding:6px 7px;background:#fff}
.card.text{width:460px}
.card .title{font-weight:600;margin-bottom:4px}
.card img.map{display:block;max-width:100%;height:auto;margin:0 auto;image-rendering:pixelated}
.card.error{background:#fff5f5;border-color:#f1aeb5;color:#82071e}
.legend{font-size:12px;color:#57606a;margin-top:4px}
.metrics td.best{font-weight:600}
details{margin-top:8px}
.extra{border-top:1px solid #d0d7de;margin-top:12px;padding-top:4px}
.extra.training_samples .card{width:150px}
"""


def _table(rows: list[tuple[str, str]]) -> str:
    """Two columns of already-escaped HTML."""
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def table_html(head: Sequence[str | tuple[str, str]], rows: Iterable[str], cls: str = "") -> str:
    """A table of already-escaped HTML: the header cells (a cell's HTML, or (HTML, tooltip)) and the rows, each a
    whole '<tr>...</tr>'. The one table of the explain report and the prompt report."""
    cells = "".join(f'<th title="{esc(c[1])}">{c[0]}</th>' if isinstance(c, tuple) else f"<th>{c}</th>" for c in head)
    attrs = f' class="{cls}"' if cls else ""
    return f"<table{attrs}><tr>{cells}</tr>" + "".join(rows) + "</table>"


def _run_section(report: ExplainReport) -> str:
    parts = []
    for r in report.runs:
        rows = [
            ("run", f"<code>{esc(r.id)}</code>" + (f" at epoch {esc(r.epoch)}" if r.epoch is not None else "")),
            ("model", esc(r.model)),
            ("data set", esc(r.dataset)),
            ("modality", esc(r.modality)),
            ("device", esc(r.device or "–")),
            ("classes", esc(", ".join(r.classes[:20]) + (", …" if len(r.classes) > 20 else ""))),
        ]
        if r.regression is not None:  # a number to predict: what it is and its training range, not a class list
            t = r.regression
            rows[-1] = (
                "predicts",
                esc(f"{t.name}, a number ({t.value_text(t.low)} to {t.value_text(t.high)} in training)"),
            )
        head = (
            f"<h3>Model {esc(r.key)}" + (f": {esc(r.title)}" if r.title else "") + "</h3>"
            if len(report.runs) > 1
            else ""
        )
        parts.append(head + _table(rows))
    return '<section class="run"><h2>Run</h2>' + "".join(parts) + "</section>"


def _target_text(report: ExplainReport) -> str:
    s, t = report.settings, report.run.regression
    if t is not None:
        return f"the predicted {t.name} (the model's one output, in its units)"
    return s.target_name if s.target is not None else "each input's predicted class"


def _settings_section(report: ExplainReport) -> str:
    s = report.settings
    rows = [
        ("target", esc(_target_text(report))),
        ("colour scale", esc(s.scale_text())),
        ("maps shown as", esc(s.display)),
        (
            "quality metrics",
            "yes" + (f" ({esc(s.steps)} deletion/insertion steps)" if s.steps else "") if s.metrics else "no",
        ),
        ("seed", esc(s.seed)),
    ]
    if s.background:
        rows.append(("background", esc(s.background)))
    rows += [(esc(k), esc(v)) for k, v in s.extra.items()]
    methods = (
        f"<tr><td>{esc(m.label)}</td><td><code>{esc(m.id)}</code></td>"
        f"<td><code>{esc(json.dumps(m.params, sort_keys=True, default=str)) if m.params else '–'}</code></td></tr>"
        for m in s.methods
    )
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in report.notes)
    return (
        '<section class="settings"><h2>Settings</h2>'
        + _table(rows)
        + "<h3>Methods</h3>"
        + table_html(["method", "id", "parameters"], methods)
        + notes
        + "</section>"
    )


def _predictions(report: ExplainReport, i: int) -> str:
    inp = report.inputs[i]
    out = []
    for r in report.runs:
        preds = inp.predictions.get(r.key)
        if not preds:
            continue
        top = preds[0]
        title = f"Model {esc(r.key)} predicts" if len(report.runs) > 1 else "Predicted"
        if r.regression is not None:  # a number: its value in the target's units, the error when the truth is known
            line = esc(prediction_text(top, r.regression) + verdict_text(top, inp.label, r.regression))
            out.append(f'<div class="preds"><div><b>{title}: {line}</b></div></div>')
            continue
        mark = verdict_text(top, inp.label, None)
        rows = (
            f"<tr><td>{esc(p.name)}</td><td>{p.probability or 0.0:.1%}</td><td>"
            f'<span class="bar{" true" if p.cls == inp.label else ""}" '
            f'style="width:{max(1, round(120 * (p.probability or 0.0)))}px"></span></td></tr>'
            for p in preds
        )
        out.append(
            f'<div class="preds"><div><b>{title}: {esc(top.name)}</b> ({top.probability or 0.0:.0%}){mark}</div>'
            + table_html(["class", "probability", ""], rows, "small")
            + "</div>"
        )
    return "".join(out)


def _legend_text(fig: MapFigure) -> str:
    """Under the map's PNG (which draws the ramp and end values): units, this map's range, the note, the meaning."""
    first = [f"<b>{esc(fig.legend.units)}</b>"]
    if fig.value_range is not None:
        lo, hi = fig.value_range
        first.append(f"this map: {esc(tick_text(lo))} … {esc(tick_text(hi))}")
    first.append(f"scale ±{esc(tick_text(fig.scale))}" + (" (values beyond saturate)" if fig.clipped else ""))
    lines = [" · ".join(first)]
    if fig.caption.note:
        lines.append(esc(fig.caption.note))
    lines.append(esc(fig.legend.meaning))
    return '<div class="legend">' + "<br>".join(lines) + "</div>"


def map_card(fig: MapFigure, title: str, *, alt: str = "", extra: str = "") -> str:
    """One map as a report shows it: the `title` (HTML), the map with its colour bar (an image's PNG, `alt` its
    text, with the legend's words below; or the highlighted words and their HTML colour bar), `extra` HTML, and the
    caption. The one map card of the explain report and the prompt report."""
    head = f'<div class="title">{title}</div>'
    caption = f'<div class="small muted">{esc(fig.caption.text())}</div>'
    if fig.figure_png is not None:  # an image map with its colour bar; a word strip carries its own HTML
        body = f'<img class="map" alt="{esc(alt)}" src="{data_uri(fig.figure_png)}">' + _legend_text(fig)
        return f'<figure class="card" style="margin:0">{head}{body}{extra}{caption}</figure>'
    body = (fig.tokens_html or "") + fig.colorbar_html()
    return f'<figure class="card text" style="margin:0">{head}{body}{extra}{caption}</figure>'


def _card(report: ExplainReport, e: ScoredMap) -> str:
    who = f" · model {esc(e.run)}" if len(report.runs) > 1 else ""
    title = f"{esc(e.label)}{who}"
    if e.figure is None:
        return f'<div class="card error"><div class="title">{title}</div><div>{esc(e.error or "no explanation")}</div></div>'
    alt = f"{e.label} map of {report.inputs[e.input].name} with its colour bar"
    return map_card(e.figure, title, alt=alt)


def _metrics_table(report: ExplainReport, i: int) -> str:
    from xaidash.explainers.scoring import METRICS, curves_legend

    entries = [e for e in report.for_input(i) if e.figure is not None]
    names = [k for k in METRICS if any(k in e.metrics for e in entries)]
    if not names:
        return ""
    best: dict[str, set[int]] = {}
    for k in names:
        better = METRICS[k][1]
        finite = {
            j: float(v) for j, e in enumerate(entries) if (v := e.metrics.get(k)) is not None and math.isfinite(v)
        }
        if len(finite) >= 2 and better in ARROWS:
            target = max(finite.values()) if better == "higher is better" else min(finite.values())
            hit = {j for j, v in finite.items() if v == target}
            best[k] = hit if len(hit) < len(finite) else set()
    head = [(f"{esc(METRICS[k][0])} {ARROWS.get(METRICS[k][1], '')}", METRICS[k][1]) for k in names]
    rows = []
    for j, e in enumerate(entries):
        who = f" · {esc(e.run)}" if len(report.runs) > 1 else ""
        cells = "".join(
            f'<td class="best">{fmt_number(e.metrics.get(k))} {BEST}</td>'
            if j in best.get(k, set())
            else f"<td>{fmt_number(e.metrics.get(k))}</td>"
            for k in names
        )
        rows.append(f"<tr><td>{esc(e.label)}{who}</td>{cells}</tr>")
    errors = [
        f"{esc(e.label)}: {esc(k)} not computed ({esc(msg)})" for e in entries for k, msg in e.metric_errors.items()
    ]
    directions = "; ".join(f"{esc(METRICS[k][0])}: {esc(METRICS[k][1])}" for k in names)
    return (
        "<h3>Quality metrics</h3>"
        + table_html(["method", *head], rows, "metrics")
        + f'<p class="small muted">↑ higher is better, ↓ lower is better, {BEST} best of these maps for this input. '
        + directions
        + ". "
        + (
            esc(curves_legend(report.modality, regression=report.run.regression is not None))
            if {"deletion_auc", "insertion_auc"} & set(names)
            else ""
        )
        + "</p>"
        + ("".join(f'<p class="small muted">{t}</p>' for t in errors))
    )


def _diagnostics(report: ExplainReport, i: int) -> str:
    rows = [
        f"<tr><td>{esc(e.label)}</td><td>{esc(k)}</td><td>{fmt_number(v)}</td></tr>"
        for e in report.for_input(i)
        for k, v in e.diagnostics.items()
    ]
    if not rows:
        return ""
    return "<details><summary>Diagnostics</summary>" + table_html(["method", "item", "value"], rows) + "</details>"


def _row_table(cells: Sequence[str]) -> str:
    """A table row's values (its cells 'column = value') as a two-column table."""
    rows = []
    for cell in cells:
        name, _, value = cell.partition(" = ")
        rows.append(f"<tr><td>{esc(name)}</td><td>{esc(value)}</td></tr>")
    return table_html(["column", "value"], rows, "row-values")


def _input_section(report: ExplainReport, i: int) -> str:
    inp = report.inputs[i]
    classes = report.run.classes
    truth = (
        f" · true: <b>{esc(truth_text(inp.label, classes, report.run.regression))}</b>" if inp.label is not None else ""
    )
    shown = ""
    png = inp.png()
    if png is not None:
        shown = f'<img class="input-img" alt="{esc(inp.name)}" src="{data_uri(png)}">'
    elif inp.cells:  # a row: its values as a table (its `text` is the same in one line)
        shown = _row_table(inp.cells)
    elif inp.text is not None:
        shown = f"<blockquote>{esc(inp.text)}</blockquote>"
    ood = ""
    if inp.ood is not None:
        cls = "ood flagged" if inp.ood.flagged else "ood"
        ood = f'<div class="{cls} small">{esc(inp.ood.summary())}</div>'
    cards = "".join(_card(report, e) for e in report.for_input(i))
    return (
        f'<section class="input" id="input-{i}"><h2>Input {i + 1}: {esc(inp.name)}</h2>'
        f'<div class="head">{shown}<div><div>{esc(inp.name)}{truth}</div>{_predictions(report, i)}{ood}</div></div>'
        f'<div class="maps">{cards}</div>{_metrics_table(report, i)}{_diagnostics(report, i)}'
        f"{extras_html([x for x in report.extras if x.input == i])}</section>"
    )


def report_html(report: ExplainReport, format_version: int) -> str:
    """The whole report (an `ExplainReport`) as one HTML document (UTF-8 text)."""
    run = report.run
    title = f"Explanations · {run.model} on {run.dataset} · run {run.id}"
    sub = (
        f"{esc(report.source) + ' · ' if report.source else ''}{len(report.inputs)} input(s) × "
        f"{len(report.settings.methods)} method(s)" + (f" × {len(report.runs)} models" if len(report.runs) > 1 else "")
    )
    scale = (
        "Signed maps: red/white/blue around 0; unsigned maps: dark to bright. A bar's end values read ≥/≤ when "
        "values beyond them saturate. Colour scale: " + esc(report.settings.scale_text()) + "."
    )
    body = "".join(_input_section(report, i) for i in range(len(report.inputs)))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header><div class="inner"><h1>{esc(title)}</h1><div class="muted">{sub}</div></div></header>'
        f'<main><p class="muted small">{scale}</p>{body}{_run_section(report)}{_settings_section(report)}</main>'
        f'<footer class="small muted">xaidash explain report, format version {format_version} '
        "(the same content as report.json).</footer></body></html>\n"
    )
