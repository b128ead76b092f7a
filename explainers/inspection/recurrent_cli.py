"""`xaidash recurrent`: inside a run's GRU/LSTM for one series, written to a folder (the Recurrent page's content).

--out DIR receives `recurrent.json` (the run, the series, the prediction, the layer kind and sizes, the largest
difference between the recomputed and torch's hidden states, the PCA's explained variance and every series' PC
coordinates), `arrays/hidden_l{K}.npy` (T, H) and `arrays/{gate}_l{K}.npy` (T, H) per layer (and `cell_l{K}.npy`
for an LSTM), and the charts as Vega-Lite specs `charts/*.vl.json` (open them in any Vega viewer).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from xaidash.explainers.params import ExplainError


def _class_series(bundle: Any) -> list[tuple[str, Any]]:
    """The first test series of every class, as (name, raw) (none without the model's data set)."""
    from xaidash.data.registry import load_split
    from xaidash.explainers.inspection.recurrent import first_per_class

    if bundle.no_dataset_reason("the test series") is not None:
        return []
    return first_per_class(load_split(bundle.info.name, "test"), bundle.info.classes)


def _write_arrays(out: Path, trace: Any) -> None:
    arrays = out / "arrays"
    arrays.mkdir(exist_ok=True)
    for k, layer in enumerate(trace.layers):
        np.save(arrays / f"hidden_l{k + 1}.npy", layer.hidden)
        if layer.cell is not None:
            np.save(arrays / f"cell_l{k + 1}.npy", layer.cell)
        for gate, values in layer.gates.items():
            np.save(arrays / f"{gate.replace(' ', '_')}_l{k + 1}.npy", values)


def _write_charts(out: Path, bundle: Any, raw: Any, trace: Any, traj: Any, layer: int) -> list[str]:
    from xaidash.explainers.inspection.recurrent_charts import gate_chart, series_chart, trajectory_chart

    charts = out / "charts"
    charts.mkdir(exist_ok=True)
    step = bundle.info.step_name
    drawn = {
        "series": series_chart(raw.reshape(raw.shape[-2:]).numpy(), bundle.info.channel_names, step),
        "trajectory": trajectory_chart(traj, step),
    }
    for gate in trace.gate_names:
        drawn[f"gate_{gate.replace(' ', '_')}_l{layer + 1}"] = gate_chart(trace, layer, gate, step)
    for name, chart in drawn.items():
        (charts / f"{name}.vl.json").write_text(chart.to_json())
    return [f"charts/{n}.vl.json" for n in drawn]


def _recurrent(args: argparse.Namespace) -> int:
    from xaidash.explainers.cli import _open_run
    from xaidash.explainers.figures.result_json import make_out_folder
    from xaidash.explainers.inputs import resolve_sample
    from xaidash.explainers.inspection.recurrent import bundle_trace, recurrent_reason, series_tensor, trajectories

    run, bundle = _open_run(args)
    if reason := recurrent_reason(bundle):
        raise ExplainError(reason)
    sample = resolve_sample(args.input, bundle)
    raw = series_tensor(sample.raw)
    trace = bundle_trace(bundle, raw)
    if args.layer and not 1 <= args.layer <= len(trace.layers):
        raise ExplainError(
            f"--layer {args.layer}: the recurrent module has {len(trace.layers)} layer(s): give 1 to {len(trace.layers)}."
        )
    layer = (args.layer or len(trace.layers)) - 1
    named = [(sample.description, trace)]
    if args.per_class:
        named += [(n, bundle_trace(bundle, r)) for n, r in _class_series(bundle)]
    traj = trajectories([t for _, t in named], layer, labels=[n for n, _ in named])
    out = Path(args.out).expanduser()
    make_out_folder(out)
    _write_arrays(out, trace)
    charts = _write_charts(out, bundle, raw, trace, traj, layer)
    proba = bundle.predict_proba(bundle.prepare(raw.reshape(1, *raw.shape[-2:])))[0]
    summary = {
        "run": run.id,
        "series": sample.description,
        "true_class": None if sample.label is None else bundle.info.classes[int(sample.label)],
        "predicted": bundle.info.classes[int(proba.argmax())],
        "probability": float(proba.max()),
        "kind": trace.kind,
        "module": trace.path,
        "layers": len(trace.layers),
        "units": trace.units,
        "steps": trace.steps,
        "gates": list(trace.gate_names),
        "max_abs_difference_from_torch": trace.error,
        "pca": {
            "layer": layer + 1,
            "explained_variance_ratio": [float(v) for v in traj.explained],
            "series": [{"name": n, "points": p.tolist()} for n, p in zip(traj.labels, traj.points, strict=True)],
        },
        "charts": charts,
    }
    (out / "recurrent.json").write_text(json.dumps(summary, indent=1))
    ev = traj.explained
    print(
        f"{trace.kind} {trace.path}: {len(trace.layers)} layer(s) x {trace.units} units over {trace.steps} steps; "
        f"PC1+PC2 explain {100 * ev[:2].sum():.1f}% of layer {layer + 1}'s hidden states over {len(named)} series; "
        f"written to {out}"
    )
    return 0


def _cmd_recurrent(args: argparse.Namespace) -> int:
    from xaidash.explainers.cli import one_line_errors

    return one_line_errors(_recurrent, args)


def add_commands(sub: argparse._SubParsersAction) -> None:
    from xaidash.models.device import device_arg

    p = sub.add_parser(
        "recurrent",
        help="inside a GRU/LSTM run for one series: hidden states over time (PCA) and gate activations",
        description="Recomputes every gate of the run's recurrent layer for one series (checked against torch's own "
        "hidden states) and writes recurrent.json, the arrays (arrays/*.npy) and the charts (charts/*.vl.json, "
        "Vega-Lite) into --out.",
    )
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--input",
        required=True,
        help="dataset:INDEX or dataset:train:INDEX (the test split by default), or the series' values as the "
        "explain command reads them",
    )
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--layer", type=int, default=0, help="layer of the PCA and the gate charts, 1.. (default: last)")
    p.add_argument(
        "--per-class",
        action="store_true",
        help="also project the first test series of every class on the same principal components",
    )
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument("--force", action="store_true", help="look inside a run whose training failed (NaN weights)")
    p.set_defaults(func=_cmd_recurrent)
