"""Explanation speed: every image method against the cost of its own model passes, and the
libraries' default calls against xaidash's, on one device in one run.

For each method and model (`resnet_small` on 32x32 `shapes` images, torchvision `resnet18` with
random weights on the same images upscaled to 224x224) it prints:
- the wall time per input of `explainers.explain` (several inputs per call, targets given);
- the model passes the method makes per input ("50 f+b, 2 f": 50 forward+backward passes and
  2 forward-only ones; extras such as IG's convergence delta are counted) and the time of exactly
  those passes alone, batched like the method ran (column "batch": its rows per pass, `--batch-size`
  or less), gradients taken with respect to the input only, as captum and shap do;
- the ratio method time / passes-alone time (1x = the method adds nothing to its passes).

Then, with the same number of samples, the libraries' default usage against xaidash's method:
- LIME: lime's default call `LimeImageExplainer().explain_instance(image, classifier_fn,
  num_samples=S)` (its quickshift superpixels, top_labels=5, batch_size=10) vs `lime`;
- SHAP: `shap.GradientExplainer(model, background)` (default batch_size=50) with
  `shap_values(x, nsamples=S, ranked_outputs=1)` vs `shap_gradient` on the same background
  (ranked_outputs=1 explains the predicted class, as ours does; shap's bare default would
  explain every one of the 1,000 resnet18 classes);
- IG: captum `IntegratedGradients(model).attribute(x, target=t, n_steps=S)` without
  `internal_batch_size` vs `ig`.

Every path is run once to warm up (library paths: on the first input), then timed up to
`--repeats` times (fewer once 5 s are spent on it); the best time is kept. CUDA is synchronised
around every timing. On a shared CPU the numbers are noisy: `--threads 1` steadies them.

    python bench/explain_speed.py --device auto              # everything (meant for a GPU)
    python bench/explain_speed.py --quick --device cpu       # resnet_small, a few methods, fewer samples
    python bench/explain_speed.py --methods lime,ig --models resnet18 --lime-samples 1000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import torch
import torch.nn.functional as F

from xaidash.data.errors import XaidashError
from xaidash.models.device import best_time, device_label, pick_device

# Timing of one call stops repeating once this many seconds are spent, so slow reference paths run once or twice.
TIMING_BUDGET_S = 5.0


def quick_methods() -> tuple[str, ...]:
    """`--quick`'s methods: every featured image method (`MethodSpec.featured`), by rank."""
    import xaidash.explainers  # noqa: F401  (registers models and methods)
    from xaidash.explainers.registry import featured_methods

    return tuple(featured_methods("image"))


def all_methods() -> tuple[str, ...]:
    """Every registered image method, in registration order: a new method is benchmarked without an edit here."""
    import xaidash.explainers  # noqa: F401  (registers models and methods)
    from xaidash.explainers.registry import list_methods

    return tuple(m.id for m in list_methods("image"))


ALL_MODELS = ("resnet_small", "resnet18")

# Samples/steps per method: (parameter name, full-run default, --quick default).
SAMPLE_PARAMS: dict[str, tuple[str, int, int]] = {
    "smoothgrad": ("samples", 25, 8),
    "ig": ("steps", 50, 16),
    "lime": ("samples", 1000, 200),
    "shap_gradient": ("samples", 200, 50),
    "shap_kernel": ("samples", 300, 100),
}
SAMPLE_FLAGS = {
    "smoothgrad": "smoothgrad_samples",
    "ig": "ig_steps",
    "lime": "lime_samples",
    "shap_gradient": "shap_samples",
    "shap_kernel": "kernel_samples",
}


@dataclass
class MethodResult:
    model: str
    method: str
    setting: str
    per_input_s: float
    passes: str
    passes_alone_s: float  # per input
    ratio: float
    batch: int = 0  # rows per model pass the method ran at (its 'batch_size' diagnostic), used for the passes alone


