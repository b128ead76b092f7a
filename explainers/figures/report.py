"""One explain session as one report: the run(s), the settings, the inputs with their predictions and
out-of-distribution hint, and every (input, method) map as a `MapFigure` with its metrics and errors.

`build_report` assembles it from the methods' results (the Explain page, `xaidash explain`, Compare and Side by
side all call it); `ExplainReport.to_dict()` is the one report format (docs/report-format.md, `format_version`),
each part writing its own JSON. `files()` names the report's files (report.json, the inputs, one PNG per map with
its colour bar, the raw attributions); the writers (explainers/figures/report_files.py) turn them into the same
bytes in a folder (`write_dir`) and a zip (`to_zip`), and explainers/figures/html_report.py into one page
(`to_html`).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.figures import report_files
from xaidash.explainers.figures.html_report import report_html
from xaidash.explainers.figures.jsonable import jsonable
from xaidash.explainers.figures.map_figure import MapFigure, explanation_figures
from xaidash.explainers.figures.predictions import (
    TOP_K,
    target_from_json,
    target_json,
    top_predictions,
)
from xaidash.explainers.figures.render import DEFAULT_UPSCALE
from xaidash.explainers.figures.report_extras import ReportExtra
from xaidash.explainers.figures.report_files import REPORT_JSON
from xaidash.explainers.figures.report_input import ReportInput
from xaidash.explainers.figures.scales import SCALE_MODES
from xaidash.explainers.inspection.ood import OODScore
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.scoring import METRICS, metric_meaning
from xaidash.explainers.session import MethodResult

if TYPE_CHECKING:
    from xaidash.models.bundle import ModelBundle

FORMAT_VERSION = 1
KIND = "xaidash.explain_report"


# ---- the parts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunInfo:
    """The run a report's maps come from. `key` names it inside the report ('A'; 'A' and 'B' side by side);
    `epoch` is set for a run's weights after one epoch; `title` is how the page named it; `regression` the number
    its model predicts (None: a classifier)."""

    id: str
    model: str
    dataset: str
    modality: str
    classes: tuple[str, ...]
    device: str = ""
    key: str = "A"
    epoch: int | None = None
    title: str = ""
    regression: RegressionTarget | None = None

    @classmethod
    def of(cls, bundle: ModelBundle, run_id: str, key: str = "A", epoch: int | None = None, title: str = "") -> RunInfo:
        return cls(
            run_id,
            bundle.spec.name,
            bundle.info.name,
            bundle.modality,
            tuple(bundle.info.classes),
            str(bundle.device),
            key,
            epoch,
            title,
            bundle.regression,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "id": self.id,
            "model": self.model,
            "dataset": self.dataset,
            "modality": self.modality,
            "device": self.device,
            "epoch": self.epoch,
            "title": self.title,
            "classes": list(self.classes),
            **({"regression": target_json(self.regression)} if self.regression is not None else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunInfo:
        return cls(
            str(d["id"]),
            str(d["model"]),
            str(d["dataset"]),
            str(d["modality"]),
            tuple(str(c) for c in d["classes"]),
            str(d.get("device", "")),
            str(d.get("key", "A")),
            None if d.get("epoch") is None else int(d["epoch"]),
            str(d.get("title", "")),
            target_from_json(d.get("regression")),
        )


@dataclass(frozen=True)
class MethodSetting:
    id: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "params": jsonable(self.params)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MethodSetting:
        return cls(str(d["id"]), str(d["label"]), dict(d.get("params") or {}))


@dataclass
class ReportSettings:
    """How the session was run: the methods with their (resolved) parameters, the target (None: each input's
    predicted class), the colour scale mode and display, whether metrics were computed (with how many curve
    steps), the seed, the background note, and any page-specific settings (`extra`, name -> text)."""

    methods: list[MethodSetting]
    target: int | None = None
    target_name: str = "predicted class"
    scale_mode: str = "percentile"
    display: str = "overlay"
    metrics: bool = False
    steps: int | None = None
    seed: int = 0
    background: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def scale_text(self) -> str:
        return SCALE_MODES.get(self.scale_mode, self.scale_mode)

    def to_json(self) -> dict[str, Any]:
        return {
            "methods": [m.to_json() for m in self.methods],
            "target": None if self.target is None else {"class": self.target, "name": self.target_name},
            "scale_mode": self.scale_mode,
            "scale_mode_text": self.scale_text(),
            "display": self.display,
            "metrics": self.metrics,
            "steps": self.steps,
            "seed": self.seed,
            "background": self.background,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ReportSettings:
        t = d.get("target")
        return cls(
            [MethodSetting.from_json(m) for m in d["methods"]],
            None if t is None else int(t["class"]),
            "predicted class" if t is None else str(t["name"]),
            str(d.get("scale_mode", "percentile")),
            str(d.get("display", "overlay")),
            bool(d.get("metrics", False)),
            None if d.get("steps") is None else int(d["steps"]),
            int(d.get("seed", 0)),
            d.get("background"),
            {str(k): str(v) for k, v in (d.get("extra") or {}).items()},
        )


@dataclass
class ScoredMap:
    """One (input, method, run): the figure, the method's parameters and timings, the input's diagnostics and
    metrics (None where undefined), the metrics that failed, or the error that stopped the method."""

    input: int
    method: str
    label: str
    run: str = "A"
    figure: MapFigure | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    wall_seconds: float | None = None
    device: str | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    metric_errors: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    def to_json(self, map_file: str | None, attribution_file: str | None) -> dict[str, Any]:
        """The entry as the report lists it, with the names of its map's files among the report's files."""
        return {
            "input": self.input,
            "run": self.run,
            "method": self.method,
            "label": self.label,
            "params": self.params,
            "seconds": self.seconds,
            "wall_seconds": self.wall_seconds,
            "device": self.device,
            "diagnostics": self.diagnostics,
            "metrics": self.metrics,
            "metric_errors": self.metric_errors,
            "error": self.error,
            "figure": None if self.figure is None else self.figure.to_json(),
            "files": {"map": map_file, "attribution": attribution_file},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], figure: MapFigure | None) -> ScoredMap:
        """An entry read back from `to_json`, with its figure (read back by the report, which has the files)."""
        return cls(
            int(d["input"]),
            str(d["method"]),
            str(d.get("label", d["method"])),
            str(d.get("run", "A")),
            figure,
            dict(d.get("params") or {}),
            d.get("seconds"),
            d.get("wall_seconds"),
            d.get("device"),
            dict(d.get("diagnostics") or {}),
            dict(d.get("metrics") or {}),
            dict(d.get("metric_errors") or {}),
            d.get("error"),
        )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "_"


# ---- the report ---------------------------------------------------------------------------------------------


@dataclass
class ExplainReport:
    """A whole session (see the module docstring); `explanations` in input order, then method, then run."""

    runs: list[RunInfo]
    settings: ReportSettings
    inputs: list[ReportInput]
    explanations: list[ScoredMap]
    notes: list[str] = field(default_factory=list)
    source: str = ""
    extras: list[ReportExtra] = field(default_factory=list)  # attacks, counterfactuals, training samples computed

    @property
    def run(self) -> RunInfo:
        return self.runs[0]

    @property
    def modality(self) -> str:
        return self.runs[0].modality

    def run_of(self, key: str) -> RunInfo:
        return next(r for r in self.runs if r.key == key)

    def for_input(self, i: int) -> list[ScoredMap]:
        return [e for e in self.explanations if e.input == i]

    def figure(self, i: int, method: str, run: str = "A") -> MapFigure | None:
        return next((e.figure for e in self.explanations if e.input == i and e.method == method and e.run == run), None)

    def metric_names(self) -> list[str]:
        """The metrics any map has, in the one table order (`scoring.METRICS`)."""
        return [k for k in METRICS if any(k in e.metrics for e in self.explanations)]

    # -- the files' names
    def stem(self, e: ScoredMap) -> str:
        run = f"_{_safe(e.run)}" if len(self.runs) > 1 else ""
        return f"input_{e.input:02d}{run}_{_safe(e.method)}"

    def input_file(self, i: int) -> str | None:
        return f"inputs/input_{i:02d}.png" if self.inputs[i].image is not None else None

    def map_file(self, e: ScoredMap) -> str | None:
        if e.figure is None:
            return None
        return f"maps/{self.stem(e)}.{adapter_of(e.figure.modality).map_files}"

    def attribution_file(self, e: ScoredMap) -> str | None:
        if e.figure is None or not adapter_of(e.figure.modality).stores_values:
            return None
        return f"attributions/{self.stem(e)}.npy"

    def files(self) -> dict[str, bytes]:
        """Every file of the report, name -> bytes: report.json, inputs/*.png (images), maps/*.png (each map with
        its colour bar) or maps/*.html (text), attributions/*.npy (images). `write_dir` and `to_zip` write these."""
        out: dict[str, bytes] = {REPORT_JSON: self.to_json().encode("utf-8")}
        for i, inp in enumerate(self.inputs):
            name = self.input_file(i)
            png = inp.png()
            if name and png is not None:
                out[name] = png
        for e in self.explanations:
            fig, name, values_file = e.figure, self.map_file(e), self.attribution_file(e)
            if fig is None or not name:
                continue
            if fig.figure_png is not None:
                out[name] = fig.figure_png
            elif fig.tokens_html is not None:
                out[name] = report_files.text_map_page(fig, self.inputs[e.input].name).encode("utf-8")
            if values_file is not None and fig.figure_png is not None:
                out[values_file] = report_files.npy_bytes(fig.values)
        for x in self.extras:
            out.update(x.all_files())
        return out

    # -- the format
    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values (docs/report-format.md)."""
        metric_info = {
            k: {"title": METRICS[k][0], "better": METRICS[k][1], "meaning": metric_meaning(k, self.modality)}
            for k in self.metric_names()
        }
        return jsonable(
            {
                "format_version": FORMAT_VERSION,
                "kind": KIND,
                "source": self.source,
                "runs": [r.to_json() for r in self.runs],
                "settings": self.settings.to_json(),
                "inputs": [
                    inp.to_json(self.input_file(i), self.run.classes, self.run.regression)
                    for i, inp in enumerate(self.inputs)
                ],
                "explanations": [e.to_json(self.map_file(e), self.attribution_file(e)) for e in self.explanations],
                "metric_info": metric_info,
                "notes": list(self.notes),
                "extras": [x.to_json() for x in self.extras],
            }
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], files: Mapping[str, bytes] | None = None) -> ExplainReport:
        """A report read back from `to_dict` (and, when given, its `files`: the input images and the image maps'
        attributions, from which the maps are drawn again)."""
        version = d.get("format_version")
        if d.get("kind") != KIND or not isinstance(version, int):
            raise ExplainError("Not an xaidash explain report (no kind/format_version).")
        if version > FORMAT_VERSION:
            raise ExplainError(
                f"Report format {version} is newer than this xaidash reads ({FORMAT_VERSION}); update xaidash."
            )
        files = files or {}
        inputs = [ReportInput.from_json(inp, files) for inp in d["inputs"]]
        explanations = []
        for e in d["explanations"]:
            figure = None
            if e.get("figure") is not None:
                att = (e.get("files") or {}).get("attribution")
                values = np.load(io.BytesIO(files[att])) if att and att in files else None
                figure = MapFigure.from_json(e["figure"], values, inputs[int(e["input"])].image)
            explanations.append(ScoredMap.from_json(e, figure))
        return cls(
            [RunInfo.from_json(r) for r in d["runs"]],
            ReportSettings.from_json(d["settings"]),
            inputs,
            explanations,
            list(d.get("notes") or []),
            str(d.get("source", "")),
            [ReportExtra.from_json(x, files) for x in d.get("extras") or []],
        )

    # -- the writers (explainers/figures/report_files.py, html_report.py)
    def to_json(self) -> str:
        """The report as JSON (docs/report-format.md): the same text for the same session."""
        return report_files.json_text(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes, files: Mapping[str, bytes] | None = None) -> ExplainReport:
        """A report read back from `to_json` (see `from_dict`)."""
        return cls.from_dict(json.loads(text), files)

    @classmethod
    def read_dir(cls, path: str | Path) -> ExplainReport:
        """A report `write_dir` wrote."""
        files = report_files.read_files(path)
        return cls.from_json(files[REPORT_JSON], files)

    def write_dir(self, path: str | Path) -> list[Path]:
        """Every file of `files()` under `path` (created), each written atomically; the paths written."""
        return report_files.write_files(self.files(), path)

    def to_zip(self) -> bytes:
        """`files()` as one zip (fixed timestamps: the same report gives the same bytes)."""
        return report_files.zip_bytes(self.files())

    def to_html(self) -> str:
        """One self-contained HTML page (no network): see explainers/figures/html_report.py."""
        return report_html(self, FORMAT_VERSION)


# ---- building -----------------------------------------------------------------------------------------------


def build_report(
    runs: Sequence[RunInfo],
    inputs: Sequence[ReportInput],
    results: Sequence[MethodResult],
    settings: ReportSettings,
    *,
    notes: Sequence[str] = (),
    source: str = "",
    scales: Mapping[tuple[str, int, str], tuple[float, str]] | None = None,
    upscale: int = DEFAULT_UPSCALE,
) -> ExplainReport:
    """The report of a session: every (input, method, run)'s `MapFigure` through `explanation_figures` (the
    settings' scale mode and display), with its metrics and diagnostics for that input; a method that failed
    keeps its error. `scales` ((run key, input, method) -> (scale, note)) replaces the scale mode where maps of
    several models are compared (Side by side)."""
    if not runs:
        raise ExplainError("A report needs the run its maps come from.")
    labels = {m.id: m.label for m in settings.methods}
    order = [m.id for m in settings.methods] + [r.method for r in results if r.method not in labels]
    by_key = {(r.run, r.method): r for r in results}
    figures: dict[tuple[str, int], dict[str, MapFigure]] = {}
    for run in runs:
        done = {
            m: r.explanation for m in order if (r := by_key.get((run.key, m))) is not None and r.explanation is not None
        }
        cached = {m: by_key[(run.key, m)].cached for m in done}
        for i, inp in enumerate(inputs):
            override = (
                None if scales is None else {m: scales[(run.key, i, m)] for m in done if (run.key, i, m) in scales}
            )
            figures[(run.key, i)] = explanation_figures(
                done,
                i,
                classes=run.classes,
                image=inp.image,
                scale_mode=settings.scale_mode,  # type: ignore[arg-type]
                display=settings.display,
                cached=cached,
                upscale=upscale,
                scales=None if override is None else {m: s for m, (s, _) in override.items()},
                notes=None if override is None else {m: n for m, (_, n) in override.items()},
                regression=run.regression,
            )
    entries: list[ScoredMap] = []
    for i in range(len(inputs)):
        for m in order:
            for run in runs:
                r = by_key.get((run.key, m))
                if r is None:
                    continue
                e = r.explanation
                entries.append(
                    ScoredMap(
                        input=i,
                        method=m,
                        label=labels.get(m, m),
                        run=run.key,
                        figure=figures[(run.key, i)].get(m),
                        params=dict(e.params) if e is not None else {},
                        seconds=None if e is None else float(e.seconds),
                        wall_seconds=r.wall_seconds,
                        device=None if e is None else e.device,
                        diagnostics={} if e is None else {k: v[i] for k, v in e.diagnostics.items() if i < len(v)},
                        metrics={k: v[i] for k, v in r.metrics.items() if k in METRICS and i < len(v)},
                        metric_errors=dict(r.metric_errors),
                        error=r.error if e is None else None,
                    )
                )
    return ExplainReport(list(runs), settings, list(inputs), entries, list(notes), source)


def session_report(
    bundle: ModelBundle,
    run_id: str,
    inputs: Sequence[tuple[str, Any, int | float | None]],
    probs: Any,
    results: Sequence[MethodResult],
    settings: ReportSettings,
    *,
    ood: Sequence[OODScore] | None = None,
    notes: Sequence[str] = (),
    source: str = "",
    top_k: int = TOP_K,
    futures: Sequence[Sequence[float] | None] | None = None,
) -> ExplainReport:
    """The report of one model's session, as the Explain page and `xaidash explain` build it: `inputs` are
    (name, raw input, true class or None), `probs` their class probabilities (N, classes), `ood` their
    out-of-distribution scores when there are any, `futures` a forecast's true values of the steps ahead per input
    (None where unknown)."""
    run = RunInfo.of(bundle, run_id)
    p = np.asarray(probs)
    rows = [
        ReportInput.of(
            name,
            raw,
            label,
            {run.key: top_predictions(p[i], run.classes, top_k, run.regression)},
            None if ood is None else ood[i],
            None if isinstance(raw, str) else bundle.adapter.one_line(raw, bundle.info, 4000),
            adapter_of(bundle.modality).input_cells(bundle.info, raw),
            None if futures is None else futures[i],
        )
        for i, (name, raw, label) in enumerate(inputs)
    ]
    return build_report([run], rows, results, settings, notes=notes, source=source)
