"""`xaidash explain` (attributions + metrics for one input, written to a folder) and `xaidash methods`.

Output of `explain --out DIR` for one input: the explain report (explainers/figures/report.py,
docs/report-format.md): `report.json`, `inputs/input_00.png` (images: the input as the model saw it),
`maps/input_00_<method>.png` (each map with its colour bar; `.html` with the highlighted words for text) and
`attributions/input_00_<method>.npy` (images: the (H, W) attribution). `--report FILE.html` also writes the
report as one self-contained HTML page. A method that fails or does not apply is reported in report.json and
on stderr; the others go on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from xaidash.data.argtypes import float_range, int_range
from xaidash.data.modalities import GroundTruth
from xaidash.explainers.dataset.explain import DEFAULT_CHUNK, ENGINES, parse_dataset_range
from xaidash.explainers.figures.predictions import prediction_text, verdict_text
from xaidash.explainers.figures.report import ExplainReport, MethodSetting, ReportSettings, session_report
from xaidash.explainers.figures.result_json import check_out_folder, make_out_folder
from xaidash.explainers.figures.scales import SCALE_MODES
from xaidash.explainers.inputs import ResolvedInput, resolve_sample
from xaidash.explainers.modalities import ADAPTERS, adapter_of
from xaidash.explainers.modalities.image_files import FITS
from xaidash.explainers.params import MAX_BATCH_SIZE, ExplainError, parse_params
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.registry import MethodSpec, get_method, list_methods, methods_for
from xaidash.explainers.samples import DEFAULT_BACKGROUND, background_samples, default_background
from xaidash.explainers.session import MethodResult, Outcome, Scoring, explain_session
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import device_arg
from xaidash.models.runs.store import Run

# --display: the displays of every modality that offers a choice (each model's own default when not given)
DISPLAYS = tuple(dict.fromkeys(d for a in ADAPTERS for d in a.displays if len(a.displays) > 1))


def _target(spec: str | None, bundle: ModelBundle) -> int | None:
    if spec is None:
        return None
    classes = list(bundle.info.classes)
    if spec in classes:
        return classes.index(spec)
    try:
        k = int(spec)
    except ValueError:
        raise ExplainError(f"--target {spec!r}: give a class index 0..{len(classes) - 1} or a class name.") from None
    if not 0 <= k < len(classes):
        raise ExplainError(f"--target {k} is out of range: the model has classes 0..{len(classes) - 1}.")
    return k


def _probabilities(bundle: ModelBundle, raw: Any) -> Any:
    """The class probabilities of one input, (classes,) as NumPy."""
    return bundle.predict_proba(bundle.adapter.as_batch(raw))[0].numpy()


def _ood(bundle: ModelBundle, raw: Any) -> tuple[Any, str | None]:
    """(each input's out-of-distribution score, None) or (None, why there are none): a hint, never an error."""
    reason = bundle.no_dataset_reason("the out-of-distribution check")
    if reason:
        return None, reason
    from xaidash.explainers.inspection import ood

    try:
        return ood.score(bundle, ood.reference(bundle), raw), None
    except Exception as err:  # noqa: BLE001 - a hint only: the explanations are still written
        return None, f"Out-of-distribution check not available: {err}"


def _write_html(report: Any, path: str) -> bool:
    """The HTML report at `path`; a path that cannot be written is one line on stderr (False), no traceback."""
    from xaidash.data.atomic import atomic_write_bytes

    target = Path(path).expanduser()
    try:
        if target.is_dir():
            raise IsADirectoryError("it is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, report.to_html().encode("utf-8"))
    except OSError as err:
        why = err.strerror or str(err)
        print(f"error: cannot write the HTML report to {target}: {why}", file=sys.stderr)
        return False
    return True


def _needs_background(spec: MethodSpec, bundle: ModelBundle, params: dict[str, Any]) -> bool:
    """Whether the method with these (unchecked) params compares against background samples; a bad
    parameter is reported when the method runs, so it counts as no."""
    try:
        return spec.needs_background(spec.resolve_for(bundle, params))
    except ExplainError:
        return False


def _background(bundle: ModelBundle, size: int, needed: bool) -> tuple[torch.Tensor | None, str]:
    """(the background to pass `explain`, a note for the report). For the default size that is None:
    `explain` then uses its own default set, the same images the dashboard uses."""
    if not needed:
        return None, "none"
    if size == DEFAULT_BACKGROUND:
        given, used = None, default_background(bundle)
    else:
        given = used = background_samples(bundle, size)
    note = "stand-in (the training split cannot be loaded)" if used is None else f"{len(used)} training images"
    return given, note


def one_line_errors(work: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`work(args)`, or exit code 2 with the one line a user can act on (a data set, model or explanation error)."""
    from xaidash.data.errors import DatasetError
    from xaidash.models.registry import ModelError

    try:
        return work(args)
    except (ExplainError, ModelError, DatasetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _cmd_explain(args: argparse.Namespace) -> int:
    return one_line_errors(_explain, args)


def _explain(args: argparse.Namespace) -> int:
    run, bundle = _open_run(args)
    span = parse_dataset_range(args.input)
    if span is None and args.out is None:
        raise ExplainError(
            "--out DIR is required for a single input (dataset:all and dataset:START:STOP write under the run)."
        )
    chosen = _chosen_methods(args.methods, bundle)
    params = parse_params(args.param, chosen)
    if span is not None:
        return _explain_dataset(args, run.path, bundle, span, chosen, params)
    if args.split is not None:
        raise ExplainError("--split applies to dataset:all and dataset:START:STOP; one sample is dataset:train:INDEX.")
    return _explain_one(args, run.id, bundle, chosen, params)


def _open_run(args: argparse.Namespace) -> tuple[Run, ModelBundle]:
    """The run named by --run and its model, refused (unless --force) when its training failed or its weights
    hold NaN; a bad --out is said before the model is loaded."""
    from xaidash.models.runs.store import load_bundle, resolve_run, weights_problem

    if args.out is not None:
        check_out_folder(Path(args.out).expanduser())  # before a model is loaded: a bad --out is said at once
    run = resolve_run(args.run)
    if problem := weights_problem(run):  # a failed run or NaN weights: its maps are noise (issue 15)
        if not args.force:
            raise ExplainError(f"{problem} Not explained; add --force to look anyway.")
        print(f"warning: {problem} Explained anyway (--force).", file=sys.stderr)
    return run, load_bundle(run, device=args.device)


def _explain_one(
    args: argparse.Namespace,
    run_id: str,
    bundle: ModelBundle,
    chosen: list[MethodSpec],
    params: dict[str, dict[str, Any]],
) -> int:
    """One input: every chosen method as one session, the report written into --out (and --report)."""
    sample = resolve_sample(args.input, bundle, fit=args.fit)
    target = _target(args.target, bundle)
    out = Path(args.out).expanduser()
    make_out_folder(out)

    probs = _probabilities(bundle, sample.raw)
    needed = any(_needs_background(spec, bundle, params.get(spec.id, {})) for spec in chosen)
    background, background_note = _background(bundle, args.background, needed)
    batch = bundle.adapter.as_batch(sample.raw)
    truth = GroundTruth(
        masks=None if sample.mask is None else sample.mask[None],
        rationales=[sample.rationale] if sample.rationale else None,
    )
    results = explain_session(
        bundle,
        batch,
        {spec.id: params.get(spec.id, {}) for spec in chosen},
        target=target,
        scoring=Scoring(page="explain" if args.metrics else None, truth=truth, steps=args.steps),
        background=background,
        batch_size=args.batch_size,
        seed=args.seed,
        done=_say_done,
        label={spec.id: spec.label for spec in chosen}.__getitem__,
    )
    resolved = {r.method: r.explanation.params for r in results if r.explanation is not None}
    settings = ReportSettings(
        methods=[MethodSetting(s.id, s.label, resolved.get(s.id, params.get(s.id, {}))) for s in chosen],
        target=target,
        target_name="predicted class" if target is None else list(bundle.info.classes)[target],
        scale_mode=args.scale,
        display=adapter_of(bundle.modality).display(args.display),
        metrics=bool(args.metrics),
        steps=args.steps if args.metrics else None,
        seed=args.seed,
        background=background_note,
        extra={"input": sample.description, "batch size": str(args.batch_size)},
    )
    report = _report(bundle, run_id, sample, batch, probs, results, settings)
    return _write(args, report, out, sample.description, sum(r.explanation is not None for r in results), len(chosen))


def _report(
    bundle: ModelBundle,
    run_id: str,
    sample: ResolvedInput,
    batch: Any,
    probs: Any,
    results: list[MethodResult],
    settings: ReportSettings,
) -> ExplainReport:
    """The explain report of one input, with its out-of-distribution hint and how much of a text was read (both
    notes, the coverage also said on stderr)."""
    ood_scores, ood_note = _ood(bundle, batch)
    coverage_note = sample.coverage.sentence() if sample.coverage is not None else ""
    if coverage_note:
        print(f"note: {coverage_note}", file=sys.stderr)
    return session_report(
        bundle,
        run_id,
        [(sample.description, sample.raw, sample.label)],
        probs[None],
        results,
        settings,
        ood=ood_scores,
        notes=[n for n in (ood_note, coverage_note) if n],
        source="xaidash explain",
    )


def _write(args: argparse.Namespace, report: ExplainReport, out: Path, description: str, ok: int, chosen: int) -> int:
    """The report into --out (and --report), each map's completeness finding on stderr and one summary line; exit
    code 1 when no method succeeded or the HTML page could not be written."""
    for e in report.for_input(0):  # what a method's own completeness check found, as the map's caption says it
        if e.figure is not None and e.figure.caption.completeness:
            print(f"{e.method}: {e.figure.caption.completeness_text()}", file=sys.stderr)
    try:
        report.write_dir(out)
    except OSError as err:  # the disk filled up or the folder went away while the maps were computed
        raise ExplainError(f"Cannot write the report into {out}: {err.strerror or err}.") from None
    html_ok = _write_html(report, args.report) if args.report else True
    top = report.inputs[0].predictions["A"][0]
    if report.inputs[0].values is not None:  # a row: its values, which the one-line summary does not show
        print(f"row: {report.inputs[0].text}")
    inp, target = report.inputs[0], report.run.regression
    print(
        f"{description}: predicted {prediction_text(top, target, 1)}{verdict_text(top, inp.label, target) if target else ''}; "
        f"{ok}/{chosen} methods written to {out}" + (f"; HTML report {args.report}" if args.report and html_ok else "")
    )
    return 0 if ok and html_ok else 1


def _say_done(outcome: Outcome[Any]) -> None:
    """One line on stderr per method as it finishes: its time, or why it failed."""
    if outcome.error is not None:
        print(f"{outcome.method}: failed: {outcome.error}", file=sys.stderr)
    else:
        print(f"{outcome.method}: {outcome.seconds:.2f} s", file=sys.stderr)


def _chosen_methods(spec: str | None, bundle: ModelBundle) -> list[MethodSpec]:
    if spec in (None, "", "all"):
        return methods_for(bundle)
    chosen = [get_method(m.strip(), bundle.modality) for m in str(spec).split(",") if m.strip()]
    if not chosen:
        raise ExplainError("--methods is empty: name at least one method (xaidash methods lists them).")
    return chosen


def _explain_dataset(
    args: argparse.Namespace,
    run_path: Path,
    bundle: ModelBundle,
    span: tuple[int | None, int | None],
    chosen: list[MethodSpec],
    params: dict[str, dict[str, Any]],
) -> int:
    """`--input dataset:all` / `dataset:START:STOP`: every sample of the range into the run's attribution store."""
    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import load_split
    from xaidash.explainers.dataset.explain import DatasetJob, check_range, explain_dataset, summary
    from xaidash.explainers.dataset.store import store_dir

    if args.target is not None:
        raise ExplainError("--target applies to single inputs: a data set is explained for each sample's prediction.")
    split_name = args.split or "test"
    reason = bundle.no_dataset_reason(f"dataset:{split_name}")
    if reason:
        raise ExplainError(reason)
    try:
        split = load_split(bundle.info.name, split_name)  # type: ignore[arg-type]
    except DatasetError as e:
        raise ExplainError(f"Cannot load the {split_name} split of {bundle.info.name}: {e}") from None
    split_size = len(split)
    start, stop = check_range(span[0], span[1], split_size, split_name, bundle.info.name)
    del split  # the engines load it where they run
    resolved = {}
    for spec in chosen:  # every method checked before the first chunk, not after an hour
        spec.check(bundle)
        resolved[spec.id] = spec.resolve_for(bundle, params.get(spec.id, {}))
    job = DatasetJob(
        run_path=str(run_path),
        split=split_name,
        start=start,
        stop=stop,
        methods=[spec.id for spec in chosen],
        params=resolved,
        chunk_size=args.chunk_size,
        seed=args.seed,
        steps=args.steps,
        with_metrics=args.metrics,
        batch_size=args.batch_size,
        background=args.background,
        device=args.device,
    )
    out = Path(args.out).expanduser() if args.out else store_dir(run_path, split_name)
    gpus = args.gpus_per_worker
    if gpus is None:
        gpus = 1.0 if torch.cuda.is_available() else 0.0
    try:
        outcome = explain_dataset(
            job,
            out,
            bundle=bundle,
            split_size=split_size,
            engine=args.engine,
            fresh=args.fresh,
            progress=not args.quiet,
            workers=args.workers,
            gpus_per_worker=gpus,
            address=args.address,
        )
    except KeyboardInterrupt:
        print(f"\nstopped: the finished chunks are in {out}; run the same command to resume.", file=sys.stderr)
        return 130
    except OSError as err:  # the store's folder cannot be made or written (a full disk, /proc)
        where = f" ({err.filename})" if err.filename else ""
        raise ExplainError(f"Cannot write the attribution store at {out}: {err.strerror or err}{where}.") from None
    print(f"attribution store: {outcome.path}")
    print(summary(outcome))
    return 0


def _facts(spec: MethodSpec) -> str:
    """What the method explains and what its attributions add up to, in its spec's declared words."""
    what = {
        "attention": "attention weights",
        "activations": "a layer's activations, no class",
        "prediction": "what keeps the model's prediction, no class",
    }.get(spec.output, f"explains the {spec.output}")
    c = spec.completeness
    if c is None:
        return what
    return f"{what}; sums to {c.total}, one value per {c.unit}"


def _cmd_methods(args: argparse.Namespace) -> int:
    specs = list_methods(args.modality)
    if not specs:
        print("No methods registered" + (f" for {args.modality}" if args.modality else "") + ".")
        return 0
    for s in specs:
        print(f"{s.id:20s} {s.label}  [{'/'.join(s.modalities)}; {s.family}; {_facts(s)}]")
        if s.description:
            print(f"{'':22s}{s.description}")
        for p in s.params:
            print(f"{'':22s}- {p.describe()}")
    return 0


def _what_arguments(p: argparse.ArgumentParser) -> None:
    """`explain`'s run, input, target, methods and their parameters, metrics and output folder."""
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--input",
        required=True,
        help="image path; dataset:INDEX or dataset:train:INDEX (test:INDEX, row:INDEX and row:train:INDEX alike); "
        "dataset:all or dataset:START:STOP (a whole split into the run's attribution store, see --split); for text "
        "models the text or a .txt file; for table models a CSV file (FILE.csv:ROW) or the row's values, "
        "comma-separated; for graph models node:K (node K of the data set's graph) or a graph file (FILE, FILE:NODE)",
    )
    p.add_argument("--target", help="class index or name to explain (default: the predicted class)")
    p.add_argument(
        "--methods",
        default="all",
        help="comma-separated method ids (xaidash methods), or all (default): every method that applies",
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="METHOD.NAME=VALUE",
        help="method parameter, repeatable; NAME=VALUE sets it for every chosen method that has it",
    )
    p.add_argument("--metrics", action="store_true", help="also compute deletion/insertion AUC, pointing game, ...")
    p.add_argument(
        "--steps",
        type=int_range(2, 1000),
        default=CURVE_STEPS,
        help="deletion/insertion steps (default %(default)s, as the dashboard)",
    )
    p.add_argument(
        "--out",
        help="output folder (created); required for a single input; for dataset:all / dataset:START:STOP the "
        "attribution store goes to <run>/attributions/<split>/ unless --out is given",
    )


def _dataset_arguments(p: argparse.ArgumentParser) -> None:
    """`explain`'s options for a whole split (dataset:all, dataset:START:STOP) and its engines."""
    d = p.add_argument_group("whole data sets (--input dataset:all or dataset:START:STOP)")
    d.add_argument("--split", choices=["test", "train"], help="which split (default test)")
    d.add_argument(
        "--chunk-size",
        type=int_range(1, 100_000),
        default=DEFAULT_CHUNK,
        help="samples per chunk: one shard per chunk and method, the unit of resuming (default %(default)s)",
    )
    d.add_argument("--engine", choices=ENGINES, default="local", help="local (default, one process) or ray")
    d.add_argument("--workers", type=int_range(1, 4096), default=2, help="Ray actors (default %(default)s)")
    d.add_argument(
        "--gpus-per-worker",
        type=float_range(0.0, 64.0),
        default=None,
        help="GPUs each Ray actor holds (default 1 when this machine has a GPU, else 0: CPU actors)",
    )
    d.add_argument("--address", help="an existing Ray cluster (e.g. ray://head:10001 or auto); default: a local Ray")
    d.add_argument("--fresh", action="store_true", help="replace the store instead of resuming it (settings changed)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")


def _how_arguments(p: argparse.ArgumentParser) -> None:
    """`explain`'s device, input fit, report, drawing, background, batch size, seed and --force."""
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument(
        "--fit",
        choices=FITS,
        default="crop",
        help="how an image file is brought to the model's size: crop the centre (default), letterbox, stretch",
    )
    p.add_argument(
        "--top-k", type=int_range(1, 1000), default=5, help="predictions listed in report.json (default %(default)s)"
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the report as one self-contained HTML page (opens offline in any browser)",
    )
    p.add_argument(
        "--scale",
        choices=list(SCALE_MODES),
        default="percentile",
        help="colour scale of the maps: "
        + "; ".join(f"{k}: {v}" for k, v in SCALE_MODES.items())
        + " (default %(default)s)",
    )
    p.add_argument(
        "--display",
        choices=DISPLAYS,
        default=None,
        help="how maps are drawn, where a model's inputs offer a choice: image maps over a grey copy of the input "
        "(overlay, their default) or alone (heatmap); graph maps on the graph (graph, their default) or as a "
        "feature x node heatmap (heatmap); text maps are always the words highlighted",
    )
    p.add_argument(
        "--background",
        type=int_range(1, 10_000),
        default=DEFAULT_BACKGROUND,
        help="training images SHAP and the 'mean' baseline compare against, the same whatever --seed "
        "(default %(default)s, as the dashboard and explain())",
    )
    p.add_argument(
        "--batch-size",
        type=int_range(1, MAX_BATCH_SIZE),
        default=256,
        help="samples per forward pass (default %(default)s)",
    )
    p.add_argument(
        "--seed", type=int_range(0, 2**32 - 1), default=0, help="seed for sampling methods (default %(default)s)"
    )
    p.add_argument(
        "--force", action="store_true", help="explain a run whose training failed or whose weights hold NaN/inf anyway"
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="explain one input of a trained run with several methods",
        description="One input: writes the explain report into --out (report.json, the input, each map with its "
        "colour bar as maps/*.png or .html for text, the attributions as attributions/*.npy; docs/report-format.md), "
        "and with --report FILE.html the same report as one self-contained page. "
        "dataset:all or dataset:START:STOP: every sample of the split into the run's attribution store "
        "(<run>/attributions/<split>/), resumed by running the same command again.",
    )
    _what_arguments(p)
    _dataset_arguments(p)
    _how_arguments(p)
    p.set_defaults(func=_cmd_explain)

    m = sub.add_parser("methods", help="list explanation methods and their parameters")
    m.add_argument("--modality", choices=["image", "text"], help="only methods for this modality")
    m.set_defaults(func=_cmd_methods)


def main(argv: list[str] | None = None) -> int:
    """Run `explain` or `methods` on their own (the full CLI is dashboard.cli)."""
    parser = argparse.ArgumentParser(prog="xaidash", description="Explain trained xaidash models.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