@dataclass
class Comparison:
    model: str
    name: str
    library_call: str
    library_s: float  # per input
    xaidash_s: float  # per input
    speedup: float


@dataclass
class Report:
    header: dict[str, Any]
    methods: list[MethodResult] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- timing


def run_passes(
    model: torch.nn.Module, x: torch.Tensor, targets: torch.Tensor, fwd_bwd: int, fwd: int, batch_size: int
) -> None:
    """`fwd_bwd` forward+backward passes (gradient w.r.t. the input only, like captum/shap) and `fwd`
    forward-only ones, rows cycled from x, `batch_size` rows per pass."""

    def rows(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.arange(n, device=x.device) % len(x)
        return x[idx], targets[idx]

    for start in range(0, fwd_bwd, batch_size):
        xb, tb = rows(min(batch_size, fwd_bwd - start))
        xb = xb.detach().requires_grad_()
        score = model(xb).gather(1, tb.view(-1, 1)).sum()
        torch.autograd.grad(score, xb)
    with torch.no_grad():
        for start in range(0, fwd, batch_size):
            xb, _ = rows(min(batch_size, fwd - start))
            model(xb)


def model_passes(bundle: Any, method: str, params: dict[str, Any], n: int, background: int) -> tuple[int, int]:
    """(forward+backward, forward-only) passes one `explain` call on n inputs sharing one target makes,
    as the method's spec declares them (tests/bench counts them with a hook)."""
    from xaidash.explainers.registry import get_method

    return get_method(method, "image").count_passes(bundle, params, n, background)


def describe_passes(fwd_bwd: int, fwd: int, n: int) -> str:
    parts = [f"{fwd_bwd / n:g} f+b" if fwd_bwd else "", f"{fwd / n:g} f" if fwd else ""]
    return ", ".join(p for p in parts if p)


# ---------------------------------------------------------------- setup


def make_bundle(name: str, device: torch.device):
    """A bundle of a benchmark model with random weights on `device`."""
    from xaidash.data.registry import DatasetInfo, get_info
    from xaidash.models import ModelBundle, build_model, get_spec

    torch.manual_seed(0)
    if name == "resnet_small":
        info = get_info("shapes")
        model = build_model(name, info)
    elif name == "resnet18":
        info = DatasetInfo(
            name="imagenet-like",
            modality="image",
            classes=tuple(str(i) for i in range(1000)),
            input_shape=(3, 224, 224),
            mean=(0.485, 0.456, 0.406),
            std=(0.229, 0.224, 0.225),
        )
        model = build_model(name, info, pretrained=False)  # random weights: no download, same cost
    else:
        raise SystemExit(f"Unknown benchmark model {name!r}: choose from {', '.join(ALL_MODELS)}.")
    return ModelBundle(model.to(device).eval(), get_spec(name), info, device)


def images(n: int, size: int) -> torch.Tensor:
    """The first n `shapes` test images (generated, offline) in [0, 1], resized to size x size."""
    from xaidash.data.registry import ImageSplit, load_split

    split = load_split("shapes", "test")
    if not isinstance(split, ImageSplit) or split.images is None:
        raise SystemExit("The shapes test split did not load as images.")
    x = split.images[:n]
    if x.shape[-1] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)
    return x


