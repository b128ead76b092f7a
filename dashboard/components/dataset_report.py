"""The Compare page's "Whole data set" report: what a run's attribution store holds (`xaidash explain --input
dataset:...`), each method's metrics over all its samples, per class and as distributions, and a sortable table
of the samples where a click opens that sample on Explain with its stored maps (nothing is recomputed).

Drawing only: the numbers come from `xaidash.explainers.dataset.report`, the data from the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.explain_tables import fmt_number
from xaidash.dashboard.nav import page_path
from xaidash.explainers.dataset import report as R
from xaidash.explainers.scoring import metric_meaning, unit_words
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

VIEW_KEY = "compare_view"  # the Compare page's view switch, bound to ?compare_view=... in the address
VIEWS = ("Sample of inputs", "Whole data set")
STORED_PARAM = "stored"  # ?stored=SPLIT:INDEX on Explain: that sample's stored maps
EXPLAIN_PAGE = page_path("explain")
COMPARE_PAGE = page_path("compare")
BEST_BACKGROUND = "background-color: rgba(44, 160, 44, 0.22)"


def _stamp(run_path: Path, split: str) -> tuple[int, ...]:
    """Changes whenever the store's files do (a job still writing it, or resumed): the cache key of its frames."""
    folder = run_path / "attributions" / split
    stamp: list[int] = []
    for p in sorted(folder.glob("*")) if folder.is_dir() else []:
        if p.is_file():
            st_ = p.stat()
            stamp += [st_.st_mtime_ns, st_.st_size]
    return tuple(stamp)


@st.cache_data(max_entries=8, show_spinner="Reading the attribution store…")
def load_store(run_path: str, split: str, stamp: tuple[int, ...]) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """(manifest, samples, metrics) of a run's store for `split` (`stamp` only keys the cache)."""
    from xaidash.explainers.dataset.store import open_store

    store = open_store(Path(run_path), split)
    if store is None:
        raise FileNotFoundError(f"no attribution store for the {split} split under {run_path}")
    return dict(store.manifest), store.samples(), store.metrics()


def store_frames(run: Run, split: str) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    return load_store(str(run.path), split, _stamp(run.path, split))


def method_labels(bundle: ModelBundle, methods: Sequence[str]) -> dict[str, str]:
    from xaidash.explainers import list_methods

    known = {m.id: m.label for m in list_methods(bundle.modality)}
    return {m: known.get(m, m) for m in methods}


def how_to(run: Run, bundle: ModelBundle) -> None:
    """No store yet: what the report would show and the command that makes one."""
    from xaidash.explainers import featured_methods, methods_for

    usable = [m.id for m in methods_for(bundle)]
    methods = featured_methods(bundle.modality, among=usable, limit=3) or usable[:2]
    st.info(
        "This run has no attribution store yet. Explain every sample of its test split once, from a terminal; "
        "the report (each method's metrics over all samples, per class, their distributions, and a table of the "
        "samples that opens any of them here with its stored maps) then reads it without recomputing anything.",
        icon=":material/dataset:",
    )
    st.code(R.explain_command(run.id, "test", methods), language="bash", wrap_lines=True)
    st.caption(
        "`--input dataset:START:STOP` explains a range, `--split train` the training split, `--engine ray` spreads "
        "the work over Ray workers; a job that is stopped resumes where it ended when run again."
    )


def split_size(bundle: ModelBundle, split: str) -> int | None:
    """How many samples the run's data set has in `split` (None when it cannot be loaded here)."""
    from xaidash.dashboard import services

    try:
        return len(services.dataset_split(bundle.info.name, split))
    except Exception:  # noqa: BLE001 - only used to write 'dataset:all' instead of a range
        return None


def _header(run: Run, manifest: Mapping[str, Any], samples: pd.DataFrame, size: int | None) -> None:
    done, total = int(manifest.get("n_done", len(samples))), int(manifest.get("n_total", len(samples)))
    c = st.columns(5)
    c[0].metric(f"Samples explained of {total:,}", f"{done:,}")
    c[1].metric("Accuracy on them", f"{samples['correct'].mean():.1%}" if len(samples) else "–")
    c[2].metric("Mean loss", fmt_number(float(samples["loss"].mean())) if len(samples) else "–")
    c[3].metric("Methods", len(manifest.get("methods") or []))
    rate = manifest.get("samples_per_s")
    c[4].metric("Samples per second", f"{float(rate):.1f}" if rate else "–", help="the job's throughput")
    facts = R.store_facts(manifest)
    st.caption(" · ".join(f"{k}: **{v}**" for k, v in facts) + f" · `--input {R.input_spec(manifest, size)}`")
    if not manifest.get("complete"):
        st.warning(
            f"Incomplete: {done:,} of {total:,} samples are stored (the job was stopped, or is still running); "
            "the report covers those. Resume with the command below: finished chunks are not recomputed.",
            icon=":material/pending:",
        )
        st.code(R.resume_command(run.id, manifest, size), language="bash", wrap_lines=True)


