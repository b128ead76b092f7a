"""`xaidash global`: the global view of a table model. Prints the permutation importances with their intervals, the
partial dependence ranges, the surrogate tree's fidelity and rules and the glassbox models beside the network; with
--out DIR writes the ICE/PDP/importance figures (PNG) and global.json with their values
(explainers/figures/result_json.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xaidash.data.argtypes import int_range
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.figures.result_json import check_result_folder, parameters_of, result_document, write_result
from xaidash.explainers.params import ExplainError
from xaidash.explainers.tabular.api import DEFAULT_ROWS, DEFAULT_TOP, PAIR_POINTS, GlobalOptions, GlobalReport
from xaidash.explainers.tabular.grids import DEFAULT_POINTS, GRID_KINDS
from xaidash.explainers.tabular.importance import ALL_SCORINGS, DEFAULT_REPEATS, NAMES
from xaidash.explainers.tabular.shap_global import DEFAULT_METHOD, DEFAULT_SHAP_ROWS
from xaidash.explainers.tabular.surrogate import DEFAULT_DEPTH, MAX_DEPTH

RESULT_JSON = "global.json"
LISTED = 15  # importance rows printed


def _names(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",")] if text else None


def summary(report: GlobalReport) -> str:
    """The report as compact text: importances, partial dependence ranges, glassboxes, surrogate and its rules."""
    imp = report.importance
    what = f"class {report.target!r}" if report.task == "classes" else f"the predicted {report.target}"
    lines = [
        f"Global view of {report.model} on {report.dataset}: {report.rows} held-out rows, {what}, on {report.device}",
        f"Permutation importance ({imp.units}; baseline {NAMES[imp.scoring]} {imp.baseline:.3f}; mean of "
        f"{imp.repeats} shuffles and its 95 % interval):",
    ]
    ranked = imp.ranked()
    width = max(len(c.column) for c in ranked)
    lines += [f"  {c.column:<{width}}  {c.mean:+.4f}  [{c.low:+.4f}, {c.high:+.4f}]" for c in ranked[:LISTED]]
    if len(ranked) > LISTED:
        lines.append(f"  ... {len(ranked) - LISTED} more columns (all of them in {RESULT_JSON})")
    lines.append(f"Partial dependence ({report.units}), the mean prediction's range over each column's grid:")
    lines += [
        f"  {d.column}: {d.pdp.min():.3f} .. {d.pdp.max():.3f} over {len(d.grid)} values" for d in report.dependence
    ]
    if report.pair is not None:
        p = report.pair
        lines.append(f"  pair {p.columns[0]} x {p.columns[1]}: {p.pdp.min():.3f} .. {p.pdp.max():.3f}")
    box = report.glassbox
    lines.append(f"Test {box.score_name} on {box.test_rows} rows: network {box.network_accuracy:.3f}")
    for m in box.models:
        rho = "n/a (constant importances)" if m.spearman is None else f"{m.spearman:+.2f}"
        lines.append(
            f"  {m.name}: {m.accuracy:.3f} (network gains {box.network_accuracy - m.accuracy:+.3f}); Spearman of its "
            f"importances with the network's: {rho}"
        )
    s = report.surrogate
    lines.append(
        f"Surrogate tree (depth {s.depth}, fitted to the network's predictions on {s.fitted_rows} training rows): "
        f"{s.fidelity_text()}"
    )
    lines += [f"  {line}" for line in s.rules.rstrip().splitlines()]
    if report.shap is not None:
        g = report.shap
        lines.append(f"Global {g.method} over {g.rows} rows, mean |attribution| ({g.units}):")
        lines += [f"  {name:<{width}}  {value:.4f}" for name, value in g.ranked()[:LISTED]]
        lines += [f"  {d.column}: interacts most with {d.colour_by}" for d in g.dependence if d.colour_by]
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> GlobalOptions:
    return GlobalOptions(
        columns=_names(args.columns),
        pair=_names(args.pair),
        target=args.target,
        rows=args.rows,
        top=args.top,
        grid_points=args.grid,
        grid_kind=args.grid_kind,
        pair_points=args.pair_grid,
        repeats=args.repeats,
        scoring=args.scoring,
        surrogate_depth=args.depth,
        seed=args.seed,
        shap_rows=args.shap_rows,
        shap_method=args.shap_method,
    )


def _global(args: argparse.Namespace) -> int:
    from xaidash.explainers.tabular.api import global_report
    from xaidash.explainers.tabular.report_figures import figure_files
    from xaidash.models.runs.store import load_bundle, resolve_run, weights_problem

    out = Path(args.out).expanduser() if args.out else None
    if out is not None:
        check_result_folder(out, RESULT_JSON)  # a bad folder is said before any work
    options = _options(args)
    run = resolve_run(args.run)
    if problem := weights_problem(run):
        raise ExplainError(f"{problem} No global view computed.")
    bundle = load_bundle(run, device=args.device)

    def progress(fraction: float, text: str) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {text}", file=sys.stderr)

    report = global_report(bundle, options, progress)
    print(summary(report))
    if out is not None:
        document, files = result_document(
            "global",
            report,
            run=run.id,
            inputs={"split": "test", "rows": report.rows},
            parameters=parameters_of(args, leave_out=("run", "quiet", "out")),
        )
        figures = figure_files(report)
        write_result(out, RESULT_JSON, {**document, "figures": sorted(figures)}, {**files, **figures})
        print(f"wrote {out / RESULT_JSON} and {len(figures)} figures")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "global",
        help="the global view of a table model: partial dependence and ICE, permutation importance, surrogate tree",
        description="Permutation importance of every column (with 95 %% intervals), partial dependence and ICE of "
        "the chosen columns (default: the most important) and of a pair, a surrogate decision tree fitted to the "
        "network's predictions with its fidelity, and logistic regression and a decision tree trained on the same "
        "split beside the network. A model that predicts a number: values in the target's units, importance as the "
        "drop in R², a regression tree whose fidelity is its R² against the network's predictions, ridge regression "
        "and a regression tree beside the network (test R²). Rows: the held-out (test) split.",
    )
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument("--columns", help=f"comma-separated columns to plot (default: the {DEFAULT_TOP} most important)")
    p.add_argument("--pair", metavar="A,B", help="two columns for a 2-D partial dependence map")
    p.add_argument(
        "--target",
        help="the class (name or index; default: the second of two classes, else the first); a model that predicts a "
        "number has one target",
    )
    p.add_argument(
        "--rows", type=int_range(1), default=DEFAULT_ROWS, help=f"held-out rows used (default {DEFAULT_ROWS})"
    )
    p.add_argument("--top", type=int_range(1), default=DEFAULT_TOP, help="columns plotted when --columns is not given")
    p.add_argument("--grid", type=int_range(2), default=DEFAULT_POINTS, help="grid points per column (default 50)")
    p.add_argument(
        "--grid-kind",
        choices=GRID_KINDS,
        default="even",
        help="numeric grid: even over the training range or the rows' quantiles",
    )
    p.add_argument(
        "--pair-grid",
        type=int_range(2),
        default=PAIR_POINTS,
        help=f"grid points per column of the pair's map (default {PAIR_POINTS})",
    )
    p.add_argument("--repeats", type=int_range(1), default=DEFAULT_REPEATS, help="shuffles per column (default 10)")
    p.add_argument(
        "--scoring",
        choices=ALL_SCORINGS,
        default=None,
        help="what permutation importance measures: for a classifier the rise in log-loss of the true class (its "
        "default) or the drop in accuracy; for a model that predicts a number the drop in R² (r2, its default)",
    )
    p.add_argument(
        "--depth", type=int_range(1, MAX_DEPTH), default=DEFAULT_DEPTH, help="surrogate tree depth (default 3)"
    )
    p.add_argument(
        "--shap-rows",
        type=int_range(0),
        default=DEFAULT_SHAP_ROWS,
        help=f"rows explained for global SHAP (mean |SHAP| and dependence plots; default {DEFAULT_SHAP_ROWS}, 0: none)",
    )
    p.add_argument(
        "--shap-method", default=DEFAULT_METHOD, help=f"the table method global SHAP sums up (default {DEFAULT_METHOD})"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", metavar="DIR", help=f"write the figures and {RESULT_JSON} into this folder (created)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=lambda args: one_line_errors(_global, args))
