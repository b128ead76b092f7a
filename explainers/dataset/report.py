"""The data-set report's numbers: what an attribution store (`xaidash explain --input dataset:...`) holds,
summarised for the Compare page's "Whole data set" tab and the Explain page's stored view.

Plain pandas/numpy on the frames `AttributionStore.samples()` (one row per sample) and `.metrics()` (one
row per sample and method) return; no Streamlit, no model: the pages draw what these functions give.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from xaidash.data.modalities import IMAGE
from xaidash.explainers.dataset.explain import DEFAULT_CHUNK
from xaidash.explainers.metrics.spread import spread
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.samples import DEFAULT_BACKGROUND
from xaidash.explainers.scoring import METRICS

# What one value of each metric is: its unit or range (axis titles) and a line on how it is measured (subtitles);
# METRICS gives the title and which way is better.
METRIC_UNITS: dict[str, str] = {
    "deletion_auc": "0–1",
    "insertion_auc": "0–1",
    "pointing_game": "hit = 1, miss = 0",
    "energy_in_mask": "share, 0–1",
    "rationale_pointing": "hit = 1, miss = 0",
    "rationale_energy": "share, 0–1",
    "completeness_gap": "relative, 0 = exact",
    "seconds": "s per sample",
}
BINARY_METRICS = frozenset({"pointing_game", "rationale_pointing"})  # 1 or 0 per sample: no distribution to draw
SAMPLE_COLUMNS = ("index", "label", "label_name", "pred", "pred_name", "prob", "loss", "correct", "disagreement")
Which = Literal["all", "correct", "misclassified"]
# The sample table's orders: name -> (columns, ascending per column). Missing values always go last.
SORTS: dict[str, tuple[tuple[str, ...], tuple[bool, ...]]] = {
    "worst deletion AUC": (("deletion AUC (mean)", "index"), (False, True)),
    "most disagreement between methods": (("disagreement", "index"), (False, True)),
    "highest loss": (("loss", "index"), (False, True)),
    "misclassified first": (("correct", "loss", "index"), (True, False, True)),
    "data set order": (("index",), (True,)),
}
TABLE_METRICS = ("deletion_auc", "insertion_auc")
SUMMARY_COLUMNS = [
    "method",
    "metric",
    "n",
    "valid",
    "mean",
    "low",
    "high",
    "std",
    "median",
    "q25",
    "q75",
    "minimum",
    "maximum",
]


def metric_title(metric: str) -> str:
    return METRICS.get(metric, (metric, ""))[0]


def metric_better(metric: str) -> str:
    return METRICS.get(metric, (metric, ""))[1]


def axis_title(metric: str) -> str:
    """'Deletion AUC (0–1, lower is better)': an axis title with the metric's unit or range and its direction."""
    parts = [p for p in (METRIC_UNITS.get(metric, ""), metric_better(metric)) if p]
    return f"{metric_title(metric)} ({', '.join(parts)})" if parts else metric_title(metric)


def metric_names(metrics: pd.DataFrame) -> list[str]:
    """The metric columns of a store's metrics frame that hold at least one finite value, in METRICS' order
    (then any others the store has)."""
    skip = {"index", "method"}
    present = [
        c
        for c in metrics.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(metrics[c])
        and np.isfinite(metrics[c].to_numpy(dtype=float)).any()
    ]
    known = [m for m in METRICS if m in present]
    return known + [c for c in present if c not in known]


def method_summary(metrics: pd.DataFrame, methods: Sequence[str], names: Sequence[str]) -> pd.DataFrame:
    """One row per (method, metric): n, valid, mean, its 95% interval (low, high), std, median, quartiles, range."""
    rows: list[dict[str, Any]] = []
    for m in methods:
        part = metrics[metrics["method"] == m]
        for c in names:
            values = part[c].to_numpy(dtype=float) if c in part else np.array([], dtype=float)
            s = spread(values)
            finite = values[np.isfinite(values)]
            q25, median, q75 = (
                (float(v) for v in np.percentile(finite, [25, 50, 75])) if finite.size else (math.nan,) * 3
            )
            rows.append(
                {
                    "method": m,
                    "metric": c,
                    "n": s.n,
                    "valid": s.valid,
                    "mean": s.mean,
                    "low": s.low,
                    "high": s.high,
                    "std": s.std,
                    "median": median,
                    "q25": q25,
                    "q75": q75,
                    "minimum": s.minimum,
                    "maximum": s.maximum,
                }
            )
    return pd.DataFrame(
        rows,
        columns=SUMMARY_COLUMNS,
    )


