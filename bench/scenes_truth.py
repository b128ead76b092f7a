"""Pointing game and energy per scene method against the exact ground truth of `scenes`, on a trained detector and a
trained segmenter.

For each of the first `--scenes` test scenes: the detector's boxes scoring at least 0.5 that match a true object
(same class, IoU >= 0.5; false detections are counted, not scored), or the segmenter's predicted class regions of
classes the scene holds, each explained by every method of the task (`SCENE_METHODS`, through `explain_scene`) and
scored by `metrics.score_map`: pointing game (2 px tolerance), energy inside the object's true mask, share on other
objects, and deletion/insertion AUC of the target's score (with --curves). Prints one table per task (means over the
targets, and how many) and writes the per-target values as JSON with --json.

    python bench/scenes_truth.py --detector RUN --segmenter RUN --scenes 50 --threads 1 [--json out.json]

Without a run, trains one with the zoo's recipe (minutes on a CPU; --train-count cuts its training images).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

COLUMNS = ("pointing_game", "energy", "off_object", "deletion", "insertion")


def open_run(run: str | None, model: str, train_count: int | None) -> Any:
    """The scene run's bundle, trained first (the zoo's recipe) when no run is given."""
    from xaidash.models.scenes.loading import load_scene_run
    from xaidash.models.scenes.train import SceneTrainSettings, train_scene_model

    if run is None:
        started = time.perf_counter()
        trained = train_scene_model(SceneTrainSettings("scenes", model, train_count=train_count, device="cpu"))
        print(f"trained {model}: {trained.path} in {time.perf_counter() - started:.0f} s")
        return load_scene_run(trained, device="cpu")
    path = Path(run)
    return load_scene_run(path if path.is_dir() else run, device="cpu")


def measure(bundle: Any, count: int, params: dict[str, dict[str, Any]], curves: bool, start: int = 0) -> dict[str, Any]:
    """Every method of the bundle's task on test scenes start .. start + count - 1: per method the list of per-target
    metric dicts, the seconds, and the false detections left out."""
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.explainers.scenes.api import explain_scene
    from xaidash.explainers.scenes.compare import scene_targets
    from xaidash.explainers.scenes.metrics import score_map
    from xaidash.explainers.scenes.registry import scene_methods

    split = load_scene_set(bundle.dataset or "scenes", "test", start + count)
    split = split.subset(list(range(start, len(split))))
    methods = [m.id for m in scene_methods(bundle.task)]
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    false_boxes = 0
    for i in range(len(split)):
        image, truth = split.images[i], split.targets[i]
        found = scene_targets(bundle, image, truth)  # boxes that match a true object; false ones counted
        targets = found.targets
        false_boxes += found.false_detections
        if not targets:
            continue
        results = explain_scene(bundle, image, targets, methods, params, truth=truth, metrics=False)
        for item in results:
            if item.map is None:
                print(f"scene {i} {item.method}: {item.error}")
                continue
            values, _ = score_map(bundle, image, item.target, item.map, truth, curves=curves)
            rows[item.method].append(values)
            seconds[item.method] += item.seconds / len(targets)
        print(f"scene {start + i}: {len(targets)} target(s)", flush=True)
    return {"rows": dict(rows), "seconds": dict(seconds), "false_detections": false_boxes, "methods": methods}


def table(result: dict[str, Any], title: str) -> str:
    """The means per method (NaN-free values only), the count of targets, and seconds per target."""
    head = ("method", "targets", *COLUMNS, "s/target")
    lines = [title, "  ".join(f"{h:>14}" for h in head)]
    for method in result["methods"]:
        rows = result["rows"].get(method, [])
        means = []
        for key in COLUMNS:
            values = [r[key] for r in rows if key in r and np.isfinite(r[key])]
            means.append(f"{np.mean(values):.3f}" if values else "-")
        per = result["seconds"].get(method, 0.0) / max(1, len(rows)) * 1.0
        lines.append("  ".join(f"{x:>14}" for x in (method, str(len(rows)), *means, f"{per:.2f}")))
    return "\n".join(lines)


def merged(paths: list[str]) -> dict[str, Any]:
    """The per-target values of several --json files (parts of the test split measured apart) as one result per
    task."""
    out: dict[str, Any] = {}
    for path in paths:
        for task, part in json.loads(Path(path).read_text()).items():
            into = out.setdefault(task, {"rows": defaultdict(list), "seconds": defaultdict(float), "methods": []})
            into["methods"] = into["methods"] or part["methods"]
            for method, rows in part["rows"].items():
                into["rows"][method].extend(rows)
                into["seconds"][method] += part["seconds"].get(method, 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--detector", help="a fasterrcnn_small run on scenes (id or folder); trained when absent")
    parser.add_argument("--segmenter", help="a unet_small run on scenes (id or folder); trained when absent")
    parser.add_argument("--tasks", default="detect,segment", help="which tasks to measure")
    parser.add_argument("--scenes", type=int, default=50, help="test scenes (N from --start)")
    parser.add_argument("--start", type=int, default=0, help="the first test scene")
    parser.add_argument("--masks", type=int, default=2000, help="D-RISE masks")
    parser.add_argument("--train-count", type=int, default=None, help="training images when a run is trained here")
    parser.add_argument("--curves", action="store_true", help="also deletion/insertion AUC (2 x 17 passes per map)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the per-target values here")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="print the tables of several --json files joined")
    args = parser.parse_args(argv)
    if args.merge:
        for task, result in merged(args.merge).items():
            print(table(result, f"{task}: {len(args.merge)} parts joined"))
        return 0
    torch.set_num_threads(args.threads)
    import xaidash.explainers.scenes.api  # noqa: F401  - registers every scene method

    params = {"drise": {"masks": args.masks}}
    out: dict[str, Any] = {}
    for task, run, model in (("detect", args.detector, "fasterrcnn_small"), ("segment", args.segmenter, "unet_small")):
        if task not in args.tasks:
            continue
        bundle = open_run(run, model, args.train_count)
        started = time.perf_counter()
        result = measure(bundle, args.scenes, params, args.curves, args.start)
        result["seconds_total"] = time.perf_counter() - started
        result["run"] = str(bundle.run.path) if bundle.run is not None else None
        out[task] = result
        title = f"{task}: {model} on test scenes {args.start}-{args.start + args.scenes - 1} of scenes"
        print(table(result, title))
        if task == "detect":
            print(f"false detections (score >= 0.5, no true object): {result['false_detections']}")
        print(f"{result['seconds_total']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