def header(device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    def ver(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    where = device_label(device)
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": where,
        "torch": torch.__version__,
        "captum": ver("captum"),
        "shap": ver("shap"),
        "lime": ver("lime"),
        "python": platform.python_version(),
        "inputs_per_call": args.inputs,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "background": args.background,
        "quick": args.quick,
    }


# ---------------------------------------------------------------- runs


def method_params(method: str, args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if method in SAMPLE_PARAMS:
        name, full, quick = SAMPLE_PARAMS[method]
        given = getattr(args, SAMPLE_FLAGS[method])
        params[name] = given if given is not None else (quick if args.quick else full)
    from xaidash.explainers.registry import get_method

    if any(p.name == "background_size" for p in get_method(method, "image").params):
        params["background_size"] = args.background  # all of the background given, as shap's default uses it
    return params


def bench_method(
    bundle,
    method: str,
    raw: torch.Tensor,
    x: torch.Tensor,
    targets: torch.Tensor,
    background: torch.Tensor,
    args: argparse.Namespace,
) -> MethodResult:
    from xaidash.explainers import explain

    params = method_params(method, args)
    n, device = len(raw), bundle.device

    ran_at = [args.batch_size]

    def ours() -> None:
        e = explain(bundle, raw, targets.cpu(), method, batch_size=args.batch_size, background=background, **params)
        # the passes alone run batched like the method ran (methods cap the batch on a CPU, halve it on OOM)
        ran_at[0] = int(e.diagnostics.get("batch_size", [args.batch_size])[0])

    seconds = best_time(ours, device, args.repeats, budget_s=TIMING_BUDGET_S)
    fb, f = model_passes(bundle, method, params, n, len(background))
    alone = best_time(
        lambda: run_passes(bundle.model, x, targets, fb, f, ran_at[0]), device, args.repeats, budget_s=TIMING_BUDGET_S
    )
    setting = ", ".join(f"{k.replace('_size', '')}={v}" for k, v in params.items()) or "-"
    return MethodResult(
        bundle.spec.name,
        method,
        setting,
        seconds / n,
        describe_passes(fb, f, n),
        alone / n,
        seconds / alone if alone > 0 else float("inf"),
        ran_at[0],
    )


def compare_lime(
    bundle, raw: torch.Tensor, targets: torch.Tensor, ours_s: float, args: argparse.Namespace
) -> Comparison:
    """lime's default call, `LimeImageExplainer().explain_instance(image, classifier_fn, num_samples=S)`
    (quickshift superpixels, top_labels=5, batch_size=10, superpixels hidden with their mean colour), on
    the same model, images and number of samples, against `ours_s`, the per-input time of xaidash's
    `lime` from the method table (default settings: slic superpixels, one label)."""
    import numpy as np
    from lime.lime_image import LimeImageExplainer

    samples = method_params("lime", args)["samples"]
    channels = raw.shape[1]

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(batch, dtype=torch.float32).permute(0, 3, 1, 2)[:, :channels]
        return bundle.predict_proba(x, batch_size=len(x)).double().numpy()  # lime hands over 10 at a time

    def reference(k: int) -> Callable[[], None]:
        def call() -> None:
            # lime's explain_instance always draws a tqdm bar on stderr; keep the table readable
            with contextlib.redirect_stderr(io.StringIO()):
                for i in range(k):
                    image = raw[i].permute(1, 2, 0).double().numpy()
                    LimeImageExplainer(random_state=0).explain_instance(image, classifier_fn, num_samples=samples)

        return call

    lib = best_time(
        reference(len(raw)), bundle.device, args.repeats, warmup=reference(1), budget_s=TIMING_BUDGET_S
    ) / len(raw)
    return Comparison(
        bundle.spec.name,
        f"LIME {samples} samples",
        "lime explain_instance defaults (quickshift, top_labels=5, batch_size=10)",
        lib,
        ours_s,
        lib / ours_s,
    )


def compare_shap(
    bundle, x: torch.Tensor, background: torch.Tensor, ours_s: float, args: argparse.Namespace
) -> Comparison:
    """shap's GradientExplainer with its defaults against `ours_s` (xaidash's `shap_gradient`, same background)."""
    import shap

    samples = method_params("shap_gradient", args)["samples"]

    def library(k: int) -> Callable[[], None]:
        def call() -> None:
            explainer = shap.GradientExplainer(bundle.model, background)  # shap's defaults (batch_size=50)
            explainer.shap_values(x[:k].detach(), nsamples=samples, ranked_outputs=1, rseed=0)

        return call

    lib = best_time(library(len(x)), bundle.device, args.repeats, warmup=library(1), budget_s=TIMING_BUDGET_S) / len(x)
    return Comparison(
        bundle.spec.name,
        f"SHAP gradient {samples} samples",
        "shap GradientExplainer defaults (batch_size=50, ranked_outputs=1)",
        lib,
        ours_s,
        lib / ours_s,
    )


def compare_ig(bundle, x: torch.Tensor, targets: torch.Tensor, ours_s: float, args: argparse.Namespace) -> Comparison:
    """captum's IG on all inputs at once, no internal_batch_size, against `ours_s` (xaidash's `ig`)."""
    from captum.attr import IntegratedGradients

    steps = method_params("ig", args)["steps"]

    def library() -> None:
        IntegratedGradients(bundle.model).attribute(x.detach(), target=targets, n_steps=steps)

    lib = best_time(library, bundle.device, args.repeats, budget_s=TIMING_BUDGET_S) / len(x)
    return Comparison(
        bundle.spec.name,
        f"IG {steps} steps",
        "captum IntegratedGradients (no internal_batch_size)",
        lib,
        ours_s,
        lib / ours_s,
    )


# ---------------------------------------------------------------- output


def fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def print_report(report: Report, small_factor: float, out: Any = None) -> None:
    out = out or sys.stdout
    h = report.header
    print(f"xaidash explanation speed  {h['timestamp']}", file=out)
    print(
        f"device {h['device']} | torch {h['torch']} | captum {h['captum']} | shap {h['shap']} | lime {h['lime']} | "
        f"python {h['python']}",
        file=out,
    )
    n = h["inputs_per_call"]
    print(
        f"{n} input{'s' if n != 1 else ''} per call, batch size {h['batch_size']}, background {h['background']} images, "
        f"best of up to {h['repeats']} after 1 warm-up{' (--quick)' if h['quick'] else ''}",
        file=out,
    )
    print(file=out)
    cols = ("model", "method", "setting", "batch", "per input", "model passes per input", "passes alone", "ratio")
    rows = [
        (
            r.model,
            r.method,
            r.setting,
            str(r.batch),
            fmt_s(r.per_input_s),
            r.passes,
            fmt_s(r.passes_alone_s),
            f"{r.ratio:.1f}x",
        )
        for r in report.methods
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(cols)]
    right = {3, 4, 6, 7}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(cols), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print(line(row), file=out)
    if report.comparisons:
        print("\nLibrary defaults vs xaidash, same samples, time per input:", file=out)
        for c in report.comparisons:
            print(
                f"  {c.model}: {c.name}: {c.library_call} {fmt_s(c.library_s)}, xaidash {fmt_s(c.xaidash_s)}, "
                f"{c.speedup:.1f}x",
                file=out,
            )
    for s in report.skipped:
        print(f"skipped: {s}", file=out)
    if report.methods:
        worst = max(report.methods, key=lambda r: r.ratio)
        over = [f"{r.model}/{r.method} {r.ratio:.1f}x" for r in report.methods if r.ratio > small_factor]
        print(
            f"\nGoal (stated for a GPU): every method within {small_factor:g}x of its passes alone: "
            f"{'met' if not over else 'not met: ' + ', '.join(over)} (worst {worst.model}/{worst.method} {worst.ratio:.1f}x)",
            file=out,
        )
    for model in dict.fromkeys(r.model for r in report.methods):
        mine = [r for r in report.methods if r.model == model]
        print(
            f"{model}: all {len(mine)} methods for one input: {fmt_s(sum(r.per_input_s for r in mine))} "
            "(goal on an H100 for resnet18 at 224 px: under 1 s)",
            file=out,
        )
    for c in report.comparisons:
        if c.name.startswith("LIME"):
            print(
                f"Goal: LIME >= 10x faster than lime's default call on {c.model}: "
                f"{'met' if c.speedup >= 10 else 'not met'} ({c.speedup:.1f}x, {c.name})",
                file=out,
            )


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--quick", action="store_true", help="resnet_small only, a few methods, fewer samples (CPU check)")
    ap.add_argument(
        "--methods",
        help="comma-separated method ids (default: all; --quick: the featured ones, by MethodSpec.featured)",
    )
    ap.add_argument(
        "--models", help=f"comma-separated, from {','.join(ALL_MODELS)} (default: both; --quick: resnet_small)"
    )
    ap.add_argument(
        "--repeats", type=int, default=5, help="timed runs per path at most, best kept (fewer once 5 s are spent)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--inputs", type=int, default=None, help="inputs per explain call (default 4; --quick 2)")
    ap.add_argument("--batch-size", type=int, default=256, help="rows per model pass for xaidash's methods")
    ap.add_argument("--background", type=int, default=50, help="background images for the SHAP methods")
    for method, (name, full, quick) in SAMPLE_PARAMS.items():
        flag = "--" + SAMPLE_FLAGS[method].replace("_", "-")
        ap.add_argument(flag, type=int, default=None, help=f"{method} {name} (default {full}; --quick {quick})")
    ap.add_argument(
        "--small-factor", type=float, default=3.0, help="ratio to its passes alone every method should stay within"
    )
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    args.inputs = args.inputs if args.inputs is not None else (2 if args.quick else 4)
    if min(args.inputs, args.repeats, args.batch_size, args.background, args.threads or 1) < 1:
        ap.error("--inputs, --repeats, --batch-size, --background and --threads must be at least 1")
    return args


def _choose(given: str | None, default: Sequence[str], known: Sequence[str], what: str) -> list[str]:
    chosen = [s.strip() for s in given.split(",") if s.strip()] if given else list(default)
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise SystemExit(f"Unknown {what}: {', '.join(unknown)}. Known: {', '.join(known)}.")
    return chosen


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(argv)
    os.environ.setdefault("XAIDASH_OFFLINE", "1")  # a benchmark never waits on downloads
    import xaidash.explainers  # noqa: F401  (registers models and methods)
    from xaidash.explainers.registry import get_method

    known = all_methods()
    methods = _choose(args.methods, quick_methods() if args.quick else known, known, "methods")
    model_names = _choose(args.models, ("resnet_small",) if args.quick else ALL_MODELS, ALL_MODELS, "models")
    try:
        device = pick_device(args.device)
    except XaidashError as err:
        raise SystemExit(f"--device {args.device}: {err}") from None
    if args.threads:
        torch.set_num_threads(args.threads)
    report = Report(header(device, args))
    for name in model_names:
        bundle = make_bundle(name, device)
        side = bundle.info.input_shape[-1]
        pool = images(args.inputs + args.background, side)
        raw = pool[: args.inputs]
        background = bundle.prepare(pool[args.inputs :])
        x = bundle.prepare(raw)
        with torch.no_grad():
            targets = bundle.model(x).argmax(1)
        ours: dict[str, float] = {}
        for method in methods:
            if not get_method(method, "image").supports(bundle):
                report.skipped.append(f"{name}/{method}: does not apply")
                continue
            result = bench_method(bundle, method, raw, x, targets, background, args)
            report.methods.append(result)
            ours[method] = result.per_input_s
            print(
                f"  {name} {method}: {fmt_s(result.per_input_s)} per input ({result.ratio:.1f}x its passes)",
                file=sys.stderr,
            )
        # The library calls, against the same xaidash timings as in the table (same samples, inputs, targets).
        if "lime" in ours:
            report.comparisons.append(compare_lime(bundle, raw, targets, ours["lime"], args))
        if "shap_gradient" in ours:
            report.comparisons.append(compare_shap(bundle, x, background, ours["shap_gradient"], args))
        if "ig" in ours:
            report.comparisons.append(compare_ig(bundle, x, targets, ours["ig"], args))
    print_report(report, args.small_factor)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(asdict(report), fh, indent=2)
    return report


if __name__ == "__main__":
    main()