def best_methods(summary: pd.DataFrame) -> dict[str, list[str]]:
    """metric -> the method(s) with the best mean (lower or higher per METRICS), when two or more have one."""
    out: dict[str, list[str]] = {}
    for c, part in summary[summary["mean"].notna()].groupby("metric", sort=False):
        if len(part) < 2:
            continue
        lower = metric_better(str(c)).startswith("lower")
        target = part["mean"].min() if lower else part["mean"].max()
        out[str(c)] = [str(m) for m in part[np.isclose(part["mean"], target, rtol=1e-9, atol=1e-12)]["method"]]
    return out


def _with_classes(samples: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in ("index", "label", "label_name", "correct") if c in samples]
    return metrics.merge(samples[keep], on="index", how="inner")


def per_class(
    samples: pd.DataFrame, metrics: pd.DataFrame, metric: str, methods: Sequence[str], classes: Sequence[str]
) -> pd.DataFrame:
    """Long frame, one row per (true class, method): class, method, n (samples with a value), mean, std of `metric`.
    Classes in `classes`' order, only those with samples in the store."""
    joined = _with_classes(samples, metrics)
    rows = []
    for k, name in enumerate(classes):
        of_class = joined[joined["label"] == k]
        if of_class.empty:
            continue
        for m in methods:
            values = of_class.loc[of_class["method"] == m, metric].to_numpy(dtype=float)
            finite = values[np.isfinite(values)]
            rows.append(
                {
                    "class": name,
                    "method": m,
                    "n": int(finite.size),
                    "mean": float(finite.mean()) if finite.size else math.nan,
                    "std": float(finite.std(ddof=1)) if finite.size > 1 else math.nan,
                }
            )
    return pd.DataFrame(rows, columns=["class", "method", "n", "mean", "std"])


def class_table(samples: pd.DataFrame, classes: Sequence[str]) -> pd.DataFrame:
    """One row per true class with samples in the store: class, samples, accuracy (0–1), mean loss, mean disagreement."""
    rows = []
    for k, name in enumerate(classes):
        part = samples[samples["label"] == k]
        if part.empty:
            continue
        rows.append(
            {
                "class": name,
                "samples": len(part),
                "accuracy": float(part["correct"].astype(float).mean()),
                "mean loss": float(part["loss"].mean()),
                "mean disagreement": float(part["disagreement"].mean()) if part["disagreement"].notna().any() else None,
            }
        )
    return pd.DataFrame(rows, columns=["class", "samples", "accuracy", "mean loss", "mean disagreement"])


def distribution_frame(metrics: pd.DataFrame, metric: str, methods: Sequence[str]) -> pd.DataFrame:
    """Long frame (method, value) of the finite values of `metric`, for histograms and box plots."""
    part = metrics[metrics["method"].isin(list(methods))][["method", metric]].rename(columns={metric: "value"})
    part = part[np.isfinite(part["value"].to_numpy(dtype=float))]
    return part.reset_index(drop=True)


def table_column(metric: str, label: str) -> str:
    """The sample table's column of one method's metric: 'Saliency deletion AUC'."""
    return f"{label} {metric_title(metric).replace('Deletion', 'deletion').replace('Insertion', 'insertion')}"


def sample_table(
    samples: pd.DataFrame,
    metrics: pd.DataFrame,
    methods: Sequence[str],
    labels: Mapping[str, str] | None = None,
    shown: Sequence[str] = TABLE_METRICS,
) -> pd.DataFrame:
    """One row per stored sample: index, label, prediction, prob, loss, correct, disagreement, the deletion AUC
    averaged over the methods, then each method's `shown` metrics ('<label> deletion AUC', ...)."""
    labels = labels or {}
    table = pd.DataFrame(
        {
            "index": samples["index"].astype(int).to_numpy(),
            "label": samples["label_name"].astype(str).to_numpy(),
            "prediction": samples["pred_name"].astype(str).to_numpy(),
            "prob": samples["prob"].astype(float).to_numpy(),
            "loss": samples["loss"].astype(float).to_numpy(),
            "correct": samples["correct"].astype(bool).to_numpy(),
            "disagreement": samples["disagreement"].astype(float).to_numpy(),
        }
    )
    wide = {}
    for c in shown:
        if c not in metrics:
            continue
        pivot = metrics.pivot_table(index="index", columns="method", values=c, aggfunc="first", dropna=False)
        for m in methods:
            if m in pivot:
                wide[table_column(c, labels.get(m, m))] = pivot[m]
        if c == "deletion_auc":
            present = [m for m in methods if m in pivot]
            wide["deletion AUC (mean)"] = pivot[present].mean(axis=1) if present else np.nan
    extra = pd.DataFrame(wide)
    if not extra.empty:
        table = table.merge(extra, left_on="index", right_index=True, how="left")
    if "deletion AUC (mean)" not in table:
        table["deletion AUC (mean)"] = np.nan
    mean_col = table.pop("deletion AUC (mean)")
    table.insert(7, "deletion AUC (mean)", mean_col)
    return table.reset_index(drop=True)


