"""`xaidash scenes explain`: explain one scene's detected boxes or predicted regions with the chosen methods, print each
map's metrics against the scene's exact ground truth, and with --out DIR write each map as a PNG (colour bar, the
explained box outlined), scene.json (the request, every target, map file and metric) and, with --report, report.html.

`add_commands(sub)` adds `explain` to the `xaidash scenes` command's sub-commands (the dashboard's cli builds that
group; the models' `add_commands` adds `train` and `evaluate` beside it)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.argtypes import float_range, int_range
from xaidash.data.errors import ExplainError
from xaidash.data.scenes.registry import load_scene_set
from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.figures.result_json import check_result_folder, parameters_of, result_document, write_result
from xaidash.explainers.params import parse_params
from xaidash.explainers.scenes.api import (
    DEFAULT_MIN_SCORE,
    SceneExplanation,
    detection_targets,
    explain_scene,
    region_targets,
)
from xaidash.explainers.scenes.figures import boxes_png, scene_figure, scene_report_html
from xaidash.explainers.scenes.metrics import SCENE_METRICS
from xaidash.explainers.scenes.registry import (
    TASK_WORDS,
    SceneMethodSpec,
    get_scene_method,
    layer_choices,
    scene_methods,
)
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget, class_name
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, ScenePrediction, Segmentation

RESULT_JSON = "scene.json"
REPORT_HTML = "report.html"
DEFAULT_METHODS = 3  # featured methods of the run's task used when --methods is not given
_INPUT = re.compile(r"^(train|val|test):(\d+)$")


@dataclass
class Scene:
    """The image explained (3, H, W) in [0, 1], its ground truth (None for a file of one's own) and how it was named."""

    image: torch.Tensor
    truth: SceneTarget | None
    name: str


def read_scene(bundle: SceneBundle, spec: str) -> Scene:
    """`split:index` of the run's data set (with its ground truth), or an image file (PNG/JPEG, without)."""
    found = _INPUT.match(spec.strip())
    if found is None:
        return _image_file(spec)
    split_name, index = found.group(1), int(found.group(2))
    if bundle.dataset is None:
        raise ExplainError(f"The run does not name its data set, so {spec} cannot be found; give an image file.")
    split = load_scene_set(bundle.dataset, split_name)
    if not 0 <= index < len(split):
        raise ExplainError(
            f"Scene {index} is out of range: the {split_name} split of {bundle.dataset} has {len(split)} "
            f"(0-{len(split) - 1})."
        )
    return Scene(split.images[index].float(), split.targets[index], spec)


def _image_file(spec: str) -> Scene:
    from PIL import Image, UnidentifiedImageError

    path = Path(spec).expanduser()
    if not path.is_file():
        raise ExplainError(f"--input {spec!r} is neither split:index (e.g. test:3) nor an image file.")
    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError):
        raise ExplainError(f"--input {spec}: not an image PIL can read (PNG or JPEG).") from None
    return Scene(torch.from_numpy(rgb).permute(2, 0, 1).contiguous(), None, path.name)


def chosen_methods(bundle: SceneBundle, names: str | None) -> list[SceneMethodSpec]:
    """The methods named (comma-separated), each refused in one line when it does not explain this run's task;
    the task's featured methods when none are named."""
    task = bundle.task
    if not names:
        return scene_methods_featured(task)
    out = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        spec = get_scene_method(name)
        if not spec.applies(task):
            fits = ", ".join(s.id for s in scene_methods(task))
            raise ExplainError(
                f"{spec.label} ({spec.id}) explains a {' or '.join(TASK_WORDS[t] for t in spec.tasks)}, and this run "
                f"is a {TASK_WORDS.get(task, task)}: pick among {fits}."
            )
        out.append(spec)
    if not out:
        raise ExplainError("--methods names no method.")
    return out


def scene_methods_featured(task: str) -> list[SceneMethodSpec]:
    featured = sorted((s for s in scene_methods(task) if s.featured is not None), key=lambda s: s.featured or 0)
    return featured[:DEFAULT_METHODS] or scene_methods(task)[:DEFAULT_METHODS]


def class_label(classes: tuple[str, ...], name: str) -> int:
    """The label (1..C) of a class named by its name (any case) or number; one line naming the classes if unknown."""
    lowered = [c.lower() for c in classes]
    if name.strip().lower() in lowered:
        return lowered.index(name.strip().lower()) + 1
    if name.strip().isdigit() and 1 <= int(name) <= len(classes):
        return int(name)
    raise ExplainError(f"Unknown class {name!r}: the run's classes are {', '.join(classes)}.")


