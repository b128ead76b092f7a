"""One explain session as one report: the run(s), the settings, the inputs with their predictions and
out-of-distribution hint, and every (input, method) map as a `MapFigure` with its metrics and errors.

`build_report` assembles it from the methods' results (the Explain page, `xaidash explain`, Compare and Side by
side all call it); `ExplainReport.to_json()` is the one report format (docs/report-format.md, `format_version`),
`write_dir` and `to_zip` write the same files with the same bytes (report.json, the inputs, one PNG per map with
its colour bar, the raw attributions), `to_html` one self-contained page (explainers/figures/html_report.py).
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from xaidash.data.atomic import atomic_write_bytes
from xaidash.explainers.figures import render
from xaidash.explainers.figures.map_figure import MapFigure, explanation_figures
from xaidash.explainers.figures.png import input_png
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.scoring import METRICS, metric_meaning
from xaidash.explainers.session import MethodResult

if TYPE_CHECKING:
    from xaidash.explainers.inspection.ood import OODScore
    from xaidash.models.bundle import ModelBundle

FORMAT_VERSION = 1
KIND = "xaidash.explain_report"
TOP_K = 5
REPORT_JSON = "report.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same report zips to the same bytes


def _clean(value: Any) -> Any:
    """Plain JSON: numpy scalars and arrays become numbers and lists, NaN/inf become null."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, (str, int)):
        return value
    return str(value)


# ---- the parts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    cls: int
    name: str
    probability: float

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls, "name": self.name, "probability": self.probability}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Prediction:
        return cls(int(d["class"]), str(d["name"]), float(d["probability"]))


def top_predictions(probs: Any, classes: Sequence[str], k: int = TOP_K) -> list[Prediction]:
    """The k most probable classes of one input, most probable first (ties in class order): the one top-k
    every page, the CLI and the reports list."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    order = np.argsort(-p, kind="stable")[: max(0, min(int(k), len(p)))]
    return [Prediction(int(i), str(classes[int(i)]), float(p[int(i)])) for i in order]


@dataclass(frozen=True)
class RunInfo:
    """The run a report's maps come from. `key` names it inside the report ('A'; 'A' and 'B' side by side);
    `epoch` is set for a run's weights after one epoch; `title` is how the page named it."""

    id: str
    model: str
    dataset: str
    modality: str
    classes: tuple[str, ...]
    device: str = ""
    key: str = "A"
    epoch: int | None = None
    title: str = ""

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
        )


