"""Series occlusion, KernelSHAP and LIME speed: xaidash's batched device paths against captum's own calls.

On N random series of T steps (a smooth wave plus noise; the cost does not depend on the values) and a model with
random weights (the zoo's `series_cnn` where it is registered, else `conv1d`: this file's small 1-D CNN of the same
shape), for each method it times
- xaidash: one call for all N series (`explain()` where the series adapter is registered, else the method's compute
  on the context `explain()` builds): every perturbed series of every input built on the device and scored in one
  stream of passes (`ctx.batch_size` rows, at most 64 on a CPU);
- captum: `Occlusion.attribute` on all N series at once (same window, stride and baseline series), and
  `KernelShap.attribute` / `Lime.attribute` once per series with the time segments as the feature mask, on the same
  coalitions (`explainers/methods/series_reference.py`), at each `--captum-ppe` (perturbations_per_eval; 1 is
  captum's default, a larger one its batched use as bench/text_explain_speed.py runs it);
checks that the values are equal (the largest difference relative to the largest value) and prints the ratio
captum / xaidash, the last line per method and setting:

    KernelSHAP (conv1d, 100 series x 150 steps, ppe 1): xaidash 1.14 s, captum 12.36 s, ratio 10.87x (met the 3x
    target), equal (max diff 4e-06)

Every path runs once to warm up, then the best of `--repeats` is kept; CUDA is synchronised. On a CPU both sides are
bound by the model's arithmetic once captum batches its perturbations (a larger ppe; Occlusion batches the series
too): the ratios there are smallest. On a GPU the arithmetic is cheap and captum's per-perturbation Python work
weighs more; run `--device cuda` to measure it.

    python bench/series_speed.py --device cpu --threads 1
    python bench/series_speed.py --device auto --series 100 --steps 150
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.models.device import best_time, device_label, pick_device

METHODS = {"occlusion": "Occlusion", "shap_kernel": "KernelSHAP", "lime": "LIME"}
TARGET_RATIO = 3.0  # issue 31: each at least 3x faster than captum at equal values


@dataclass
class Row:
    method: str
    ppe: int
    xaidash_s: float
    captum_s: float
    max_diff: float  # the largest |xaidash - captum| relative to the largest |captum|

    @property
    def ratio(self) -> float:
        return self.captum_s / self.xaidash_s


class Conv1dNet(nn.Module):
    """Three 1-D conv blocks (32 channels), global average pooling and a linear layer: series_cnn's shape."""

    def __init__(self, channels: int, classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        for c_in, c_out in ((channels, 32), (32, 32), (32, 32)):
            layers += [nn.Conv1d(c_in, c_out, 7, padding=3), nn.BatchNorm1d(c_out), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(2))


def make_bundle(model: str, channels: int, steps: int, device: torch.device) -> Any:
    from xaidash.data.registry import DatasetInfo
    from xaidash.models import ModelBundle, get_spec
    from xaidash.models.registry import ModelSpec

    info = DatasetInfo(
        name="bench_series",
        modality="series",
        classes=("a", "b", "c"),
        input_shape=(channels, steps),
        mean=(0.0,) * channels,
        std=(1.0,) * channels,
        channel_names=tuple(f"channel {c}" for c in range(channels)),
    )
    torch.manual_seed(0)
    if model == "conv1d":
        spec = ModelSpec(name="conv1d", modality="series", build=lambda i: Conv1dNet(channels, 3))
    else:
        spec = get_spec(model)
    return ModelBundle(spec.build(info).to(device).eval(), spec, info, device)


def series(n: int, channels: int, steps: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    t = torch.linspace(0, 6.28, steps)
    phase = torch.rand(n, channels, 1, generator=gen) * 6.28
    return torch.sin(t + phase) + 0.3 * torch.randn(n, channels, steps, generator=gen)


def ours_call(bundle: Any, raw: torch.Tensor, targets: torch.Tensor, method: str, params: dict[str, Any]) -> Callable:
    """xaidash's call: `explain()` where the series adapter is registered, else the compute `explain()` would run.
    Returns a function giving the raw attributions (N, 1 or C, T) of the last call."""
    from xaidash.explainers.modalities import adapter_of
    from xaidash.explainers.params import ExplainError
    from xaidash.explainers.registry import MethodContext, get_method

    spec = get_method(method, "series")
    resolved = spec.resolve_for(bundle, params)
    try:
        through_explain = adapter_of("series") is not None
    except ExplainError:  # the series adapter is not merged in yet: time the compute explain() would run
        through_explain = False

    def call() -> torch.Tensor:
        if through_explain:
            from xaidash.explainers import explain

            e = explain(bundle, raw, targets.tolist(), method, **params)
            return torch.as_tensor(np.stack([np.ravel(e.item(i)) for i in range(len(raw))])).unsqueeze(1)
        ctx = MethodContext(bundle=bundle, x=bundle.prepare(raw), targets=targets, raw=raw, batch_size=256, seed=0)
        return spec.compute(ctx, resolved).attributions.detach().cpu()

    return call


def captum_call(bundle: Any, raw: torch.Tensor, targets: torch.Tensor, method: str, params: dict, ppe: int) -> Callable:
    from xaidash.explainers.methods import series_reference as ref
    from xaidash.explainers.methods._common import kernel_coalitions
    from xaidash.explainers.methods.lime_image import coalitions
    from xaidash.explainers.methods.series_baselines import segment_labels
    from xaidash.explainers.methods.series_occlusion import window_and_stride

    x = bundle.prepare(raw)
    fill = torch.zeros_like(x)  # the 'mean' baseline: each channel's training mean, 0 once standardised
    steps = x.shape[-1]
    if method == "occlusion":
        window, stride = window_and_stride(steps, params)
        return lambda: ref.occlusion_reference(
            bundle.model, x, fill, targets, window, stride, perturbations_per_eval=ppe
        )
    labels = segment_labels(steps, params["segments"])
    k = int(labels.max()) + 1
    samples = params["samples"]
    shap = method == "shap_kernel"
    rows = kernel_coalitions(samples, k, 0)[0] if shap else coalitions(samples, k, 0).numpy()

    def one(i: int) -> torch.Tensor:
        args = (bundle.model, x[i : i + 1], fill[i : i + 1], int(targets[i]), labels, rows)
        if shap:
            return ref.kernel_shap_reference(*args, perturbations_per_eval=ppe)
        return ref.lime_reference(*args, 0.25, perturbations_per_eval=ppe)

    return lambda: torch.cat([one(i).detach() for i in range(len(x))])


def bench(bundle: Any, raw: torch.Tensor, method: str, params: dict, ppe: int, args: argparse.Namespace) -> Row:
    targets = bundle.logits(bundle.prepare(raw)).argmax(1)
    out: dict[str, torch.Tensor] = {}
    ours, theirs = (
        ours_call(bundle, raw, targets, method, params),
        captum_call(bundle, raw, targets, method, params, ppe),
    )

    def run_ours() -> None:
        out["ours"] = ours()

    def run_captum() -> None:
        out["captum"] = theirs()

    xaidash_s = best_time(run_ours, bundle.device, args.repeats)
    # the model is warm by now; captum's slow calls are repeated only while they take under a minute in all
    captum_s = best_time(run_captum, bundle.device, args.repeats, warmup=lambda: None, budget_s=60.0)
    a, b = out["ours"].cpu().double(), out["captum"].cpu().double()[:, :1]  # a window or segment spans the channels
    max_diff = float((a[:, :1] - b).abs().max() / b.abs().max().clamp(min=1e-12))
    return Row(method, ppe, xaidash_s, captum_s, max_diff)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="a series zoo model, or conv1d (default: series_cnn if registered)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    p.add_argument("--series", type=int, default=100, help="series explained in one call")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--shap-samples", type=int, default=300, help="KernelSHAP's default")
    p.add_argument("--lime-samples", type=int, default=1000, help="LIME's default")
    p.add_argument("--segments", type=int, default=16)
    p.add_argument("--captum-ppe", default="1,64", help="captum's perturbations_per_eval settings, comma-separated")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args(argv)
    unknown = [m for m in args.methods.split(",") if m not in METHODS]
    if unknown:
        raise SystemExit(f"Unknown methods: {', '.join(unknown)}; choose from {', '.join(METHODS)}.")
    return args


def default_model() -> str:
    from xaidash.models import list_models

    return "series_cnn" if any(s.name == "series_cnn" for s in list_models()) else "conv1d"


def main(argv: Sequence[str] | None = None) -> list[Row]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    model = args.model or default_model()
    bundle = make_bundle(model, args.channels, args.steps, device)
    raw = series(args.series, args.channels, args.steps)
    print(f"{device_label(device)} | torch {torch.__version__} | {model}, {args.series} series x {args.steps} steps")
    print(f"  {'method':<11} {'ppe':>4}  {'xaidash/series':>15}  {'captum/series':>14}  ratio  max diff")
    rows = []
    for method in args.methods.split(","):
        params: dict[str, Any] = {"baseline": "mean"}
        if method == "occlusion":
            params |= {"window": 0, "stride": 0}
        else:
            params |= {
                "segments": args.segments,
                "samples": args.shap_samples if method == "shap_kernel" else args.lime_samples,
            }
        for ppe in (int(v) for v in args.captum_ppe.split(",")):
            row = bench(bundle, raw, method, params, ppe, args)
            rows.append(row)
            per = 1000 / args.series
            print(
                f"  {METHODS[method]:<11} {ppe:>4}  {row.xaidash_s * per:>12.2f} ms  {row.captum_s * per:>11.2f} ms"
                f"  {row.ratio:>5.1f}x  {row.max_diff:.1e}"
            )
            verdict = "equal" if row.max_diff < 1e-3 else "NOT EQUAL"
            print(
                f"{METHODS[method]} ({model}, {args.series} series x {args.steps} steps, ppe {ppe}): xaidash "
                f"{row.xaidash_s:.2f} s, captum {row.captum_s:.2f} s, ratio {row.ratio:.2f}x "
                f"({'met' if row.ratio >= TARGET_RATIO else 'below'} the {TARGET_RATIO:.0f}x target), {verdict} "
                f"(max diff {row.max_diff:.0e})"
            )
    return rows


if __name__ == "__main__":
    main()