def pick_targets(
    bundle: SceneBundle,
    prediction: ScenePrediction,
    where: str,
    box: int | None,
    class_name_given: str | None,
    min_score: float,
) -> list[BoxTarget | RegionTarget]:
    """The targets --box / --class choose among the prediction's (every box scoring at least `min_score`, or every
    predicted class's region, when neither is given); one line when the choice names nothing."""
    label = None if class_name_given is None else class_label(bundle.classes, class_name_given)
    if isinstance(prediction, Segmentation):
        if box is not None:
            raise ExplainError("--box picks a detected box; this run is a segmenter: use --class NAME for a region.")
        regions = [r for r in region_targets(prediction) if label is None or r.label == label]
        if not regions:
            what = "any object" if label is None else f"any {class_name(bundle.classes, label)}"
            raise ExplainError(f"The model predicts no pixel of {what} on {where}: nothing to explain.")
        return list(regions)
    assert isinstance(prediction, Detections)
    boxes = detection_targets(prediction, min_score)
    if box is not None:
        if not 1 <= box <= len(boxes):
            found = f"boxes 1-{len(boxes)}" if boxes else "no box"
            raise ExplainError(
                f"There is no box {box}: the model found {found} scoring at least {min_score:g} on {where}."
            )
        boxes = [boxes[box - 1]]
    if label is not None:
        boxes = [b for b in boxes if b.label == label]
    if not boxes:
        what = "no box" if label is None else f"no {class_name(bundle.classes, label)} box"
        raise ExplainError(f"The model found {what} scoring at least {min_score:g} on {where}; lower --min-score.")
    return list(boxes)


def metrics_line(item: SceneExplanation) -> str:
    """One explanation's metrics (or why it failed) as one line; metrics that failed for the same reason share it."""
    if item.error is not None:
        return f"failed: {item.error}"
    parts = [f"{_title(k)} {v:.3f}" for k, v in item.metrics.items()]
    reasons: dict[str, list[str]] = {}
    for key, why in item.metric_errors.items():
        reasons.setdefault(why, []).append(_title(key))
    parts += [f"{', '.join(names)}: {why.rstrip('.')}" for why, names in reasons.items()]
    return " · ".join(parts) or "no metrics"


def _title(key: str) -> str:
    found = SCENE_METRICS.find(key)
    return found.title if found is not None else key


def results_text(results: Sequence[SceneExplanation], classes: tuple[str, ...]) -> str:
    """Per target its description, then one line per method: the method's label and the map's metrics."""
    lines: list[str] = []
    width = max((len(get_scene_method(r.method).label) for r in results), default=0)
    targets: list[BoxTarget | RegionTarget] = []
    for r in results:  # by identity: a RegionTarget holds a tensor, so targets are not compared by value
        if not any(r.target is t for t in targets):
            targets.append(r.target)
    for target in targets:
        lines.append(target.describe(classes))
        lines.extend(
            f"  {get_scene_method(r.method).label:<{width}}  {metrics_line(r)}" for r in results if r.target is target
        )
    return "\n".join(lines)


def checked_params(
    methods: Sequence[SceneMethodSpec], items: list[str] | None, bundle: SceneBundle
) -> dict[str, dict[str, Any]]:
    """--param values per method, checked before any work (a bad value is one line, not a failed method)."""
    params = parse_params(items, methods)
    for spec in methods:
        spec.resolve_params(params[spec.id], layer_choices(bundle))
    return params


