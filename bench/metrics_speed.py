"""Quality-metric speed: xaidash's batched metrics beside Quantus's call on the same maps, with both results.

On `resnet_small` (random weights, seeded; `--run` loads a trained run instead) and `--n` test images of
`shapes`, one method's maps (`--method`, Grad-CAM by default) are scored by
- sparseness and complexity: `metrics.complexity` vs `quantus.Sparseness` / `quantus.Complexity`
  (abs=True, normalise=False): the same definitions, so the values must agree (to Quantus's 1e-7 offset);
- ROAD: `metrics.road.road_curve` (MoRF and LeRF, 10..90% removed) vs `quantus.ROAD` (MoRF, the same
  percentages and noise): the same imputation (tests/explainers/test_metrics_road.py checks it), but Quantus
  scores whether the predicted class survives (accuracy per percentage) where xaidash reads the target
  probability, so the two values are shown side by side, not compared;
- local Lipschitz and max-sensitivity: `metrics.stability.stability` (both from one batched recomputation) vs
  `quantus.LocalLipschitzEstimate` and `quantus.MaxSensitivity` with xaidash's `explain` as their explain_func,
  the same number of neighbours; Quantus draws Gaussian / its own uniform noise, so the values agree only
  approximately;
- random logit: `metrics.random_logit.random_logit` vs `quantus.RandomLogit` (SSIM, abs, normalised by max).

Each path runs once to warm up and is timed `--repeats` times; the best time is kept (`models.device.best_time`).
Quantus is a test-only dependency (`pip install -e .[test]`).

    python bench/metrics_speed.py --n 16 --device cpu
    python bench/metrics_speed.py --n 64 --device auto --method saliency
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from xaidash.models.device import best_time, device_label, pick_device

SAMPLES = 8  # neighbours per input for the robustness metrics (both libraries)
RADIUS = 0.02
TIMING_BUDGET_S = 10.0  # a path stops repeating once this is spent: Quantus's slow paths run once or twice


@dataclass
class Row:
    metric: str
    ours_s: float
    quantus_s: float | None
    ours: float
    quantus: float | None
    agree: str


class _Raw(nn.Module):
    """The bundle's model on raw [0, 1] images, as Quantus feeds them (its inputs are the images we score);
    `grey`: one-channel inputs, repeated over the model's channels."""

    def __init__(self, bundle: Any, grey: bool = False) -> None:
        super().__init__()
        self.bundle, self.grey = bundle, grey
        self.net = bundle.model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.grey:
            x = x.expand(-1, self.bundle.info.input_shape[0], -1, -1)
        return self.net(self.bundle.prepare(x))


def _timed(fn: Callable[[], Any], repeats: int, device: torch.device) -> tuple[float, Any]:
    out = fn()  # the warm-up, and the value reported
    return best_time(fn, device, repeats, warmup=lambda: None, budget_s=TIMING_BUDGET_S), out


def _mean(values: Any) -> float:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else float("nan")