NA_REASONS = {
    "completeness_gap": "n/a: no declared total",
    "pointing_game": "n/a: no object masks",
    "energy_in_mask": "n/a: no object masks",
    "rationale_pointing": "n/a: no rationales",
    "rationale_energy": "n/a: no rationales",
}


def summary_table(summary: pd.DataFrame, methods: Sequence[str], names: Sequence[str], labels: Mapping[str, str]):
    """Metrics as rows ('<title> ↑/↓'), one column per method: 'mean ± 95% CI · sd', ★ and green on each row's
    best mean; 'n/a: <why>' where a metric does not apply to a method."""
    best = R.best_methods(summary)
    rows: dict[str, list[str]] = {}
    styles: dict[str, list[str]] = {}
    for c in names:
        head = f"{R.metric_title(c)} {'↓' if R.metric_better(c).startswith('lower') else '↑'}"
        cells, marks = [], []
        for m in methods:
            hit = summary[(summary.method == m) & (summary.metric == c)]
            row = hit.iloc[0] if len(hit) else None
            if row is None or not math.isfinite(float(row["mean"])):
                cells.append(NA_REASONS.get(c, "n/a"))
                marks.append("")
                continue
            cell = fmt_number(float(row["mean"]))
            if math.isfinite(float(row["low"])):
                cell += f" ± {fmt_number((float(row['high']) - float(row['low'])) / 2)}"
            if math.isfinite(float(row["std"])):
                cell += f" · sd {fmt_number(float(row['std']))}"
            if int(row["valid"]) < int(row["n"]):
                cell += f" (of {int(row['valid'])})"
            is_best = m in best.get(c, ())
            cells.append(f"★ {cell}" if is_best else cell)
            marks.append(BEST_BACKGROUND if is_best else "")
        rows[head], styles[head] = cells, marks
    columns = [labels.get(m, m) for m in methods]
    index = pd.Index(list(rows), name="metric")
    t = pd.DataFrame(list(rows.values()), index=index, columns=columns)
    style = pd.DataFrame(list(styles.values()), index=index, columns=columns)
    return t.style.apply(lambda _: style, axis=None)


def _colour(order: Sequence[str], legend: bool = False) -> alt.Color:
    return alt.Color(
        "method:N",
        scale=alt.Scale(domain=list(order), scheme="tableau10"),
        legend=alt.Legend(title="method", orient="bottom") if legend else None,
    )


