"""`xaidash train`, `xaidash demo`, `xaidash runs` and `xaidash models`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xaidash.data.argtypes import int_range
from xaidash.data.errors import XaidashError
from xaidash.data.formatting import percent
from xaidash.data.registry import get_info
from xaidash.models.calibration_text import cmd_calibration
from xaidash.models.device import device_arg
from xaidash.models.registry import ModelError, get_spec, recommended_model
from xaidash.models.runs.quality import accuracy_warning, run_warning
from xaidash.models.runs.scores import epoch_score_text, final_score_text, recipe_score_text, run_target
from xaidash.models.runs.store import delete_run, resolve_run, run_liveness, runs_root
from xaidash.models.runs.table import runs_table
from xaidash.models.training.compiled import COMPILE_MODES
from xaidash.models.training.config import MAX_SEED, TrainConfig, TrainEvent, TrainResult
from xaidash.models.training.engine import train
from xaidash.models.training.launcher import Launch, train_distributed
from xaidash.models.training.recipes import AUGMENTATIONS, OPTIMIZERS, SCHEDULES, Recipe, describe, lr_note, scales_lr


def _fmt(v: float | None, pct: bool = False) -> str:
    if pct:
        return percent(v)
    return "-" if v is None else f"{v:.4f}"


class ProgressPrinter:
    """A tqdm bar over training steps with loss/accuracy in its postfix, and one line per epoch."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.bar = None

    def __call__(self, e: TrainEvent) -> None:
        from tqdm import tqdm

        if e.kind == "start":
            print(f"run {e.run_id}: {e.epochs} epochs, {e.total_steps} steps", file=sys.stderr)
            if e.message:
                print(f"note: {e.message}", file=sys.stderr)
            if not self.quiet:
                self.bar = tqdm(total=e.total_steps, initial=e.step, unit="step", file=sys.stderr, dynamic_ncols=True)
        elif e.kind == "step" and self.bar is not None:
            self.bar.update(e.step - self.bar.n)
            # a number to predict has no accuracy per step: its R² comes with each epoch's validation
            scores = {"acc": _fmt(e.train_acc, True)} if e.train_acc is not None else {}
            self.bar.set_postfix(
                epoch=e.epoch, loss=f"{e.train_loss:.3f}", **scores, rate=f"{e.samples_per_s or 0:.0f}/s"
            )
        elif e.kind == "epoch":
            regression = e.val_r2 is not None or (e.train_acc is None and e.val_acc is None)  # no accuracy at all
            train = "" if regression else f" acc {_fmt(e.train_acc, True)}"
            line = (
                f"epoch {e.epoch}/{e.epochs}: train loss {_fmt(e.train_loss)}{train}"
                f" | val loss {_fmt(e.val_loss)} {epoch_score_text(e.val_acc, e.val_r2, regression)}"
                f" | {e.samples_per_s or 0:.0f} samples/s" + (f" ({e.message})" if e.message else "")
            )
            (self.bar.write(line, file=sys.stderr) if self.bar is not None else print(line, file=sys.stderr))
        elif e.kind == "end" and self.bar is not None:
            self.bar.close()


