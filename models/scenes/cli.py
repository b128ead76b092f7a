"""`xaidash scenes train` and `xaidash scenes evaluate`: the models layer's half of the `scenes` command (the
dashboard's cli adds these to its `scenes` subparsers, beside the explainers' `explain`)."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from types import FrameType
from typing import Any

from xaidash.data.argtypes import float_range, int_range
from xaidash.models.device import device_arg
from xaidash.models.registry import ModelError
from xaidash.models.scenes.evaluate import HEADLINE
from xaidash.models.scenes.own_module import OUTPUT_FORMATS
from xaidash.models.scenes.train import SceneEvent, SceneTrainSettings
from xaidash.models.scenes.zoo import SCENE_MODELS

PROGRESS_LINES = 10  # step lines per epoch


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add `train`, `evaluate` and `import` to the `scenes` command's subparsers."""
    trainable = [s for s in SCENE_MODELS if s.trainable]  # imported-only architectures are never trained here
    models = ", ".join(f"{s.id} ({s.task})" for s in trainable)
    t = sub.add_parser(
        "train",
        help="train a detector or segmenter on a scene set",
        description=f"Train a scene model from random weights: {models}. Unset numbers take the model's recipe. "
        "Ctrl-C stops after the current step and keeps a resumable run (--resume RUN goes on).",
    )
    t.add_argument("--data", help="scene set: scenes, scenes_hard, coco:<annotations.json> or masks:<folder>")
    t.add_argument("--model", help=f"scene model: {', '.join(s.id for s in trainable)}")
    t.add_argument("--epochs", type=int_range(1, 10_000), help="epochs (default: the recipe's)")
    t.add_argument("--batch-size", type=int_range(1, 4096), help="images per step (default: the recipe's)")
    t.add_argument("--lr", type=float_range(0, 10, lo_open=True), help="peak learning rate (default: the recipe's)")
    t.add_argument("--seed", type=int_range(0, 2**32 - 1), default=0)
    t.add_argument("--train-count", type=int_range(1), help="use only the first N training images")
    t.add_argument("--eval-count", type=int_range(1), help="validation and test images (default and most: 200)")
    t.add_argument("--device", type=device_arg, default="auto", help="auto, cpu, cuda, cuda:N, mps")
    t.add_argument("--name", help="added to the run folder's name")
    t.add_argument("--resume", metavar="RUN", help="go on training a stopped or interrupted run (its settings)")
    t.set_defaults(func=_cmd_train)
    e = sub.add_parser(
        "evaluate",
        help="mAP of a detector or mIoU of a segmenter on a split",
        description="Evaluate a scene model's run: a detector's COCO mAP (torchmetrics), a segmenter's mIoU.",
    )
    e.add_argument("--run", required=True, help="run id (xaidash runs) or 'latest'")
    e.add_argument("--split", choices=("train", "val", "test"), default="test")
    e.add_argument("--count", type=int_range(1), help="only the first N images of the split")
    e.add_argument("--device", type=device_arg, default="auto")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.set_defaults(func=_cmd_evaluate)
    _add_import(sub)


def _add_import(sub: argparse._SubParsersAction) -> None:
    archs = ", ".join(f"{s.id} ({s.task})" for s in SCENE_MODELS if not s.trainable)
    i = sub.add_parser(
        "import",
        help="import a torchvision detector's or segmenter's weights (a safetensors state dict) as a scene run",
        description=f"Import weights trained elsewhere as a scene run: {archs}. The file must be a safetensors state "
        "dict (never a pickle: convert a .pt with safetensors.torch.save_file(model.state_dict(), path)).",
    )
    source = i.add_mutually_exclusive_group(required=True)
    source.add_argument("--arch", help="the torchvision architecture")
    source.add_argument(
        "--module",
        metavar="FILE.py:FACTORY",
        help="your own detector or segmenter: FILE.py:FACTORY or package.module:FACTORY (an nn.Module class or a "
        "function returning one, called with the --option values); needs --output and --cam-layer",
    )
    formats = "; ".join(f"{f.id} ({f.task}): {f.returns}" for f in OUTPUT_FORMATS.values())
    i.add_argument("--output", choices=list(OUTPUT_FORMATS), help=f"what your module returns: {formats}")
    i.add_argument("--cam-layer", help="the module path inside your model whose feature maps the CAMs weight")
    i.add_argument("--option", action="append", metavar="KEY=VALUE", help="keyword argument of your factory")
    i.add_argument("--weights", required=True, help="the state dict, a .safetensors file")
    i.add_argument("--classes", required=True, help="the object classes in label order (1, 2, ...), comma-separated")
    i.add_argument("--image-size", type=int_range(16, 2048), help="side of the images it sees (default 320)")
    i.add_argument("--data", help="scene set evaluate and explain read (scenes, coco:<json>, masks:<folder>)")
    i.add_argument("--name", help="added to the run folder's name")
    i.set_defaults(func=_cmd_import)


