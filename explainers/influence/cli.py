"""`xaidash influence`: the training samples behind one prediction (`--input`), or the whole training set ranked by
self-influence (`--self`, a resumable job: run it again to continue), or the methods and whether they apply (`--list`)."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from xaidash.data.argtypes import int_range
from xaidash.explainers.cli import _target, one_line_errors
from xaidash.explainers.figures.result_json import check_result_folder, parameters_of, result_document, write_result
from xaidash.explainers.inputs import resolve_sample
from xaidash.explainers.modalities.image_files import FITS
from xaidash.explainers.params import ExplainError
from xaidash.models.device import device_arg

EXPORTS = (".csv", ".json")
QUERY_JSON = "influence.json"  # --input --out DIR
SELF_JSON = "self_influence.json"  # --self --out DIR


def _class(names: list[str], k: int) -> str:
    return names[k] if 0 <= k < len(names) else str(k)


def _rows(samples: list[Any], names: list[str]) -> list[str]:
    out = [f"  {'#':>3}  {'train index':>11}  {'trained as':<14} {'data set says':<14} {'predicted':<18} {'score':>11}"]
    for i, s in enumerate(samples, 1):
        flip = " *" if s.label != s.dataset_label else ""
        pred = f"{_class(names, s.predicted)} {s.probability:.0%}"
        out.append(
            f"  {i:>3}  {s.index:>11}  {_class(names, s.label) + flip:<14} {_class(names, s.dataset_label):<14} "
            f"{pred:<18} {s.score:>11.4g}"
        )
    return out


def _out(args: argparse.Namespace, name: str) -> Path | None:
    """--out DIR, checked before any work (a bad folder is one line, not a lost computation)."""
    if args.out is None:
        return None
    out = Path(args.out).expanduser()
    check_result_folder(out, name)
    return out


def _query(args: argparse.Namespace) -> int:
    from xaidash.explainers.influence.api import explain_influence
    from xaidash.models.runs.store import load_bundle, resolve_run

    out = _out(args, QUERY_JSON)
    run = resolve_run(args.run)
    bundle = load_bundle(run, device=args.device)
    sample = resolve_sample(args.input, bundle, fit=args.fit)
    target = _target(args.target, bundle)
    result = explain_influence(bundle, run, sample.raw, target=target, method=args.method, k=args.k)
    names = list(bundle.info.classes)
    raw = sample.raw
    probs = bundle.predict_proba([raw] if isinstance(raw, str) else raw)[0]
    pred = int(probs.argmax())
    print(f"run {run.id} · {result.label} · {sample.description}")
    print(
        f"explained class: {_class(names, result.target)} (model predicts {_class(names, pred)} {float(probs[pred]):.1%})"
    )
    epochs = ", ".join(map(str, result.checkpoints)) or "the final weights"
    print(f"checkpoints: {epochs} · layer: {result.layer}")
    print(f"score: {result.units}; > 0 supports the class, < 0 opposes it (* trained with a flipped label)")
    print(f"\nproponents (most support {_class(names, result.target)} first):")
    print("\n".join(_rows(result.proponents, names)) if result.proponents else "  none")
    print("\nopponents (most oppose it first):")
    print("\n".join(_rows(result.opponents, names)) if result.opponents else "  none")
    print("\nnotes:\n" + "\n".join(f"  - {n}" for n in result.notes))
    if result.proponents:
        first = result.proponents[0].index
        print(f"open one: xaidash explain --run {run.id} --input dataset:train:{first} --out DIR")
    if out is not None:
        prediction = {"class": pred, "name": _class(names, pred), "probability": float(probs[pred])}
        document, files = result_document(
            "influence",
            result,
            run=run.id,
            inputs={"input": args.input, "description": sample.description},
            parameters=parameters_of(args, leave_out=("run", "input")),
            extra={"target_name": _class(names, result.target), "prediction": prediction, "classes": names},
        )
        write_result(out, QUERY_JSON, document, files)
        print(f"wrote {out / QUERY_JSON}")
    return 0


def _progress(status: Any) -> None:
    eta = f" · ETA {status.eta_s:.0f} s" if status.eta_s is not None and not status.complete else ""
    pct = status.done / status.total if status.total else 1.0
    print(
        f"\rself-influence ({status.method}): {status.done:,}/{status.total:,} ({pct:.0%}) · {status.seconds:.1f} s{eta}   ",
        end="",
        file=sys.stderr,
        flush=True,
    )


def _check_export(path: str | None) -> Path | None:
    if path is None:
        return None
    target = Path(path).expanduser()
    if target.suffix.lower() not in EXPORTS:
        raise ExplainError(f"--export {path}: give a .csv or .json file.")
    if target.is_dir():
        raise ExplainError(f"--export {path} is a folder: give a .csv or .json file.")
    return target


def _export(frame: Any, target: Path, names: list[str]) -> None:
    from xaidash.data.atomic import atomic_write_bytes

    out = frame.copy()
    out["label_name"] = [_class(names, int(k)) for k in out["label"]]
    out["dataset_label_name"] = [_class(names, int(k)) for k in out["dataset_label"]]
    out["flipped"] = out["label"] != out["dataset_label"]
    text = out.to_csv(index=False) if target.suffix.lower() == ".csv" else out.to_json(orient="records", indent=1)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, text.encode("utf-8"))
    except OSError as e:
        raise ExplainError(f"Cannot write {target}: {e.strerror or e}.") from None


def _self(args: argparse.Namespace) -> int:
    from xaidash.explainers.influence.api import run_self_influence, self_influence_table
    from xaidash.models.runs.store import resolve_run

    export = _check_export(args.export)
    out = _out(args, SELF_JSON)
    run = resolve_run(args.run)
    stop = threading.Event()
    try:
        status = run_self_influence(run, args.method, progress=_progress, stop=stop, device=args.device)
    except KeyboardInterrupt:
        stop.set()
        print("\nstopped: run the same command again to continue where it stopped", file=sys.stderr)
        return 130
    print(file=sys.stderr)
    frame = self_influence_table(run, args.method)
    assert frame is not None
    names = list(run.info.classes)
    print(
        f"run {run.id} · self-influence by {args.method} · {status.done:,} training samples in {status.seconds:.1f} s"
    )
    print("highest first: the samples the model found hardest or most surprising (possible label errors; * flipped)")
    print(
        f"  {'rank':>5}  {'train index':>11}  {'trained as':<14} {'data set says':<14} {'predicted':<18} {'score':>11}"
    )
    for row in frame.head(args.k).itertuples():
        flip = " *" if row.label != row.dataset_label else ""
        pred = f"{_class(names, int(row.predicted))} {row.probability:.0%}"
        print(
            f"  {row.rank:>5}  {row.index:>11}  {_class(names, int(row.label)) + flip:<14} "
            f"{_class(names, int(row.dataset_label)):<14} {pred:<18} {row.score:>11.4g}"
        )
    flipped = frame["label"] != frame["dataset_label"]
    if flipped.any():
        top = flipped.head(max(1, len(frame) // 10)).sum()
        print(
            f"label noise: {int(flipped.sum())} flipped labels; the top 10% by self-influence hold {int(top)} of them "
            f"(recall {top / flipped.sum():.2f}; a random ranking: 0.10)"
        )
    if export is not None:
        _export(frame, export, names)
        print(f"wrote {export}")
    if out is not None:
        document, files = result_document(
            "influence",
            {"status": status, "ranking": frame.head(args.k).to_dict(orient="records")},
            run=run.id,
            inputs={"self": True},
            parameters=parameters_of(args, leave_out=("run", "input")),
            extra={"classes": names, "rows": f"the top {args.k} of {len(frame):,} by self-influence (--export: all)"},
        )
        write_result(out, SELF_JSON, document, files)
        print(f"wrote {out / SELF_JSON}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from xaidash.explainers.influence.registry import influence_methods_for
    from xaidash.models.runs.store import resolve_run

    run = resolve_run(args.run)
    for spec, why in influence_methods_for(run):
        mark = "yes" if why is None else "no "
        print(f"{mark}  {spec.id:<18} {spec.label}: {spec.description}" + (f"\n       why not: {why}" if why else ""))
    return 0


def _work(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.self_influence == (args.input is not None):
        raise ExplainError("give --input (one prediction's influential training samples) or --self (the whole set).")
    return _self(args) if args.self_influence else _query(args)


def _cmd(args: argparse.Namespace) -> int:
    return one_line_errors(_work, args)


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "influence",
        help="training samples behind a prediction (TracIn), or self-influence over the training set",
        description="--input: the training samples that most support (proponents) and most oppose (opponents) the "
        "prediction of one input, by TracIn over the run's epoch checkpoints (default) or similar examples. "
        "--self: every training sample ranked by self-influence (possible label errors), a resumable job stored "
        "under <run>/influence/. The training samples' features are cached there and reused by every query.",
    )
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--input",
        help="test:N or train:N (a sample of the run's data set; also dataset:N, dataset:test:N), an image path, "
        "or for text models the text or a .txt file",
    )
    p.add_argument(
        "--self", dest="self_influence", action="store_true", help="rank the whole training set by self-influence"
    )
    p.add_argument("--list", action="store_true", help="list the methods and whether they apply to the run")
    p.add_argument("--target", help="class index or name to explain (default: the predicted class)")
    p.add_argument(
        "--method", default="tracin_fast", help="tracin_fast (default), tracin_projected or similar (see --list)"
    )
    p.add_argument(
        "-k", type=int_range(1, 200), default=8, help="proponents and opponents shown; with --self, rows printed"
    )
    p.add_argument("--export", metavar="F.csv|F.json", help="with --self: write the whole ranked table")
    p.add_argument(
        "--out",
        metavar="DIR",
        help=f"write the result as JSON into this folder (created): {QUERY_JSON} with the proponents and opponents "
        f"and their scores (--input), or {SELF_JSON} with the top -k rows (--self); with the run, input and parameters",
    )
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument("--fit", choices=FITS, default="crop", help="how an image file is brought to the model's size")
    p.set_defaults(func=_cmd)