@contextmanager
def ctrl_c_stops(stop: threading.Event) -> Iterator[None]:
    """The first Ctrl-C asks the engine to stop after the current step (it keeps and tests the weights so far);
    a second one aborts. Outside the main thread (where signals cannot be caught) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _model_options(items: list[str] | None) -> dict[str, Any]:
    """--model-option KEY=VALUE items as a dict; their names and ranges are the model's to check (check_options)."""
    options: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ModelError(f"--model-option {item!r}: write KEY=VALUE, e.g. dropout=0.3.")
        key = key.strip()
        try:  # numbers and true/false as JSON, anything else as a string
            options[key] = json.loads(value.lower() if value.lower() in ("true", "false") else value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _report(result: TrainResult) -> int:
    """The end of a run on the terminal: state, test accuracy (R², RMSE and MAE in the target's units for a number
    to predict), what was kept, a quality warning; the exit code."""
    if result.state == "failed":
        print(f"error: run {result.run.id} failed: {result.error}", file=sys.stderr)
        return 1
    s = result.run.summary()
    config = result.run.config()
    print(
        f"{result.state}: run {result.run.id}  {final_score_text(s, run_target(config))}"
        f"  test loss {_fmt(result.test_loss)}  ({s.get('train_seconds', 0):.1f} s on {config['device']})"
    )
    if result.state == "stopped":
        print(f"kept: {result.kept}")
    if str(s.get("compiled", "")).startswith("eager"):
        print(f"warning: the steps ran {s['compiled']}", file=sys.stderr)
    if warning := accuracy_warning(result.run.config(), s):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"folder: {result.run.path}")
    return 0


def default_model(dataset: str) -> str:
    """The model `xaidash train` uses when none is named: the default (resnet_small) where it fits the data set,
    else the data set's recommended model, as the Train page preselects it (a graph set's or a table's)."""
    default = TrainConfig().model
    try:
        info = get_info(dataset)
    except XaidashError:  # an unknown or unreadable data set: validate() says why in its own words
        return default
    if get_spec(default).fits(info) is None:
        return default
    recommended = recommended_model(info)
    return default if recommended is None else recommended.name


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig `xaidash train`'s arguments ask for (also read by models/training/worker.py under torchrun)."""
    return TrainConfig(
        dataset=args.dataset,
        model=args.model if args.model is not None else default_model(args.dataset),
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        weight_decay=args.weight_decay,
        schedule=args.schedule,
        augment=args.augment,
        label_smoothing=args.label_smoothing,
        max_train_samples=args.max_train_samples,
        momentum=args.momentum,
        device=args.device,
        seed=args.seed,
        val_fraction=args.val_fraction,
        label_noise=getattr(args, "label_noise", 0.0),
        amp=not args.no_amp,
        workers=args.workers,
        model_options=_model_options(args.model_option),
        nproc=args.nproc,
        compile=args.compile,
        channels_last=args.channels_last,
    )


def _launch(args: argparse.Namespace) -> Launch | None:
    """Where the processes of a distributed run go (None: one process, the plain engine)."""
    if args.nproc == 1 and args.nnodes == 1:
        return None
    launch = Launch(
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        backend=args.backend,
    )
    launch.validate()
    return launch