def class_heatmap(frame: pd.DataFrame, metric: str, labels: Mapping[str, str], classes: Sequence[str]) -> alt.Chart:
    """True class × method, coloured by the mean of `metric` (the better end bright), values written in."""
    df = frame.assign(method=[labels.get(m, m) for m in frame["method"]])
    order = list(dict.fromkeys(df["method"]))
    lower = R.metric_better(metric).startswith("lower")
    finite = df["mean"].dropna()
    mid = float(finite.mean()) if len(finite) else 0.0
    base = alt.Chart(df).encode(
        x=alt.X("method:N", sort=order, title="method", axis=alt.Axis(labelAngle=0, labelLimit=160)),
        y=alt.Y("class:N", sort=[c for c in classes if c in set(df["class"])], title="true class"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "mean:Q",
            scale=alt.Scale(scheme="viridis", reverse=lower),
            title=f"mean {R.metric_title(metric)} ({R.metric_better(metric)}: bright = better)",
            legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=260, titleLimit=420),
        ),
        tooltip=[
            "class",
            "method",
            alt.Tooltip("mean:Q", format=".3f", title=f"mean {R.metric_title(metric)}"),
            alt.Tooltip("std:Q", format=".3f", title="sd over the samples"),
            alt.Tooltip("n:Q", title="samples"),
        ],
    )
    text = base.mark_text(fontSize=12).encode(
        text=alt.Text("mean:Q", format=".3f"),
        color=alt.condition(
            f"datum.mean {'>' if lower else '<'} {mid}", alt.value("white"), alt.value("black")
        ),  # dark cells (the worse end of viridis) get white text
    )
    step = max(24, min(44, 520 // max(1, len(set(df["class"])))))
    return (rect + text).properties(
        width=alt.Step(min(120, max(80, 360 // max(1, len(order))))),
        height=alt.Step(step),
        title=f"Mean {R.metric_title(metric)} per true class",
    )


def distribution_charts(
    metrics: pd.DataFrame, metric: str, methods: Sequence[str], labels: Mapping[str, str], modality: str
) -> tuple[alt.Chart, alt.Chart] | None:
    """(box plot per method, histogram per method) of `metric` over the stored samples, the histogram's subtitle
    what the metric measures worded for the run's `modality` (`scoring.metric_meaning`); None without values."""
    frame = R.distribution_frame(metrics, metric, methods)
    if frame.empty:
        return None
    frame["method"] = [labels.get(m, m) for m in frame["method"]]
    order = [labels.get(m, m) for m in methods]
    x_title = R.axis_title(metric)
    title = R.metric_title(metric)
    box = (
        alt.Chart(frame)
        .mark_boxplot(extent=1.5, size=18, median={"color": "black"})
        .encode(
            x=alt.X("value:Q", title=x_title),
            y=alt.Y("method:N", sort=order, title=None, axis=alt.Axis(labelLimit=160)),
            color=_colour(order),
        )
        .properties(
            height=alt.Step(34),
            title=alt.TitleParams(
                f"{title} per method", subtitle="box: middle half · line: median · whiskers: 1.5 × IQR · dots: beyond"
            ),
        )
    )
    hist = R.histogram(frame)
    line = (
        alt.Chart(hist)
        .mark_line(interpolate="step-after", strokeWidth=2)
        .encode(
            x=alt.X("start:Q", title=x_title),
            y=alt.Y("count:Q", title="samples per bin"),
            color=_colour(order),
            tooltip=[
                "method",
                alt.Tooltip("start:Q", format=".3f", title="from"),
                alt.Tooltip("end:Q", format=".3f", title="to"),
                alt.Tooltip("count:Q", title="samples"),
                alt.Tooltip("share:Q", format=".1%", title="share of the method's samples"),
            ],
        )
        .properties(
            height=260,
            title=alt.TitleParams(f"{title}: histogram, 30 bins", subtitle=metric_meaning(metric, modality)),
        )
    )
    return box, line


def _sample_columns(table: pd.DataFrame, modality: str) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "index": st.column_config.NumberColumn("index", help="position in its split", format="%d"),
        "label": st.column_config.TextColumn("label", help="true class"),
        "prediction": st.column_config.TextColumn("prediction", help="the model's predicted class"),
        "prob": st.column_config.NumberColumn("prob", format="percent", help="probability of the predicted class"),
        "loss": st.column_config.NumberColumn("loss", format="%.3f", help="cross-entropy of the true class (nats)"),
        "correct": st.column_config.CheckboxColumn("correct", help="predicted class = true class"),
        "disagreement": st.column_config.NumberColumn(
            "disagreement",
            format="%.3f",
            help="1 − mean Spearman rank correlation between the methods' maps: 0 = they rank the "
            f"{unit_words(modality)[1]} alike",
        ),
    }
    for c in table.columns:
        if c not in cfg:
            lower = "deletion" in c
            cfg[c] = st.column_config.NumberColumn(
                c, format="%.3f", help=("lower is better" if lower else "higher is better") + " (area, 0–1)"
            )
    return cfg


def samples_section(
    run: Run,
    split: str,
    samples: pd.DataFrame,
    metrics: pd.DataFrame,
    methods: Sequence[str],
    labels: Mapping[str, str],
    dataset: str,
    classes: Sequence[str],
    modality: str,
) -> None:
    """Sort and filter controls, the table; a row click opens that sample on Explain (stored maps). The class
    filter's key names the data set, so a run of another data set never inherits classes it does not have."""
    table = R.sample_table(samples, metrics, methods, labels)
    c1, c2, c3 = st.columns([2, 3, 2], vertical_alignment="bottom")
    order = c1.selectbox("Sort by", list(R.SORTS), key="dsr_sort", help="ties: data set order")
    chosen = c2.multiselect(
        "Classes (true label)", list(classes), key=f"dsr_classes_{dataset}_{split}", placeholder="all classes"
    )
    which = c3.radio("Show", ["all", "correct", "misclassified"], horizontal=True, key="dsr_which")
    shown = R.sort_samples(R.filter_samples(table, chosen, which), order)  # type: ignore[arg-type]
    st.caption(
        f"{len(shown):,} of {len(table):,} samples. **Click a row** to open that sample on Explain with its stored "
        "maps and metrics (not recomputed). Deletion AUC: lower is better; insertion AUC: higher is better."
    )
    # A new table (and selection) for every order and filter: a selected row never points into another order.
    key = "dsr_table_" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{split}_{order}_{which}_{'-'.join(chosen)}")  # CSS-safe
    event = st.dataframe(
        shown,
        key=key,
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        width="stretch",
        height=420,
        column_config=_sample_columns(shown, modality),
    )
    rows = list(getattr(getattr(event, "selection", None), "rows", None) or [])
    if rows and rows[0] < len(shown):
        index = int(shown.iloc[rows[0]]["index"])
        st.switch_page(EXPLAIN_PAGE, query_params={"run": run.id, STORED_PARAM: f"{split}:{index}"})


def _summary_section(
    samples: pd.DataFrame, metrics: pd.DataFrame, methods: list[str], names: list[str], labels: dict[str, str]
) -> None:
    st.subheader("Metrics over all samples")
    summary = R.method_summary(metrics, methods, names)
    st.dataframe(summary_table(summary, methods, names, labels), width="stretch")
    st.caption(
        f"Mean over the {len(samples):,} stored samples ± half the width of its 95% confidence interval · sd: "
        "standard deviation over the samples (the spread); ★ and green: the best mean per row (↑ higher is "
        'better, ↓ lower is better); "(of k)": only k samples had a value. Runtime: seconds per sample.'
    )


def _class_section(
    samples: pd.DataFrame,
    metrics: pd.DataFrame,
    quality: list[str],
    methods: list[str],
    labels: dict[str, str],
    classes: list[str],
) -> None:
    st.subheader("Per class")
    if not quality:
        return
    metric = st.columns([1, 2])[0].selectbox(
        "Metric", quality, format_func=R.metric_title, key="dsr_class_metric", help="coloured per true class"
    )
    # Side by side when both fit, else the table wraps below the heatmap (never drawn over it).
    with st.container(horizontal=True, gap="large"):
        st.altair_chart(
            class_heatmap(R.per_class(samples, metrics, metric, methods, classes), metric, labels, classes),
            width="content",
        )
        with st.container(width=440):
            st.dataframe(
                R.class_table(samples, classes),
                hide_index=True,
                width="stretch",
                column_config={
                    "accuracy": st.column_config.NumberColumn("accuracy", format="percent"),
                    "mean loss": st.column_config.NumberColumn(
                        "loss", format="%.3f", help="mean cross-entropy of the true class (nats)"
                    ),
                    "mean disagreement": st.column_config.NumberColumn(
                        "disagreement", format="%.3f", help="mean of 1 − mean Spearman ρ between the methods' maps"
                    ),
                },
            )
            st.caption(
                "Per true class: how many samples, how many the model got right, its loss, and how much the "
                "methods disagree."
            )


def _distributions_section(
    metrics: pd.DataFrame, quality: list[str], methods: list[str], labels: dict[str, str], modality: str
) -> None:
    st.subheader("Distributions")
    spread_metrics = [c for c in quality if c not in R.BINARY_METRICS]
    binary = [R.metric_title(c) for c in quality if c in R.BINARY_METRICS]
    st.caption(
        "Each quality metric over every stored sample, one colour per method (the same in every chart); the "
        "runtime is in the table above"
        + (
            f"; {' and '.join(binary)}: a hit (1) or a miss (0) per sample, so its mean (the hit rate) in the table "
            "says it all."
            if binary
            else "."
        )
    )
    for c in spread_metrics:
        charts = distribution_charts(metrics, c, methods, labels, modality)
        if charts is None:
            continue
        for col, chart in zip(st.columns(2), charts, strict=True):
            col.altair_chart(chart, width="stretch")


def dataset_report(run: Run, bundle: ModelBundle) -> None:
    """The whole report, or how to make a store when the run has none."""
    from xaidash.explainers.dataset.store import store_splits

    splits = store_splits(run.path)
    if not splits:
        how_to(run, bundle)
        return
    split = (
        st.segmented_control("Split", splits, default=splits[0], required=True, key="dsr_split")
        if len(splits) > 1
        else splits[0]
    ) or splits[0]
    try:
        manifest, samples, metrics = store_frames(run, split)
    except Exception as err:  # noqa: BLE001 - a damaged store: say so, the rest of the app works
        from xaidash.dashboard.errors import show_error

        show_error(err, f"Could not read the attribution store of the {split} split")
        return
    _header(run, manifest, samples, split_size(bundle, split))
    if samples.empty:
        st.info("No sample is finished yet: the report fills in as the job writes its chunks.")
        return
    methods = [m for m in (manifest.get("methods") or []) if m in set(metrics["method"])]
    labels = method_labels(bundle, methods)
    names = R.metric_names(metrics)
    classes = list(bundle.info.classes)
    quality = [c for c in names if c != "seconds"]
    _summary_section(samples, metrics, methods, names, labels)
    _class_section(samples, metrics, quality, methods, labels, classes)
    _distributions_section(metrics, quality, methods, labels, bundle.modality)
    st.subheader("Samples")
    samples_section(run, split, samples, metrics, methods, labels, bundle.info.name, classes, bundle.modality)