def _scenes_explain(args: argparse.Namespace) -> int:
    from xaidash.models.scenes.loading import load_scene_run

    out = Path(args.out).expanduser() if args.out else None
    if out is not None:
        check_result_folder(out, RESULT_JSON)
    bundle = load_scene_run(args.run, device=args.device)
    methods = chosen_methods(bundle, args.methods)
    params = checked_params(methods, args.param, bundle)
    scene = read_scene(bundle, args.input)
    prediction = bundle.predict([scene.image])[0]
    targets = pick_targets(bundle, prediction, scene.name, args.box, args.target_class, args.min_score)

    def progress(fraction: float, text: str) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {text}", file=sys.stderr)

    results = explain_scene(
        bundle,
        scene.image,
        targets,
        [m.id for m in methods],
        params,
        truth=scene.truth,
        metrics=not args.no_metrics,
        progress=progress,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    run_id = bundle.run.id if bundle.run is not None else str(args.run)
    print(f"{scene.name} of {run_id}: {len(targets)} target(s), {len(methods)} method(s)")
    print(results_text(results, bundle.classes))
    if out is not None:
        written = _write(out, args, bundle, scene, prediction, results, run_id)
        print(f"wrote {len(written)} files into {out}")
    return 1 if all(not r.ok for r in results) else 0


def _write(
    out: Path,
    args: argparse.Namespace,
    bundle: SceneBundle,
    scene: Scene,
    prediction: ScenePrediction,
    results: list[SceneExplanation],
    run_id: str,
) -> list[Path]:
    """Each map's PNG, the predictions' PNG, scene.json and (with --report) report.html, into `out`."""
    if isinstance(prediction, Detections):  # the boxes --box numbers (highest score first), not the faint rest
        prediction = prediction.above(args.min_score)
    boxes = prediction if isinstance(prediction, Detections) else None
    files: dict[str, bytes] = {"predictions.png": boxes_png(scene.image, prediction, bundle.classes)}
    entries: list[dict[str, Any]] = []
    for k, item in enumerate(results):
        figure = scene_figure(scene.image, item, boxes, bundle.classes)
        name = f"map-{k + 1:02d}-{item.method}.png" if figure.png is not None else None
        if name is not None and figure.png is not None:
            files[name] = figure.png
        entries.append(_entry(item, bundle.classes, name, figure.value_range))
    if args.report:
        title = f"{scene.name} · {run_id}"
        files[REPORT_HTML] = scene_report_html(scene.image, results, prediction, bundle.classes, title=title).encode()
    document, arrays = result_document(
        "scenes explain",
        {"explanations": entries},
        run=run_id,
        inputs={"input": scene.name, "has_truth": scene.truth is not None},
        parameters=parameters_of(args, leave_out=("run", "input", "out", "quiet")),
        extra={"classes": list(bundle.classes), "task": bundle.task, "predictions": "predictions.png"},
    )
    return write_result(out, RESULT_JSON, document, {**arrays, **files})


def _entry(
    item: SceneExplanation, classes: tuple[str, ...], png: str | None, value_range: tuple[float, float] | None
) -> dict[str, Any]:
    target = item.target
    where: dict[str, Any] = (
        {"box": list(target.box), "index": target.index}
        if isinstance(target, BoxTarget)
        else {"region_pixels": int(target.mask.sum()), "region": target.name}
    )
    return {
        "method": item.method,
        "target": {"text": target.describe(classes), "label": target.label, "class": class_name(classes, target.label)}
        | where,
        "map_png": png,
        "value_range": list(value_range) if value_range is not None else None,
        "seconds": item.seconds,
        "metrics": item.metrics,
        "metric_errors": item.metric_errors,
        "error": item.error,
    }


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`explain` in the `xaidash scenes` group."""
    p = sub.add_parser(
        "explain",
        help="explain a scene model's boxes or regions on one scene, with metrics against the true objects",
        description="Explains one scene's detected boxes (a detector's run) or predicted class regions (a "
        "segmenter's) with the chosen methods; prints each map's pointing game, energy inside the true object, share "
        "on other objects and deletion/insertion AUC of the target's score; with --out writes the maps as PNGs, "
        f"{RESULT_JSON} and, with --report, {REPORT_HTML}.",
    )
    p.add_argument("--run", required=True, help="a scene model's run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--input", default="test:0", help="split:index of the run's data set (default test:0) or an image file"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--box", type=int_range(1), help="explain this detected box only (1 = the highest scoring)")
    which.add_argument("--class", dest="target_class", metavar="NAME", help="only this class's boxes, or its region")
    p.add_argument("--methods", help="comma-separated method ids (default: the task's featured ones)")
    p.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="a method's parameter, repeatable")
    p.add_argument(
        "--min-score",
        type=float_range(0.0, 1.0),
        default=DEFAULT_MIN_SCORE,
        help=f"boxes scoring at least this are numbered and explained (default {DEFAULT_MIN_SCORE})",
    )
    p.add_argument("--out", metavar="DIR", help=f"write the maps' PNGs and {RESULT_JSON} into this folder")
    p.add_argument("--report", action="store_true", help=f"also write {REPORT_HTML} (needs --out)")
    p.add_argument("--no-metrics", action="store_true", help="skip the metrics (no extra model passes)")
    p.add_argument("--batch-size", type=int_range(1), default=32, help="images per model pass (halved on OOM)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=lambda args: one_line_errors(_checked, args))


def _checked(args: argparse.Namespace) -> int:
    if args.report and not args.out:
        raise ExplainError("--report writes report.html into the --out folder: give --out DIR too.")
    return _scenes_explain(args)


def _main(argv: list[str] | None = None) -> int:
    """`python -m xaidash.explainers.scenes.cli explain ...` (until the dashboard's cli wires the group)."""
    parser = argparse.ArgumentParser(prog="xaidash scenes")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(_main())