def _cmd_train(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    cfg.validate()  # refused before the settings line is printed (train() checks again: the Train form's path)
    launch = _launch(args)
    if args.resume is None:  # a resumed run keeps its own settings (the engine reads them from its folder)
        key, recipe = cfg.recipe()
        resolved = cfg.with_recipe()
        print(f"settings ({'recipe ' + key} where not given): {describe(resolved.settings())}", file=sys.stderr)
        if cfg.lr is None and cfg.batch_size is not None and scales_lr(recipe, cfg.batch_size):
            print(f"  {lr_note(recipe, cfg.batch_size, resolved.settings().optimizer)}", file=sys.stderr)
    stop = threading.Event()
    try:
        with ctrl_c_stops(stop):
            if launch is None:
                result = train(cfg, callbacks=[ProgressPrinter(args.quiet)], stop=stop, resume=args.resume)
            else:
                printer = ProgressPrinter(args.quiet)
                result = train_distributed(cfg, callbacks=[printer], stop=stop, resume=args.resume, launch=launch)
    except KeyboardInterrupt:  # the second Ctrl-C: the run folder says 'running' until resumed or deleted
        print("aborted", file=sys.stderr)
        return 130
    if launch is not None and launch.node_rank > 0:  # the run folder is node 0's
        print(f"node {launch.node_rank}: {result.state}; the run's folder is on node 0 (rank 0 writes it)")
        return 0 if result.state != "failed" else 1
    return _report(result)


def _cmd_demo(args: argparse.Namespace) -> int:
    """Train the quick-start runs one after another with their recipes; Ctrl-C stops the current one and skips
    the rest."""
    from xaidash.models.training.demo import DEMO_RUNS

    stop = threading.Event()
    started = time.perf_counter()
    done: list[tuple[str, str, TrainResult, float]] = []
    try:
        with ctrl_c_stops(stop):
            for i, (dataset, model) in enumerate(DEMO_RUNS, 1):
                if stop.is_set():
                    break
                print(f"demo {i}/{len(DEMO_RUNS)}: {model} on {dataset}", file=sys.stderr)
                t = time.perf_counter()
                cfg = TrainConfig(dataset=dataset, model=model, device=args.device)
                result = train(cfg, callbacks=[ProgressPrinter(args.quiet)], stop=stop)
                done.append((dataset, model, result, time.perf_counter() - t))
                if result.state == "failed":
                    print(f"error: run {result.run.id} failed: {result.error}", file=sys.stderr)
                    break
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        return 130
    for dataset, model, result, seconds in done:
        warning = run_warning(result.run)
        score = final_score_text(result.run.summary(), run_target(result.run.config()))
        print(
            f"{model:17s} {dataset:8s} {result.state:9s} {score:>14s}  {seconds:5.1f} s"
            f"  run {result.run.id}" + (f"\n  warning: {warning}" if warning else "")
        )
    print(f"demo: {len(done)} of {len(DEMO_RUNS)} runs in {time.perf_counter() - started:.1f} s")
    if len(done) < len(DEMO_RUNS) or any(r.state != "completed" for _, _, r, _ in done):
        return 1
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    if args.calibration is not None:
        return cmd_calibration(args.calibration, args.out, args.refit, args.device)
    if args.out or args.refit:
        raise ModelError("--out and --refit go with --calibration [RUN].")
    if args.delete:
        delete_run(args.delete)
        print(f"deleted {args.delete}")
        return 0
    rows = runs_table()
    if not rows:
        print(f"No runs under {runs_root()}. Train one: xaidash train --dataset shapes --model resnet_small")
        return 0
    cols = ["run", "model", "dataset", "state", "epochs", "val acc", "test acc", "quality", "device", "date"]
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(r.get(c, "").ljust(widths[c]) for c in cols))
    for r in rows:  # what to do with an interrupted run, and a model not worth explaining, said where it is listed
        try:
            run = resolve_run(r["run"])
            advice = run_liveness(run).advice
            warning = run_warning(run)
        except Exception:  # noqa: BLE001 - a damaged run is already marked unreadable in the table
            advice, warning = "", None
        if advice:
            print(f"interrupted: {r['run']}: {advice}")
        if warning:
            print(f"warning: {r['run']}: {warning}")
    return 0


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in the help, except None: those options say in words where their default comes from."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


FROM_RECIPE = "(default: from the model's recipe for this data; see xaidash models --recipes)"


def add_commands(sub: argparse._SubParsersAction) -> None:
    _add_train(sub)
    _add_demo(sub)
    _add_runs(sub)
    m = sub.add_parser("models", help="list zoo models (--recipes: their training recipes)")
    m.add_argument("--recipes", action="store_true", help="each model's recipes: settings and measured accuracy")
    m.set_defaults(func=_cmd_models)


def _add_train(sub: argparse._SubParsersAction) -> None:
    d = TrainConfig()
    p = sub.add_parser(
        "train",
        help="train a zoo model on a data set",
        formatter_class=_HelpFormatter,
        description="Train a zoo model on a data set. Every setting not given (epochs, batch size, learning rate, "
        "optimizer, weight decay, schedule, augmentation, label smoothing, sample cap) comes from the model's "
        "tested recipe for the data set (xaidash models --recipes).",
    )
    p.add_argument(
        "--dataset", default=d.dataset, help="data set name (xaidash datasets), imagefolder:<path> or csv:<path>"
    )
    p.add_argument(
        "--model",
        default=None,
        help=f"zoo model (xaidash models); default: {d.model} where it fits the data set, else the data set's "
        "recommended model (the one the Train page preselects)",
    )
    _add_recipe_settings(p)
    _add_run_settings(p, d)
    add_distributed_arguments(p)
    p.set_defaults(func=_cmd_train)


