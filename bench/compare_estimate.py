"""Compare's expected time against the measured one: the estimate the page shows before its button
(`explainers.comparison.estimate`: the methods' and metrics' declared passes priced by the model's time per row on
a probe batch) beside the wall time of `compare_methods` with the same settings, for the page's default choice and
for a non-default one (every metric, the map-recomputing ones too, without the sanity check), on one run.

The target (issue 29): every estimate within a factor of 1.5 of the measured time on the machine it runs on.

    python bench/compare_estimate.py --run RUN                 # a trained classifier run with a test split
    python bench/compare_estimate.py --run RUN --threads 1 --json /tmp/compare_estimate.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from xaidash.models.device import device_label

FACTOR = 1.5


@dataclass
class Case:
    name: str
    methods: list[str]
    metrics: list[str]
    sanity: bool
    inputs: int
    estimate_s: float = 0.0
    parts: str = ""
    measured_s: float = 0.0
    probe_s: float = 0.0  # timing the metrics' and sanity check's probes (the page does it once per model and settings)
    measured_parts: str = ""
    metric_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.measured_s / self.estimate_s if self.estimate_s else float("inf")

    @property
    def within(self) -> bool:
        return 1 / FACTOR <= self.ratio <= FACTOR


def cases(bundle: Any, inputs: int) -> list[Case]:
    """The page's default (its featured methods, the metrics that recompute no map, the sanity check on every
    input) and every metric without the sanity check."""
    from xaidash.explainers import featured_methods, methods_for
    from xaidash.explainers.metrics.registry import metrics_for

    usable = [m.id for m in methods_for(bundle)]
    methods = featured_methods(bundle.modality, among=usable, limit=4) or usable[:2]
    offered = metrics_for("compare", bundle.modality, bundle)
    default = [m.id for m in offered if not m.recomputes_maps]
    return [
        Case("default", methods, default, True, inputs),
        Case("every metric, no sanity check", methods, [m.id for m in offered], False, inputs),
    ]


def run_case(bundle: Any, case: Case, times: Any) -> Case:
    from xaidash.explainers.comparison.compare import compare_methods
    from xaidash.explainers.comparison.estimate import (
        cheapest_method,
        estimate_compare,
        measure_metric_seconds,
        probe_method,
    )
    from xaidash.explainers.samples import pick_test_sample

    t0 = time.perf_counter()
    probes = {m: probe_method(bundle, m, {}, 3 if case.sanity else None) for m in case.methods}
    cheap = cheapest_method(bundle, case.methods, times)
    metric_s = measure_metric_seconds(bundle, cheap, 16) if cheap else {}
    case.probe_s = time.perf_counter() - t0
    e = estimate_compare(
        bundle,
        case.methods,
        {},
        case.inputs,
        times,
        metrics=case.metrics,
        sanity=case.sanity,
        sanity_steps=3,
        probes=probes,
        metric_seconds=metric_s,
    )
    case.estimate_s = e.seconds
    case.parts = f"maps {e.maps:.1f} s, metrics {e.metrics:.1f} s, sanity {e.sanity:.1f} s"
    sample = pick_test_sample(bundle, n=case.inputs, seed=0)
    with _timed_parts() as parts:
        t0 = time.perf_counter()
        result = compare_methods(bundle, sample, case.methods, metrics=case.metrics, sanity=case.sanity, sanity_steps=3)
        case.measured_s = time.perf_counter() - t0
    maps = sum(e.seconds for e in result.explanations.values())
    case.measured_parts = f"maps {maps:.1f} s, metrics {parts['metrics']:.1f} s, sanity {parts['sanity']:.1f} s"
    case.metric_seconds = {k: round(v, 2) for k, v in parts.items() if k not in ("metrics", "sanity")}
    return case


@contextlib.contextmanager
def _timed_parts() -> Iterator[dict[str, float]]:
    """Seconds spent in each metric's compute and in the sanity check while the block runs (for the printout)."""
    from xaidash.explainers import metrics as M
    from xaidash.explainers.metrics.registry import MetricSpec

    parts: dict[str, float] = {"metrics": 0.0, "sanity": 0.0}
    compute, cascade = MetricSpec.compute, M.cascading_randomization

    def timed_compute(self: MetricSpec, ctx: Any) -> list[float]:
        t0 = time.perf_counter()
        try:
            return compute(self, ctx)
        finally:
            spent = time.perf_counter() - t0
            parts["metrics"] += spent
            parts[self.id] = parts.get(self.id, 0.0) + spent

    def timed_cascade(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return cascade(*args, **kwargs)
        finally:
            parts["sanity"] += time.perf_counter() - t0

    MetricSpec.compute = timed_compute  # type: ignore[method-assign]
    M.cascading_randomization = timed_cascade
    try:
        yield parts
    finally:
        MetricSpec.compute = compute  # type: ignore[method-assign]
        M.cascading_randomization = cascade


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run id or folder: a classifier with a test split")
    ap.add_argument("--inputs", type=int, default=16, help="test inputs (Compare's default: 16)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import xaidash.explainers  # noqa: F401  (registers models and methods)
    from xaidash.explainers.comparison.estimate import measure_pass_times
    from xaidash.models.runs.store import load_bundle

    bundle = load_bundle(args.run, device=args.device)
    t0 = time.perf_counter()
    times = measure_pass_times(bundle)
    probe_s = time.perf_counter() - t0
    print(f"{bundle.spec.name} on {bundle.info.name}, {device_label(bundle.device)}")
    print(
        f"probe ({times.rows} rows, {probe_s:.2f} s): forward {1e3 * times.forward:.2f} ms/row, forward+backward "
        f"{1e3 * times.backward:.2f} ms/row, imputation {1e3 * times.imputed:.2f} ms/image"
    )
    results = []
    for case in cases(bundle, args.inputs):
        run_case(bundle, case, times)
        results.append(case)
        mark = "ok" if case.within else f"OUTSIDE x{FACTOR}"
        print(
            f"{case.name}: {len(case.methods)} methods ({', '.join(case.methods)}), {len(case.metrics)} metrics, "
            f"sanity {'on' if case.sanity else 'off'}, {case.inputs} inputs: estimate {case.estimate_s:.1f} s "
            f"({case.parts}; probes {case.probe_s:.1f} s), measured {case.measured_s:.1f} s "
            f"({case.measured_parts}; per metric {case.metric_seconds}), "
            f"measured/estimate {case.ratio:.2f} [{mark}]"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": asdict(times), "cases": [asdict(c) | {"ratio": c.ratio} for c in results]}, f, indent=1)
    return 0 if all(c.within for c in results) else 1


if __name__ == "__main__":
    sys.exit(main())