class _Progress:
    """Prints a run's progress: a few step lines per epoch, each epoch's validation, the test at the end."""

    def __init__(self) -> None:
        self.every = 1

    def __call__(self, e: SceneEvent) -> None:
        per_epoch = max(1, e.total_steps // max(1, e.epochs))
        self.every = max(1, per_epoch // PROGRESS_LINES)
        if e.phase == "start":
            print(f"run {e.run_id}: {e.epochs} epochs of {per_epoch} steps", flush=True)
        elif e.phase == "step" and e.step % self.every == 0:
            print(f"epoch {e.epoch}/{e.epochs} step {e.step}/{e.total_steps} loss {e.loss:.4f} ({e.elapsed:.0f} s)")
        elif e.phase == "epoch":
            print(f"epoch {e.epoch}/{e.epochs} done: train loss {e.loss or 0:.4f}, validation {_short(e.metrics)}")
        elif e.phase == "end" and e.state == "completed":
            print(f"test: {_short(e.metrics)} ({e.elapsed:.0f} s)")
        elif e.phase == "end":
            print(f"{e.state}: {e.message}")


def _short(metrics: dict[str, float]) -> str:
    keys = ("map", "map_50", "map_75", "miou", "miou_objects", "pixel_accuracy")
    return ", ".join(f"{k} {metrics[k]:.3f}" for k in keys if k in metrics)


def _cmd_train(args: argparse.Namespace) -> int:
    from xaidash.models.runs.store import resolve_run
    from xaidash.models.scenes.train import train_scene_model

    resume = resolve_run(args.resume) if args.resume else None
    if resume is None and not (args.data and args.model):
        print("error: give --data and --model (or --resume RUN).")
        return 2
    settings = None
    if resume is None:
        settings = SceneTrainSettings(
            args.data, args.model, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
            train_count=args.train_count, device=args.device, name=args.name, eval_count=args.eval_count,
        )  # fmt: skip
    elif args.epochs is not None:
        settings = SceneTrainSettings("", "", epochs=args.epochs)  # only its epochs count when resuming
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        print("stopping after this step (Ctrl-C again to abort) ...", flush=True)
        stop.set()
        signal.signal(signal.SIGINT, previous)

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGINT, on_interrupt)
    try:
        run = train_scene_model(settings, on_event=_Progress(), should_stop=stop.is_set, resume=resume)
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    summary = run.summary()
    if summary.get("state") == "stopped":
        print(f"resume it: xaidash scenes train --resume {run.id}")
    print(f"run: {run.id} ({run.path})")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from xaidash.models.external.options import parse_key_values
    from xaidash.models.scenes.importing import import_scene_checkpoint, import_scene_module

    classes = [c.strip() for c in str(args.classes).split(",") if c.strip()]
    common = {"image_size": args.image_size, "name": args.name, "dataset": args.data}
    if args.module:
        if not args.output or not args.cam_layer:
            raise ModelError(
                "--module needs --output (the format your model's output is in) and --cam-layer (the layer whose "
                "feature maps the CAMs weight)."
            )
        options = parse_key_values(args.option, "--option")
        run = import_scene_module(
            args.module, args.weights, classes, output=args.output, cam_layer=args.cam_layer, options=options, **common
        )
    else:
        if args.output or args.cam_layer or args.option:
            raise ModelError("--output, --cam-layer and --option describe a --module of your own, not --arch.")
        run = import_scene_checkpoint(args.arch, args.weights, classes, **common)
    print(f"imported {args.module or args.arch} ({len(classes)} classes) as run {run.id} ({run.path})")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.models.scenes.evaluate import evaluate_scene_model
    from xaidash.models.scenes.loading import load_scene_run

    bundle = load_scene_run(args.run, args.device)
    if bundle.dataset is None:
        raise ModelError(f"Run {args.run} names no scene set to evaluate on: import it again with --data SET.")
    split = load_scene_set(str(bundle.dataset), args.split, args.count)
    metrics = evaluate_scene_model(bundle, split)
    if args.json:
        print(json.dumps(metrics, indent=2))
        return 0
    print(_table(bundle.run.id if bundle.run else args.run, bundle.task, args.split, len(split), metrics))
    return 0


def _table(run_id: str, task: Any, split: str, count: int, metrics: dict[str, float]) -> str:
    lines = [f"{run_id}: {split} split, {count} images; judged by {HEADLINE[task]}"]
    width = max(len(k) for k in metrics)
    lines += [f"  {k.ljust(width)}  {v:.4f}" for k, v in metrics.items()]
    return "\n".join(lines)