def filter_samples(table: pd.DataFrame, classes: Sequence[str] = (), which: Which = "all") -> pd.DataFrame:
    """Rows whose true label is in `classes` (all when empty) and that are correct/misclassified/either."""
    keep = np.ones(len(table), dtype=bool)
    if classes:
        keep &= table["label"].isin(list(classes)).to_numpy()
    if which == "correct":
        keep &= table["correct"].to_numpy(dtype=bool)
    elif which == "misclassified":
        keep &= ~table["correct"].to_numpy(dtype=bool)
    elif which != "all":
        raise ValueError(f"which must be 'all', 'correct' or 'misclassified', got {which!r}")
    return table[keep].reset_index(drop=True)


def sort_samples(table: pd.DataFrame, order: str) -> pd.DataFrame:
    """`table` in one of SORTS' orders (missing values last)."""
    if order not in SORTS:
        raise ValueError(f"Unknown order {order!r}; choose one of {', '.join(SORTS)}.")
    columns, ascending = SORTS[order]
    present = [(c, a) for c, a in zip(columns, ascending, strict=True) if c in table]
    return table.sort_values(
        [c for c, _ in present], ascending=[a for _, a in present], na_position="last", kind="stable"
    ).reset_index(drop=True)


def input_spec(manifest: Mapping[str, Any], split_size: int | None = None) -> str:
    """The --input the store covers: 'dataset:all' when it spans the whole split (the manifest's `split_size`, or
    the one given), else 'dataset:START:STOP'."""
    start = int(manifest.get("start") or 0)
    stop = manifest.get("stop")
    stop = int(stop) if stop else start + int(manifest.get("n_total") or 0)
    size = manifest.get("split_size") or split_size
    if start == 0 and size is not None and stop >= int(size):
        return "dataset:all"
    return f"dataset:{start}:{stop}"


def explain_command(
    run_id: str,
    split: str = "test",
    methods: Sequence[str] = (),
    input_: str = "dataset:all",
    engine: str = "local",
    *,
    metrics: bool = True,
    options: Mapping[str, Any] | None = None,
) -> str:
    """The `xaidash explain` command line that writes (or resumes) a run's attribution store; `options`:
    further flags by name (e.g. {'--chunk-size': 32})."""
    parts = ["xaidash", "explain", "--run", run_id, "--input", input_, "--split", split]
    if methods:
        parts += ["--methods", ",".join(methods)]
    if metrics:
        parts.append("--metrics")
    if engine != "local":
        parts += ["--engine", engine]
    for flag, value in (options or {}).items():
        parts += [flag, str(value)]
    return shlex.join(parts)


# Settings a store records that must match to resume it, with the CLI's defaults (left out of the command).
RESUME_FLAGS: dict[str, tuple[str, Any]] = {
    "chunk_size": ("--chunk-size", DEFAULT_CHUNK),
    "steps": ("--steps", CURVE_STEPS),
    "seed": ("--seed", 0),
    "background": ("--background", DEFAULT_BACKGROUND),
}


def resume_command(run_id: str, manifest: Mapping[str, Any], split_size: int | None = None) -> str:
    """The command that finishes an incomplete store: the same split, range, methods, engine and settings (a
    method's non-default parameters are not flags: the CLI says so if they differ)."""
    options = {
        flag: manifest[key]
        for key, (flag, default) in RESUME_FLAGS.items()
        if manifest.get(key) is not None and manifest.get(key) != default
    }
    return explain_command(
        run_id,
        str(manifest.get("split", "test")),
        list(manifest.get("methods") or []),
        input_spec(manifest, split_size),
        str(manifest.get("engine", "local")),
        metrics=bool(manifest.get("with_metrics", True)),
        options=options,
    )


def when(timestamp: float | None) -> str:
    """A store's creation time as '2026-11-23 21:05' (local time), or 'an unknown date'."""
    if not timestamp:
        return "an unknown date"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(timestamp)))