def run(n: int, method: str, device: torch.device, repeats: int, run_name: str | None = None) -> list[Row]:
    import quantus

    import xaidash.explainers  # noqa: F401  (registers models and methods)
    from xaidash.data.registry import get_source
    from xaidash.explainers import explain
    from xaidash.explainers.metrics.complexity import complexity, sparseness
    from xaidash.explainers.metrics.random_logit import random_logit
    from xaidash.explainers.metrics.road import ROAD_NOISE, road_curve
    from xaidash.explainers.metrics.stability import stability
    from xaidash.explainers.samples import pick_test_sample
    from xaidash.models.bundle import ModelBundle
    from xaidash.models.registry import build_model, get_spec

    if run_name:
        from xaidash.models.runs.store import load_bundle

        bundle = load_bundle(run_name, device=str(device))
    else:
        torch.manual_seed(0)
        info = get_source("shapes").info
        model = build_model("resnet_small", info).eval().to(device)
        bundle = ModelBundle(model, get_spec("resnet_small"), info, device)
    sample = pick_test_sample(bundle, n=n, seed=0)
    raw = cast(torch.Tensor, sample.raw).to(device)
    e = explain(bundle, raw, None, method)
    # Each map over its largest |value|: sparseness and complexity do not change, and Quantus's 1e-7 offset
    # becomes negligible next to the values (Grad-CAM's raw values can be that small).
    raw_maps = np.asarray(e.attributions, dtype=np.float32)[:, None]  # as `explain` gives them (recomputed alike)
    maps = np.asarray(e.attributions, dtype=np.float32)
    maps = maps / np.maximum(np.abs(maps).reshape(len(maps), -1).max(1), 1e-30)[:, None, None]
    x_np, y_np, a_np = raw.cpu().numpy(), np.asarray(e.targets), maps[:, None]
    wrapped = _Raw(bundle).eval()
    q_kw: dict[str, Any] = {"disable_warnings": True, "display_progressbar": False}
    q_call: dict[str, Any] = {"device": str(device), "batch_size": max(n, 1)}

    def q_explain(model: Any, inputs: Any, targets: Any, **_: Any) -> np.ndarray:
        out = explain(bundle, torch.as_tensor(inputs, device=device), np.asarray(targets).tolist(), method)
        return np.asarray(out.attributions, dtype=np.float32)[:, None]

    def quantus_metric(metric: Any, a: np.ndarray | None = a_np, **extra: Any) -> Callable[[], Any]:
        return lambda: metric(model=wrapped, x_batch=x_np, y_batch=y_np, a_batch=a, **q_call, **extra)

    rows: list[Row] = []

    def add(name: str, ours: Callable[[], Any], theirs: Callable[[], Any] | None, agree: str) -> None:
        t_ours, v_ours = _timed(ours, repeats, device)
        t_q, v_q = (None, None)
        if theirs is not None:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                t_q, v_q = _timed(theirs, repeats, device)
        q_value = None if v_q is None else _mean(list(v_q.values()) if isinstance(v_q, dict) else v_q)
        rows.append(Row(name, t_ours, t_q, _mean(v_ours), q_value, agree))

    plain = {"abs": True, "normalise": False, **q_kw}
    add("sparseness", lambda: sparseness(maps, device), quantus_metric(quantus.Sparseness(**plain)), "equal")
    add("complexity", lambda: complexity(maps, device), quantus_metric(quantus.Complexity(**plain)), "equal")
    # Quantus 0.6's ROAD ranks the map broadcast over the channels but imputes pixels (H x W): on colour
    # images it indexes past the image. Both therefore score grey images (one channel repeated over three).
    grey = raw.mean(1, keepdim=True)
    grey3 = grey.expand_as(raw).contiguous()
    percentages = [float(p) for p in range(10, 100, 10)]
    q_road = quantus.ROAD(percentages=percentages, noise=ROAD_NOISE, abs=False, normalise=False, **q_kw)
    road_model = _Raw(bundle, grey=True).eval()
    add(
        "road_morf (grey; ours: mean prob., Quantus: accuracy)",
        lambda: road_curve(bundle, grey3, e, order="morf", seed=0).scores,
        lambda: q_road(model=road_model, x_batch=grey.cpu().numpy(), y_batch=y_np, a_batch=a_np, **q_call),
        "differ by design",
    )
    add("road_lerf", lambda: road_curve(bundle, raw, e, order="lerf", seed=0).scores, None, "")
    robust = {"nr_samples": SAMPLES, "abs": False, "normalise": False, "return_aggregate": False, **q_kw}
    q_lip = quantus.LocalLipschitzEstimate(perturb_std=RADIUS, **robust)
    q_sens = quantus.MaxSensitivity(lower_bound=RADIUS, **robust)
    add(
        "local_lipschitz + max_sensitivity (one recomputation)",
        lambda: stability(bundle, raw, method, e, samples=SAMPLES, radius=RADIUS, seed=0).lipschitz,
        quantus_metric(q_lip, raw_maps, explain_func=q_explain),
        "approx. (Gaussian vs uniform noise)",
    )
    add(
        "max_sensitivity",
        lambda: stability(bundle, raw, method, e, samples=SAMPLES, radius=RADIUS, seed=0).max_sensitivity,
        quantus_metric(q_sens, raw_maps, explain_func=q_explain),
        "approx. (noise draws)",
    )
    classes = bundle.info.num_classes
    q_rl = quantus.RandomLogit(num_classes=classes, seed=0, abs=True, normalise=True, **q_kw)
    add(
        "random_logit",
        lambda: random_logit(bundle, raw, e, seed=0),
        quantus_metric(q_rl, raw_maps, explain_func=q_explain),
        "approx. (class draws, SSIM settings)",
    )
    return rows


def _fmt(v: float | None, digits: int = 4) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def print_table(rows: Sequence[Row], n: int, method: str, device: torch.device) -> None:
    print(f"Quality metrics on {n} shapes images, {method} maps, {device_label(device)}")
    print(f"{'metric':<55} {'xaidash s':>10} {'Quantus s':>10} {'speed-up':>9} {'xaidash':>9} {'Quantus':>9}  agree")
    for r in rows:
        speed = "–" if r.quantus_s is None else f"{r.quantus_s / max(r.ours_s, 1e-9):.1f}x"
        print(
            f"{r.metric:<55} {r.ours_s:>10.4f} {_fmt(r.quantus_s):>10} {speed:>9} "
            f"{_fmt(r.ours):>9} {_fmt(r.quantus):>9}  {r.agree}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16, help="images scored (default 16)")
    parser.add_argument("--method", default="gradcam", help="the method whose maps are scored (default gradcam)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per path; the best is kept (default 3)")
    parser.add_argument("--run", default=None, help="a trained run's name to load instead of random weights")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    os.environ.setdefault("XAIDASH_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import quantus  # noqa: F401
    except ImportError:
        print("Quantus is not installed: pip install -e .[test]", file=sys.stderr)
        return 2
    device = pick_device(args.device)
    rows = run(args.n, args.method, device, args.repeats, args.run)
    print_table(rows, args.n, args.method, device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
