"""What a Compare run will take, before it runs: each method's declared model passes (`MethodSpec.count_passes`)
and each metric's declared passes per input (`MetricSpec.passes`), priced by this model's time per row measured
once on a probe batch of its test split (`measure_pass_times`; a page caches it per model).

The price of a map recomputed by a metric (max-sensitivity's neighbours, random-logit's other class) or by the
sanity check (each randomisation step) is the method's own price: a slow method makes those slow too, which is
why Compare offers such metrics unticked. Plain functions, no Streamlit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.explainers.metrics.registry import MetricPasses, MetricSpec, metrics_for
from xaidash.explainers.metrics.road import noisy_linear_imputation
from xaidash.explainers.registry import get_method
from xaidash.explainers.samples import DEFAULT_BACKGROUND, pick_test_sample
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import synchronize

PROBE_ROWS = 128  # rows of the probe batch: near the batches methods and metrics send (a row's time grows with them)
PROBE_REPEATS = 3  # the median of these is kept: a run on a shared machine meets its typical load, not its best


@dataclass(frozen=True)
class PassTimes:
    """Seconds per row of this model, measured on a probe batch: `forward` without gradients, `backward` forward
    and backward to the input, `imputed` one image filled by ROAD's noisy linear imputation (0 where the model
    does not read images)."""

    forward: float
    backward: float
    imputed: float = 0.0
    rows: int = PROBE_ROWS

    def price(self, forward: float = 0.0, backward: float = 0.0, imputed: float = 0.0) -> float:
        """Seconds for these rows."""
        return forward * self.forward + backward * self.backward + imputed * self.imputed


def _median_time(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """The median wall time of `repeats` calls of fn after one warm-up call (the device's queue waited for)."""
    fn()
    times = []
    for _ in range(max(1, repeats)):
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure_pass_times(bundle: ModelBundle, rows: int = PROBE_ROWS, repeats: int = PROBE_REPEATS) -> PassTimes:
    """The model's seconds per row on `rows` inputs of its test split (the best of `repeats` after a warm-up)."""
    raw = pick_test_sample(bundle, n=rows, seed=0).raw
    model = bundle.model
    was_training = model.training
    model.eval()
    try:
        x = bundle.prepare(raw)
        n = bundle.adapter.rows(x)  # a prepared graph batch is no tensor: its adapter counts its inputs

        def forward() -> None:
            with torch.no_grad():
                model(x)

        def backward() -> None:
            # to the input, as the gradient methods take it; token ids are not differentiable (nor is a graph batch
            # a tensor), so the gradient reaches the model's first parameters (a text model's embedding) instead
            floating = isinstance(x, torch.Tensor) and x.is_floating_point()
            leaf = x.detach().requires_grad_(True) if floating else None
            wrt = [leaf] if leaf is not None else [next(p for p in model.parameters() if p.requires_grad)]
            out = model(leaf if leaf is not None else x).float()
            torch.autograd.grad(out.sum(), wrt)

        imputed = 0.0
        if bundle.adapter.spatial and isinstance(raw, torch.Tensor):
            images = np.asarray(raw.cpu(), dtype=np.float64)
            removed = np.random.default_rng(0).random((n, *images.shape[-2:])) < 0.45  # ROAD's mean share removed
            imputed = _median_time(lambda: noisy_linear_imputation(images, removed), torch.device("cpu"), repeats) / n
        return PassTimes(
            forward=_median_time(forward, bundle.device, repeats) / n,
            backward=_median_time(backward, bundle.device, repeats) / n,
            imputed=imputed,
            rows=n,
        )
    finally:
        model.train(was_training)


METRIC_PROBE_INPUTS = 8  # inputs each metric is timed on (its rows batched as in a run of that size)


def measure_metric_seconds(
    bundle: ModelBundle, method: str, steps: int, inputs: int = METRIC_PROBE_INPUTS
) -> dict[str, float]:
    """Seconds per input of every Compare metric that recomputes no map, timed on `inputs` test inputs explained by
    `method` (their cost does not depend on the map: the curves' perturbed copies, ROAD's imputations, captum's
    noisy copies, with every overhead a bare forward pass leaves out). Metrics that do not apply are left out."""
    from xaidash.data.modalities import GroundTruth
    from xaidash.explainers.api import explain
    from xaidash.explainers.metrics.registry import MetricContext
    from xaidash.explainers.modalities import adapter_of

    sample = pick_test_sample(bundle, n=inputs, seed=0)
    e = explain(bundle, sample.raw, None, method)
    ctx = MetricContext(
        bundle=bundle,
        adapter=adapter_of(bundle.modality),
        raw=sample.raw,
        explanation=e,
        method=get_method(method, bundle.modality),
        truth=GroundTruth(sample.masks, sample.rationales),
        steps=steps,
    )
    out: dict[str, float] = {}
    for spec in metrics_for("compare", bundle.modality):
        if spec.recomputes_maps or not spec.applies(ctx):
            continue
        t0 = time.perf_counter()
        spec.compute(ctx)
        out[spec.id] = (time.perf_counter() - t0) / len(e)
    return out


def cheapest_method(bundle: ModelBundle, methods: Sequence[str], times: PassTimes) -> str | None:
    """The method whose maps cost least by their declared passes (None: none declares any): the map the metrics'
    probe scores."""
    priced = [(s, m) for m in methods if (s := method_seconds(bundle, m, {}, 1, times)) is not None]
    return min(priced)[1] if priced else None


SANITY_PROBE_INPUTS = 2  # inputs a method's sanity check is timed on (a randomised model's maps vary in cost)


@dataclass(frozen=True)
class MethodProbe:
    """One method timed on a few probe inputs: seconds per input of its maps of the trained model, and of its
    sanity check (the cascade of randomised models; None when not timed)."""

    maps: float
    sanity: float | None = None


def probe_method(
    bundle: ModelBundle,
    method: str,
    params: Mapping[str, Any],
    sanity_steps: int | None,
    inputs: int = SANITY_PROBE_INPUTS,
) -> MethodProbe:
    """`method` timed on `inputs` test inputs: its maps, then (with `sanity_steps`) its cascading randomisation with
    those steps, the trained maps reused as Compare does. Measured, not declared: a path method refines where its
    promise fails, and a randomised model's maps can cost several times the trained model's (IG refines nearly
    every path there: 7x on resnet_small / shapes)."""
    from xaidash.explainers.api import explain
    from xaidash.explainers.metrics.sanity import cascading_randomization

    raw = pick_test_sample(bundle, n=inputs, seed=0).raw
    t0 = time.perf_counter()
    trained = explain(bundle, raw, None, method, **dict(params))
    maps = (time.perf_counter() - t0) / len(trained)
    if sanity_steps is None:
        return MethodProbe(maps)
    t0 = time.perf_counter()
    cascading_randomization(
        bundle,
        raw,
        [method],
        params={method: dict(params)},
        max_steps=sanity_steps,
        keep_maps=False,
        trained={method: trained},
    )
    return MethodProbe(maps, (time.perf_counter() - t0) / len(trained))


@dataclass
class Estimate:
    """The expected seconds of a Compare run, in parts: the maps, the metrics, the sanity check; and the methods
    that declare no model passes (not priced: their share is missing from the total)."""

    maps: float = 0.0
    metrics: float = 0.0
    sanity: float = 0.0
    unpriced: list[str] = field(default_factory=list)
    per_method: dict[str, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.maps + self.metrics + self.sanity


def method_seconds(
    bundle: ModelBundle, method: str, params: Mapping[str, Any], n: int, times: PassTimes
) -> float | None:
    """Seconds of one method's maps of n inputs from its declared passes (None: it declares none)."""
    spec = get_method(method, bundle.modality)
    resolved = spec.resolve_for(bundle, params)
    background = int(resolved.get("background_size", DEFAULT_BACKGROUND)) if spec.needs_background(resolved) else 0
    try:
        fb, f = spec.count_passes(bundle, dict(params), n, background)
    except ValueError:
        return None
    return times.price(forward=f, backward=fb)


def metric_cost(chosen: Sequence[MetricSpec], steps: int) -> tuple[MetricPasses, float]:
    """The chosen metrics' passes per input summed (model rows and imputations), and the maps they recompute per
    input (those of a `shared` group once)."""
    forward = backward = imputed = maps = 0.0
    groups: set[str] = set()
    for spec in chosen:
        p = spec.passes(steps)
        forward, backward, imputed = forward + p.forward, backward + p.backward, imputed + p.imputed
        if not p.shared or p.shared not in groups:
            maps += p.maps
        groups.add(p.shared)
    return MetricPasses(forward=forward, backward=backward, imputed=imputed), maps


def estimate_compare(
    bundle: ModelBundle,
    methods: Sequence[str],
    params: Mapping[str, Mapping[str, Any]],
    n: int,
    times: PassTimes,
    *,
    metrics: Collection[str] | None = None,
    steps: int = 16,
    sanity: bool = True,
    sanity_inputs: int | None = None,
    sanity_steps: int = 3,
    probes: Mapping[str, MethodProbe] | None = None,
    metric_seconds: Mapping[str, float] | None = None,
) -> Estimate:
    """The expected seconds of `compare_methods` with these settings on n inputs: each method's maps, the chosen
    metrics' passes and recomputed maps, and the sanity check on `sanity_inputs` inputs. A method's map is priced at
    its measured seconds per input where `probes` has it (`probe_method`), else at its declared passes; its sanity
    check at its measured seconds per input, else `sanity_steps` recomputations of its maps; plus the trained
    model's maps when not every input is checked. A metric's own passes are
    priced at its measured seconds per input where `metric_seconds` has them (`measure_metric_seconds`), else at
    its declared rows' price."""
    chosen = [m for m in metrics_for("compare", bundle.modality, bundle) if metrics is None or m.id in metrics]
    measured = dict(metric_seconds or {})
    _, maps_per_input = metric_cost(chosen, steps)
    extra, _ = metric_cost([m for m in chosen if m.id not in measured], steps)
    per_input_metrics = times.price(extra.forward, extra.backward, extra.imputed) + sum(
        measured[m.id] for m in chosen if m.id in measured
    )
    k = n if sanity_inputs is None else max(1, min(sanity_inputs, n))
    out = Estimate(maps=times.price(forward=n))  # the predictions of the sample
    for m in methods:
        probe = (probes or {}).get(m)
        declared = method_seconds(bundle, m, params.get(m, {}), n, times)
        one = probe.maps * n if probe is not None else declared
        if one is None:
            out.unpriced.append(m)
            continue
        per_input = one / max(1, n)
        out.maps += one
        out.metrics += n * per_input_metrics + n * maps_per_input * per_input
        if sanity:
            cascade = probe.sanity if probe is not None and probe.sanity is not None else per_input * sanity_steps
            out.sanity += k * (cascade + (per_input if k < n else 0.0))
        out.per_method[m] = one
    return out


def cost_words(spec: MetricSpec, steps: int = 16) -> str:
    """A metric's declared cost per input in words: 'the map only', '17 forward passes', '10 forward passes + 10
    imputations', '4 recomputed maps'."""
    p = spec.passes(steps)
    named = (
        (p.forward, "forward pass", "forward passes"),
        (p.backward, "forward+backward pass", "forward+backward passes"),
        (p.imputed, "imputation", "imputations"),
        (p.maps, "recomputed map", "recomputed maps"),
    )
    parts = [f"{round(v)} {one if round(v) == 1 else many}" for v, one, many in named if v]
    return " + ".join(parts) if parts else "the map only"
