"""`xaidash train` and `xaidash runs`."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from xaidash.models.engine import TrainConfig, TrainEvent, train
from xaidash.models.runstore import delete_run, percent, runs_root, runs_table


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
            self.bar.set_postfix(
                epoch=e.epoch,
                loss=f"{e.train_loss:.3f}",
                acc=_fmt(e.train_acc, True),
                rate=f"{e.samples_per_s or 0:.0f}/s",
            )
        elif e.kind == "epoch":
            line = (
                f"epoch {e.epoch}/{e.epochs}: train loss {_fmt(e.train_loss)} acc {_fmt(e.train_acc, True)}"
                f" | val loss {_fmt(e.val_loss)} acc {_fmt(e.val_acc, True)} | {e.samples_per_s or 0:.0f} samples/s"
                + (f" ({e.message})" if e.message else "")
            )
            (self.bar.write(line, file=sys.stderr) if self.bar is not None else print(line, file=sys.stderr))
        elif e.kind == "end" and self.bar is not None:
            self.bar.close()


def _cmd_train(args: argparse.Namespace) -> int:
    options = {}
    for item in args.model_option or []:
        key, _, value = item.partition("=")
        try:  # numbers and true/false as JSON, anything else as a string
            options[key] = json.loads(value.lower() if value.lower() in ("true", "false") else value)
        except json.JSONDecodeError:
            options[key] = value
    cfg = TrainConfig(
        dataset=args.dataset,
        model=args.model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        schedule=args.schedule,
        augment=args.augment,
        device=args.device,
        seed=args.seed,
        val_fraction=args.val_fraction,
        max_train_samples=args.max_train_samples,
        amp=not args.no_amp,
        workers=args.workers,
        model_options=options,
    )
    stop = threading.Event()
    try:
        result = train(cfg, callbacks=[ProgressPrinter(args.quiet)], stop=stop, resume=args.resume)
    except KeyboardInterrupt:  # the engine checks `stop` each step; a second Ctrl-C aborts
        stop.set()
        print("interrupted", file=sys.stderr)
        return 130
    s = result.run.summary()
    if result.state == "failed":
        print(f"error: run {result.run.id} failed: {result.error}", file=sys.stderr)
        return 1
    print(
        f"{result.state}: run {result.run.id}  test acc {_fmt(result.test_acc, True)}  test loss {_fmt(result.test_loss)}"
        f"  ({s.get('train_seconds', 0):.1f} s on {result.run.config()['device']})"
    )
    print(f"folder: {result.run.path}")
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    if args.delete:
        delete_run(args.delete)
        print(f"deleted {args.delete}")
        return 0
    rows = runs_table()
    if not rows:
        print(f"No runs under {runs_root()}. Train one: xaidash train --dataset shapes --model resnet_small")
        return 0
    cols = ["run", "model", "dataset", "state", "epochs", "val acc", "test acc", "device", "date"]
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(r.get(c, "").ljust(widths[c]) for c in cols))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    d = TrainConfig()
    p = sub.add_parser(
        "train", help="train a zoo model on a data set", formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--dataset", default=d.dataset, help="data set name (xaidash datasets), imagefolder:<path> or csv:<path>"
    )
    p.add_argument("--model", default=d.model, help="zoo model (xaidash models)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the model's)")
    p.add_argument("--optimizer", choices=["adam", "adamw", "sgd"], default=d.optimizer)
    p.add_argument("--momentum", type=float, default=d.momentum, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--schedule", choices=["cosine", "onecycle", "constant"], default=d.schedule)
    p.add_argument("--augment", choices=["none", "shift", "flip", "shift+flip"], default=d.augment)
    p.add_argument("--device", default=d.device, help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--val-fraction", type=float, default=d.val_fraction)
    p.add_argument("--max-train-samples", type=int, default=None, help="use at most this many training samples")
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    p.add_argument("--workers", type=int, default=d.workers, help="DataLoader workers (image folders)")
    p.add_argument("--model-option", action="append", metavar="KEY=VALUE", help="e.g. freeze_encoder=false (minilm)")
    p.add_argument("--resume", metavar="RUN", help="continue this run up to --epochs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train)

    r = sub.add_parser("runs", help="list training runs with their final metrics")
    r.add_argument("--delete", metavar="RUN", help="delete a run folder")
    r.set_defaults(func=_cmd_runs)

    m = sub.add_parser("models", help="list zoo models")
    m.set_defaults(func=_cmd_models)


def _cmd_models(args: argparse.Namespace) -> int:
    from xaidash.models.registry import list_models

    for s in list_models():
        print(f"{s.name:18s} {s.modality:6s} {s.input_note or ''}\n{'':25s}{s.description}")
    return 0
