"""`xaidash scenes compare`: the chosen scene methods over a sample of test scenes, each map scored against the true
objects, printed as one table (per method and metric the mean and its 95% interval) with the methods' agreement;
with --json FILE the whole comparison (every target's values) as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from xaidash.data.argtypes import float_range, int_range
from xaidash.data.errors import ExplainError
from xaidash.data.formatting import fmt_number
from xaidash.data.scenes.registry import load_scene_set
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.scenes.api import DEFAULT_MIN_SCORE
from xaidash.explainers.scenes.cli import checked_params, chosen_methods
from xaidash.explainers.scenes.compare import DEFAULT_SCENES, SceneComparison, compare_scene_methods, sample_indices
from xaidash.explainers.scenes.metrics import SCENE_METRICS
from xaidash.explainers.scenes.registry import get_scene_method
from xaidash.models.scenes.loading import load_scene_run


def comparison_text(result: SceneComparison) -> str:
    """One line per method: each metric's mean [95% interval]; then the best per metric and the agreement."""
    scored = [m for m in SCENE_METRICS if any(m.id in v for rows in result.values.values() for v in rows)]
    lines = [f"{len(result.targets)} target(s) on {len(result.scenes)} test scene(s)"]
    if result.task == "detect":
        lines[0] += f"; {result.false_detections} false detection(s) and {result.missed} missed object(s) not scored"
    rows = result.summary.set_index(["method", "metric"])
    width = max(len(get_scene_method(m).label) for m in result.methods)
    lines.append(" " * (width + 2) + "  ".join(f"{m.title:<24}" for m in scored))
    for method in result.methods:
        cells = []
        for metric in scored:
            if (method, metric.id) not in rows.index:
                cells.append(f"{'n/a':<24}")
                continue
            r = rows.loc[(method, metric.id)]
            cells.append(f"{fmt_number(r['mean'])} [{fmt_number(r['low'])}, {fmt_number(r['high'])}]".ljust(24))
        lines.append(f"{get_scene_method(method).label:<{width}}  " + "  ".join(cells))
    for metric in scored:
        if metric.id in result.best:
            names = ", ".join(get_scene_method(m).label for m in result.best[metric.id])
            lines.append(f"best {metric.title} ({metric.better}): {names}")
    if result.agreement is not None:
        lines.append("agreement (mean Spearman correlation of |map| per target):")
        for a in result.methods:
            row = "  ".join(f"{fmt_number(result.agreement.loc[a, b]):>6}" for b in result.methods)
            lines.append(f"  {get_scene_method(a).label:<{width}}  {row}")
    lines.extend(f"{get_scene_method(m).label} failed: {why}" for m, why in result.errors.items())
    return "\n".join(lines)


def _scenes_compare(args: argparse.Namespace) -> int:
    if args.json and Path(args.json).expanduser().is_dir():
        raise ExplainError(f"--json {args.json} is a folder: give a file name.")
    bundle = load_scene_run(args.run, device=args.device)
    if bundle.dataset is None:
        raise ExplainError("The run names no data set, so it has no test scenes to compare methods on.")
    methods = chosen_methods(bundle, args.methods)
    params = checked_params(methods, args.param, bundle)
    split = load_scene_set(bundle.dataset, "test")
    indices = sample_indices(args.scenes, len(split), args.seed)

    def progress(fraction: float, text: str) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {text}", file=sys.stderr)

    result = compare_scene_methods(
        bundle, split, indices, [m.id for m in methods], params, curves=args.curves, min_score=args.min_score,
        progress=progress, batch_size=args.batch_size,
    )  # fmt: skip
    run_id = bundle.run.id if bundle.run is not None else str(args.run)
    print(f"{run_id} on {bundle.dataset}: {len(methods)} method(s)")
    print(comparison_text(result))
    if args.json:
        path = Path(args.json).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run": run_id, "dataset": bundle.dataset} | result.to_json(), indent=1))
        print(f"wrote {path}")
    return 1 if len(result.errors) == len(result.methods) else 0


def add_compare_command(sub: argparse._SubParsersAction) -> None:
    """`compare` in the `xaidash scenes` group."""
    p = sub.add_parser(
        "compare",
        help="compare scene methods over test scenes: metrics against the true objects with 95%% intervals",
        description="Explains every true object the model finds on a sample of test scenes (a detector's matching "
        "boxes, a segmenter's class regions) with each chosen method; prints per method the mean pointing game, "
        "energy inside the object and share on other objects (with --curves also deletion and insertion AUC), each "
        "with its 95%% interval, the best method per metric and how much the methods' maps agree.",
    )
    p.add_argument("--run", required=True, help="a scene model's run id (xaidash runs), run folder, or 'latest'")
    p.add_argument("--methods", help="comma-separated method ids (default: the task's featured ones)")
    p.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="a method's parameter, repeatable")
    p.add_argument(
        "--scenes", type=int_range(1), default=DEFAULT_SCENES, help=f"test scenes (default {DEFAULT_SCENES})"
    )
    p.add_argument("--seed", type=int, default=None, help="draw the scenes at random with this seed (default: first)")
    p.add_argument("--curves", action="store_true", help="also deletion/insertion AUC (2 x 17 passes per map)")
    p.add_argument(
        "--min-score",
        type=float_range(0.0, 1.0),
        default=DEFAULT_MIN_SCORE,
        help=f"a detector's boxes scoring at least this are explained (default {DEFAULT_MIN_SCORE})",
    )
    p.add_argument("--json", metavar="FILE", help="write the comparison, every target's values, as JSON")
    p.add_argument("--batch-size", type=int_range(1), default=32, help="images per model pass (halved on OOM)")
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=lambda args: one_line_errors(_scenes_compare, args))