def _add_recipe_settings(p: argparse.ArgumentParser) -> None:
    """The settings a model's recipe gives where they are not given: epochs, batch, optimizer, schedule, ..."""
    p.add_argument("--epochs", type=int, default=None, help=f"number of epochs {FROM_RECIPE}")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"training batch size {FROM_RECIPE}; above the recipe's, without --lr, the recipe's learning rate is "
        "scaled to it (square root for adam/adamw, linear for sgd)",
    )
    p.add_argument("--lr", type=float, default=None, help=f"learning rate (the peak, for one-cycle) {FROM_RECIPE}")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help=FROM_RECIPE)
    p.add_argument("--weight-decay", type=float, default=None, help=FROM_RECIPE)
    p.add_argument("--schedule", choices=SCHEDULES, default=None, help=f"learning rate over the steps {FROM_RECIPE}")
    p.add_argument(
        "--augment", choices=AUGMENTATIONS, default=None, help=f"random shifts and flips of images {FROM_RECIPE}"
    )
    p.add_argument("--label-smoothing", type=float, default=None, help=f"in [0, 1) {FROM_RECIPE}")
    p.add_argument(
        "--max-train-samples",
        type=int,
        default=None,
        help=f"train on a random subset of at most this many samples, 0 for all {FROM_RECIPE}",
    )