def store_facts(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs for the report's header: split, samples done, methods, engine, when, speed."""
    done, total = int(manifest.get("n_done", 0)), int(manifest.get("n_total", 0))
    rate = manifest.get("samples_per_s")
    seconds = manifest.get("seconds")
    facts = [
        ("split", str(manifest.get("split", "?"))),
        ("samples", f"{done:,} of {total:,}" + ("" if manifest.get("complete") else " (incomplete)")),
        ("methods", ", ".join(manifest.get("methods") or []) or "none"),
        ("engine", str(manifest.get("engine", "?"))),
        ("written", when(manifest.get("created"))),
    ]
    if rate:
        facts.append(("speed", f"{float(rate):.1f} samples/s" + (f" over {float(seconds):.0f} s" if seconds else "")))
    return facts


def histogram(frame: pd.DataFrame, bins: int = 30) -> pd.DataFrame:
    """Counts of `frame`'s values (columns method, value) in `bins` bins shared by every method: one row per
    (method, bin) with start, end, count and share (of that method's values), for step-line histograms."""
    columns = ["method", "start", "end", "count", "share"]
    values = frame["value"].to_numpy(dtype=float) if len(frame) else np.array([], dtype=float)
    if not values.size:
        return pd.DataFrame(columns=columns)
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:  # every value equal: one bin around it
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    rows = []
    for m, part in frame.groupby("method", sort=False):
        counts, _ = np.histogram(part["value"].to_numpy(dtype=float), bins=edges)
        total = max(int(counts.sum()), 1)
        rows += [
            {"method": m, "start": float(a), "end": float(b), "count": int(c), "share": c / total}
            for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True)
        ]
    return pd.DataFrame(rows, columns=columns)


def parse_stored(value: str | None) -> tuple[str, int] | None:
    """'test:12' (the Explain page's ?stored= parameter) -> ('test', 12); None when it is not of that form."""
    split, _, digits = str(value or "").partition(":")
    if split not in ("test", "train") or not (digits.isascii() and digits.isdigit() and len(digits) <= 18):  # not '²'
        return None
    return split, int(digits)


def sample_metrics(metrics: pd.DataFrame, index: int, methods: Sequence[str]) -> dict[str, dict[str, float]]:
    """method -> {metric: value} of one stored sample (finite values of METRICS' columns only)."""
    rows = metrics[metrics["index"] == index]
    out: dict[str, dict[str, float]] = {}
    for m in methods:
        hit = rows[rows["method"] == m]
        if hit.empty:
            continue
        row = hit.iloc[0]
        out[m] = {
            c: float(row[c]) for c in METRICS if c in row.index and row[c] is not None and np.isfinite(float(row[c]))
        }
    return out


def stored_explanations(
    store: Any,
    index: int,
    methods: Sequence[str],
    *,
    target: int,
    seconds: Mapping[str, float | None] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The stored maps of sample `index` as `Explanation`s of one input (method id -> explanation): the same
    type the live page computes, so both are drawn by one builder. `target`: the class the store explained
    (each sample's prediction); `seconds`: each method's stored time for the sample."""
    from xaidash.explainers.explanation import Explanation

    modality = str(store.manifest.get("modality") or IMAGE.id)  # stores written before the field: images
    adapter = adapter_of(modality)
    out: dict[str, Any] = {}
    for m in methods:
        words = store.tokens(m, [index])
        attributions, labels = adapter.stored(store.maps(m, [index])[0], None if words is None else words[0])
        secs = (seconds or {}).get(m)
        out[m] = Explanation(
            method=m,
            params=dict((params or {}).get(m) or {}),
            targets=np.asarray([int(target)]),
            attributions=attributions,
            seconds=-1.0 if secs is None or not math.isfinite(float(secs)) else float(secs),
            device="",
            modality=modality,
            tokens=labels,
        )
    return out


def stored_figures(
    store: Any,
    index: int,
    methods: Sequence[str],
    *,
    classes: Sequence[str],
    target: int,
    seconds: Mapping[str, float | None] | None = None,
    image: Any | None = None,
    display: str = "overlay",
    scale_mode: str = "percentile",
) -> dict[str, Any]:
    """One stored sample's maps as `MapFigure`s (method id -> figure), built exactly as the live page builds its
    computed maps (`map_figure.explanation_figures`), captioned as stored. `image`: the sample (for overlays)."""
    from xaidash.explainers.figures.map_figure import explanation_figures

    explanations = stored_explanations(store, index, methods, target=target, seconds=seconds)
    return explanation_figures(
        explanations,
        0,
        classes=classes,
        image=image,
        scale_mode=scale_mode,  # type: ignore[arg-type]
        display=display,
        stored=True,
    )