@dataclass(frozen=True)
class MethodSetting:
    id: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)


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
        return render.SCALE_MODES.get(self.scale_mode, self.scale_mode)

    def to_json(self) -> dict[str, Any]:
        return {
            "methods": [{"id": m.id, "label": m.label, "params": _clean(m.params)} for m in self.methods],
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
            [MethodSetting(str(m["id"]), str(m["label"]), dict(m.get("params") or {})) for m in d["methods"]],
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


def _ood_json(score: OODScore | None) -> dict[str, Any] | None:
    if score is None:
        return None
    return {
        "flagged": score.flagged,
        "distance": score.distance,
        "threshold": score.threshold,
        "percentile": score.percentile,
        "entropy": score.entropy,
        "entropy_percentile": score.entropy_percentile,
        "max_entropy": score.max_entropy,
        "k": score.k,
        "summary": score.summary(),
    }


def _ood_from_json(d: Mapping[str, Any] | None) -> OODScore | None:
    if d is None:
        return None
    from xaidash.explainers.inspection.ood import OODScore

    return OODScore(
        float(d["distance"]),
        float(d["threshold"]),
        float(d["percentile"]),
        float(d["entropy"]),
        float(d["entropy_percentile"]),
        float(d["max_entropy"]),
        bool(d["flagged"]),
        int(d["k"]),
    )


@dataclass
class ReportInput:
    """One input: its name, true class (None when unknown), the input itself (an image (H, W, 3) in [0, 1], or
    the text), each run's top predictions (run key -> most probable first) and the out-of-distribution hint."""

    name: str
    label: int | None = None
    image: np.ndarray | None = None
    text: str | None = None
    predictions: dict[str, list[Prediction]] = field(default_factory=dict)
    ood: OODScore | None = None

    @classmethod
    def of(
        cls,
        name: str,
        raw: Any,
        label: int | None = None,
        predictions: Mapping[str, list[Prediction]] | None = None,
        ood: OODScore | None = None,
    ) -> ReportInput:
        """From a raw input as the pages and `explain` take it: an image (C, H, W) in [0, 1] or a text."""
        if isinstance(raw, str):
            return cls(name, label, None, raw, dict(predictions or {}), ood)
        return cls(name, label, render.image_hwc(raw), None, dict(predictions or {}), ood)

    def raw(self, channels: int = 3) -> np.ndarray | str | None:
        """The input back as the pages and `explain` take it (the inverse of `of`): the text, or the image as
        (C, H, W) float32 in [0, 1] with the model's `channels` (a grey image is kept as three equal channels)."""
        if self.text is not None:
            return self.text
        if self.image is None:
            return None
        return np.ascontiguousarray(np.asarray(self.image, np.float32).transpose(2, 0, 1)[:channels])

    def png(self) -> bytes | None:
        """The input image as the model saw it (its own size), PNG."""
        return None if self.image is None else input_png(self.image)


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

    # -- files
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
            fig = e.figure
            if fig is None:
                continue
            name = self.map_file(e)
            values_file = self.attribution_file(e)
            if fig.figure_png is not None and name:
                out[name] = fig.figure_png
            elif fig.tokens_html is not None and name:
                out[name] = _text_map_page(fig, self.inputs[e.input].name).encode("utf-8")
            if values_file is not None and fig.figure_png is not None:
                buf = io.BytesIO()
                np.save(buf, np.asarray(fig.values, dtype=np.float32))
                out[values_file] = buf.getvalue()
        return out

    # -- formats
    def to_dict(self) -> dict[str, Any]:
        inputs = []
        for i, inp in enumerate(self.inputs):
            classes = self.run.classes
            inputs.append(
                {
                    "name": inp.name,
                    "label": None if inp.label is None else {"class": inp.label, "name": classes[inp.label]},
                    "file": self.input_file(i),
                    "text": inp.text,
                    "predictions": {k: [p.to_json() for p in v] for k, v in inp.predictions.items()},
                    "out_of_distribution": _ood_json(inp.ood),
                }
            )
        explanations = [
            {
                "input": e.input,
                "run": e.run,
                "method": e.method,
                "label": e.label,
                "params": e.params,
                "seconds": e.seconds,
                "wall_seconds": e.wall_seconds,
                "device": e.device,
                "diagnostics": e.diagnostics,
                "metrics": e.metrics,
                "metric_errors": e.metric_errors,
                "error": e.error,
                "figure": None if e.figure is None else e.figure.to_json(),
                "files": {"map": self.map_file(e), "attribution": self.attribution_file(e)},
            }
            for e in self.explanations
        ]
        metric_info = {
            k: {"title": METRICS[k][0], "better": METRICS[k][1], "meaning": metric_meaning(k, self.modality)}
            for k in self.metric_names()
        }
        return _clean(
            {
                "format_version": FORMAT_VERSION,
                "kind": KIND,
                "source": self.source,
                "runs": [r.to_json() for r in self.runs],
                "settings": self.settings.to_json(),
                "inputs": inputs,
                "explanations": explanations,
                "metric_info": metric_info,
                "notes": list(self.notes),
            }
        )

    def to_json(self) -> str:
        """The report as JSON (docs/report-format.md): the same text for the same session."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes, files: Mapping[str, bytes] | None = None) -> ExplainReport:
        """A report read back from `to_json` (and, when given, its `files`: the input images and the image maps'
        attributions, from which the maps are drawn again)."""
        d = json.loads(text)
        version = d.get("format_version")
        if d.get("kind") != KIND or not isinstance(version, int):
            raise ExplainError("Not an xaidash explain report (no kind/format_version).")
        if version > FORMAT_VERSION:
            raise ExplainError(
                f"Report format {version} is newer than this xaidash reads ({FORMAT_VERSION}); update xaidash."
            )
        files = files or {}
        inputs = []
        for inp in d["inputs"]:
            image = None
            if inp.get("file") and inp["file"] in files:
                pixels = np.asarray(Image.open(io.BytesIO(files[inp["file"]])).convert("RGB"), dtype=np.float32)
                image = pixels / 255.0
            inputs.append(
                ReportInput(
                    str(inp["name"]),
                    None if inp.get("label") is None else int(inp["label"]["class"]),
                    image,
                    inp.get("text"),
                    {str(k): [Prediction.from_json(p) for p in v] for k, v in (inp.get("predictions") or {}).items()},
                    _ood_from_json(inp.get("out_of_distribution")),
                )
            )
        explanations = []
        for e in d["explanations"]:
            figure = None
            if e.get("figure") is not None:
                att = (e.get("files") or {}).get("attribution")
                values = np.load(io.BytesIO(files[att])) if att and att in files else None
                figure = MapFigure.from_json(e["figure"], values, inputs[int(e["input"])].image)
            explanations.append(
                ScoredMap(
                    int(e["input"]),
                    str(e["method"]),
                    str(e.get("label", e["method"])),
                    str(e.get("run", "A")),
                    figure,
                    dict(e.get("params") or {}),
                    e.get("seconds"),
                    e.get("wall_seconds"),
                    e.get("device"),
                    dict(e.get("diagnostics") or {}),
                    dict(e.get("metrics") or {}),
                    dict(e.get("metric_errors") or {}),
                    e.get("error"),
                )
            )
        return cls(
            [RunInfo.from_json(r) for r in d["runs"]],
            ReportSettings.from_json(d["settings"]),
            inputs,
            explanations,
            list(d.get("notes") or []),
            str(d.get("source", "")),
        )

    @classmethod
    def read_dir(cls, path: str | Path) -> ExplainReport:
        """A report `write_dir` wrote."""
        root = Path(path)
        files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        return cls.from_json(files[REPORT_JSON], files)

    def write_dir(self, path: str | Path) -> list[Path]:
        """Every file of `files()` under `path` (created), each written atomically; the paths written."""
        root = Path(path)
        written = []
        for name, data in self.files().items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, data)
            written.append(target)
        return written

    def to_zip(self) -> bytes:
        """`files()` as one zip (fixed timestamps: the same report gives the same bytes)."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in self.files().items():
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                z.writestr(info, data)
        return buf.getvalue()

    def to_html(self) -> str:
        """One self-contained HTML page (no network): see explainers/figures/html_report.py."""
        from xaidash.explainers.figures.html_report import report_html

        return report_html(self, FORMAT_VERSION)


def _text_map_page(fig: MapFigure, input_name: str) -> str:
    import html

    title = html.escape(f"{fig.label} · {input_name}")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f'<body style="font-family:sans-serif;max-width:720px;margin:16px">'
        f"<h3>{title}</h3>{fig.tokens_html}{fig.colorbar_html()}"
        f'<p style="color:#555;font-size:13px">{html.escape(fig.caption.text())}</p></body></html>\n'
    )


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
    upscale: int = render.DEFAULT_UPSCALE,
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
    inputs: Sequence[tuple[str, Any, int | None]],
    probs: Any,
    results: Sequence[MethodResult],
    settings: ReportSettings,
    *,
    ood: Sequence[OODScore] | None = None,
    notes: Sequence[str] = (),
    source: str = "",
    top_k: int = TOP_K,
) -> ExplainReport:
    """The report of one model's session, as the Explain page and `xaidash explain` build it: `inputs` are
    (name, raw input, true class or None), `probs` their class probabilities (N, classes), `ood` their
    out-of-distribution scores when there are any."""
    run = RunInfo.of(bundle, run_id)
    p = np.asarray(probs)
    rows = [
        ReportInput.of(
            name,
            raw,
            label,
            {run.key: top_predictions(p[i], run.classes, top_k)},
            None if ood is None else ood[i],
        )
        for i, (name, raw, label) in enumerate(inputs)
    ]
    return build_report([run], rows, results, settings, notes=notes, source=source)
