"""`xaidash concepts`: TCAV for one class of a run; prints a table and, with --out DIR, writes DIR/concepts.json (the
report with every result's fields, the run, the concepts and the parameters: explainers/figures/result_json.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xaidash.data.argtypes import int_range
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.concepts.api import (
    DEFAULT_EXAMPLES,
    DEFAULT_INPUTS,
    DEFAULT_RANDOM_SETS,
    MAX_RANDOM_SETS,
    ConceptReport,
    concept_report,
)
from xaidash.explainers.concepts.sources import MIN_EXAMPLES, sources_help
from xaidash.explainers.figures.result_json import check_result_folder, parameters_of, result_document, write_result
from xaidash.explainers.params import ExplainError

RESULT_JSON = "concepts.json"


def report_table(report: ConceptReport) -> str:
    """The results as a plain-text table, one row per (layer, concept)."""
    head = ("layer", "concept", "TCAV score", "random", "p (Bonferroni)", "CAV acc", "result")
    rows = [
        (
            r.layer,
            r.concept,
            f"{r.mean:.2f} ± {r.std:.2f} ({min(r.scores):.2f}..{max(r.scores):.2f})",
            f"{r.random_mean:.2f} ± {r.random_std:.2f}",
            f"{r.p_adjusted:.2g}",
            f"{r.cav_accuracy:.2f}",
            r.verdict,
        )
        for r in report.results
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in (head, *rows)]
    return "\n".join(lines)


def _concepts(args: argparse.Namespace) -> int:
    from xaidash.models.runs.store import load_bundle, resolve_run, weights_problem

    out = Path(args.out).expanduser() if args.out else None
    if out is not None:
        check_result_folder(out, RESULT_JSON)  # before the CAVs are trained: a bad folder is said at once
    run = resolve_run(args.run)
    if problem := weights_problem(run):
        raise ExplainError(f"{problem} No concepts tested.")
    bundle = load_bundle(run, device=args.device)
    layers = [x.strip() for x in args.layers.split(",") if x.strip()] if args.layers else None

    def progress(fraction: float, text: str) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {text}", file=sys.stderr)

    report = concept_report(
        bundle,
        args.concept,
        args.target,
        layers=layers,
        random_count=args.random_sets,
        examples=args.examples,
        inputs=args.inputs,
        seed=args.seed,
        random_from=args.random,
        inputs_from=args.inputs_from,
        progress=progress,
    )
    print(
        f"TCAV for class {report.target!r} of {report.run}: {report.examples} examples per concept and random set, "
        f"{report.random_sets} random sets, {report.inputs} inputs of the class; "
        f"CAVs: {report.cavs_cached} cached, {report.cavs_trained} trained; {report.seconds:.1f} s"
    )
    print(report_table(report))
    for note in report.notes:
        print(f"note: {note}")
    for r in report.results:
        for flag in r.flags:
            print(f"flag: {r.concept} at {r.layer}: {flag}")
    print(
        "A score is the share of the class's inputs whose class logit grows along the concept's direction; "
        "only significant rows without a flag are findings."
    )
    if out is not None:
        document, files = result_document(
            "concepts",
            report,
            run=report.run,
            inputs={"concepts": list(args.concept), "class": args.target, "inputs_from": args.inputs_from},
            parameters=parameters_of(args, leave_out=("run", "concept", "target", "inputs_from", "quiet")),
        )
        write_result(out, RESULT_JSON, document, files)
        print(f"wrote {out / RESULT_JSON}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "concepts",
        help="TCAV: does a layer use a human concept for a class? (with the significance test)",
        description="Testing with concept activation vectors (TCAV, Kim et al. 2018) through captum.concept: for "
        "each concept and layer, the TCAV score against several random counter-example sets, compared with "
        "random-vs-random scores by a two-sided t-test (Bonferroni over concepts x layers). CAVs are cached "
        "under <run>/concepts/.",
    )
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--concept",
        action="append",
        required=True,
        metavar="KIND:ARG",
        help=f"a concept, repeatable; kinds: {sources_help()}",
    )
    p.add_argument("--class", dest="target", required=True, help="the class to test (name or index)")
    p.add_argument("--layers", help="comma-separated layer names (default: the model's default TCAV layer)")
    p.add_argument(
        "--random-sets",
        type=int_range(2, MAX_RANDOM_SETS),
        default=DEFAULT_RANDOM_SETS,
        help=f"random counter-example sets (default {DEFAULT_RANDOM_SETS}; one more is drawn as the random reference)",
    )
    p.add_argument(
        "--examples",
        type=int_range(MIN_EXAMPLES),
        default=DEFAULT_EXAMPLES,
        help=f"examples per concept and per random set (default {DEFAULT_EXAMPLES}, at least {MIN_EXAMPLES})",
    )
    p.add_argument(
        "--inputs", type=int_range(1), default=DEFAULT_INPUTS, help="test inputs of the class to score (default 100)"
    )
    p.add_argument(
        "--random", help="draw random sets from this concept source (e.g. folder:PATH) instead of the run's data"
    )
    p.add_argument("--inputs-from", help="the class's inputs from this concept source instead of the test split")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--out",
        metavar="DIR",
        help=f"write {RESULT_JSON} into this folder (created): every result with its scores, the run and the parameters",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=lambda args: one_line_errors(_concepts, args))