def _add_run_settings(p: argparse.ArgumentParser, d: TrainConfig) -> None:
    """The settings of this run itself: device, seed, precision, compilation, data loading, model options, resume."""
    p.add_argument("--momentum", type=float, default=d.momentum, help="SGD momentum")
    p.add_argument("--device", default=d.device, help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--seed", type=int, default=d.seed, help=f"0 to {MAX_SEED}")
    p.add_argument("--val-fraction", type=float, default=d.val_fraction)
    p.add_argument(
        "--label-noise",
        type=float,
        default=d.label_noise,
        metavar="F",
        help="flip this fraction of the training labels to another class, seeded by --seed (in [0, 0.5); for testing "
        "label-error detection with `xaidash influence --self`); the flipped samples go to <run>/label_noise.json",
    )
    p.add_argument(
        "--no-amp",
        action="store_true",
        help="train in float32 (bf16 autocast is on by default on CUDA and on CPUs with native bf16)",
    )
    p.add_argument(
        "--compile",
        choices=COMPILE_MODES,
        default=d.compile,
        help="torch.compile the training steps: 'on' (inductor), 'graphs' (also CUDA graphs on a GPU); compiling "
        "takes tens of seconds at the start, worth it on long runs; falls back to eager if it fails",
    )
    p.add_argument(
        "--channels-last",
        action="store_true",
        help="NHWC layout for convolution networks (faster convolutions on GPUs with bf16)",
    )
    p.add_argument("--workers", type=int, default=d.workers, help="DataLoader workers (image folders)")
    p.add_argument(
        "--model-option",
        action="append",
        metavar="KEY=VALUE",
        help="a build option the model declares, e.g. dropout=0.3 or freeze_encoder=false (minilm); xaidash models "
        "lists each model's options and ranges",
    )
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue this run with its own settings, up to --epochs (default: its planned epochs)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    d = TrainConfig()
    demo = sub.add_parser(
        "demo",
        help="train the quick-start runs that make every page meaningful",
        formatter_class=_HelpFormatter,
        description="Train, one after another with their recipes: "
        + ", ".join(f"{m} on {ds}" for ds, m in _demo_runs())
        + ". Ctrl-C stops the current run (keeping its weights) and skips the rest.",
    )
    demo.add_argument(
        "--device", type=device_arg, default=d.device, help="auto (cuda, then mps, then cpu), cpu, cuda, mps"
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(func=_cmd_demo)


def _add_runs(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "runs",
        help="list training runs with their state, final metrics and quality",
        description="List runs with their state: running (a live process trains it), interrupted (the process that "
        "trained it is gone: resume it with xaidash train --resume RUN, or delete it; its summary.json is marked so, "
        "with interrupted_at, and the temporary files of its unfinished writes are removed), stopped, completed, "
        "failed; and their quality: good, poor (near chance or far below its recipe), training failed, NaN/inf "
        "weights.",
    )
    r.add_argument("--delete", metavar="RUN", help="delete a run folder")
    r.add_argument(
        "--calibration",
        nargs="?",
        const="latest",
        metavar="RUN",
        help="a classifier run's calibration (default run: latest): ECE, MCE, NLL and Brier before and after "
        "temperature scaling, the temperature and a reliability table; fitted and saved with the run "
        "(calibration.json) when missing or stale",
    )
    r.add_argument("--out", metavar="FILE.json", help="with --calibration: also write the calibration as JSON")
    r.add_argument("--refit", action="store_true", help="with --calibration: fit again even when a fresh fit is saved")
    r.add_argument("--device", type=device_arg, default="cpu", help="with --calibration: where the model runs")
    r.set_defaults(func=_cmd_runs)


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """--nproc and the multi-machine flags (torchrun's names): one run trained by several processes (DDP)."""
    g = p.add_argument_group(
        "several GPUs or machines (DistributedDataParallel; --batch-size stays the global batch, split evenly)"
    )
    g.add_argument("--nproc", type=int, default=1, help="training processes on this machine, one per GPU")
    g.add_argument("--nnodes", type=int, default=1, help="machines training this run together")
    g.add_argument("--node-rank", type=int, default=0, help="this machine's place among them (0: writes the run)")
    g.add_argument("--master-addr", default="127.0.0.1", help="node 0's address (the same on every machine)")
    g.add_argument(
        "--master-port",
        type=int_range(1, 65535),
        default=None,
        help="node 0's port (default on one machine: a free one)",
    )
    g.add_argument(
        "--backend", choices=("nccl", "gloo"), default=None, help="collectives (default: nccl on CUDA, gloo on CPUs)"
    )


def _demo_runs() -> tuple[tuple[str, str], ...]:
    from xaidash.models.training.demo import DEMO_RUNS

    return DEMO_RUNS


def _recipe_line(key: str, r: Recipe) -> str:
    expected = recipe_score_text(r) or "not measured"
    inputs = _inputs_of(key)
    return (
        f"{key:14s} {describe(r)}: {expected}"
        + (" (recommended)" if r.recommended else "")
        + (f"; {inputs}" if inputs else "")
    )


def _inputs_of(key: str) -> str:
    """What a recipe's data set holds, in words ('rows of 30 columns', '3x32x32 images'); '' for a key that names
    no data set (a modality's fallback, a user-data prefix)."""
    from xaidash.data.modalities import modality_of
    from xaidash.data.registry import DATASETS

    if key not in DATASETS:
        return ""
    info = DATASETS.get(key).info
    return modality_of(info.modality).describe(info.input_shape)


def _cmd_models(args: argparse.Namespace) -> int:
    from xaidash.models.registry import list_models

    for s in list_models():
        print(f"{s.name:18s} {s.modality:6s} {s.input_note or ''}\n{'':25s}{s.description}")
        if args.recipes:
            for key, recipe in s.recipes.items():
                print(f"{'':25s}{_recipe_line(key, recipe)}")
        elif s.recipes:
            keys = [f"{k} ({_inputs_of(k)})" if _inputs_of(k) else k for k in s.recipes]
            print(f"{'':25s}recipes: {', '.join(keys)}")
        if s.options:
            print(f"{'':25s}options (--model-option): {s.options_text()}")
    return 0
