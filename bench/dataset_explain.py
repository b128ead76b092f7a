"""Whole-dataset explanation speed: the local engine and the Ray engine side by side, on the same run, samples,
methods and chunks, in one process.

Each engine writes a fresh attribution store (in a temporary folder) for samples [0, --n) of the test split;
the time is the whole `explain_dataset` call (model loading in the actors, every chunk, every shard and row
written). Ray's own start-up (`ray.init`) is timed apart and printed, not counted in the Ray figure. The two
stores' maps are compared, and the last lines are

    local: N samples in S s, R samples/s
    ray: N samples in S s, R samples/s (W workers)
    ray/local: X

Without --run, a resnet_small is trained on shapes for one epoch on 512 samples first (a few seconds).

    python bench/dataset_explain.py --n 1000 --methods saliency,ig --workers 2
    python bench/dataset_explain.py --run RUN --n 5000 --metrics --gpus-per-worker 1 --workers 4   # a GPU machine
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _quick_run(root: Path) -> Path:
    from xaidash.models.training.config import TrainConfig
    from xaidash.models.training.engine import train

    os.environ["XAIDASH_RUNS"] = str(root)
    result = train(
        TrainConfig(dataset="shapes", model="resnet_small", epochs=1, batch_size=64, max_train_samples=512, seed=0)
    )
    if not result.ok:
        raise SystemExit(f"training the benchmark's model failed: {result.error}")
    return Path(result.run_dir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", help="run id or folder (default: train a quick resnet_small on shapes)")
    p.add_argument("--n", type=int, default=1000, help="samples 0..n-1 of the test split (default %(default)s)")
    p.add_argument("--methods", default="saliency,ig", help="comma-separated method ids (default %(default)s)")
    p.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="method parameter, repeatable")
    p.add_argument("--metrics", action="store_true", help="also compute the per-input metrics")
    p.add_argument("--workers", type=int, default=2, help="Ray actors (default %(default)s)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs per Ray actor (default 0: CPU)")
    p.add_argument("--chunk-size", type=int, default=100, help="samples per chunk (default %(default)s)")
    p.add_argument("--device", default="auto", help="the local engine's device (default auto)")
    p.add_argument("--engines", default="local,ray", help="which engines to time (default %(default)s)")
    args = p.parse_args(argv)

    import torch

    from xaidash.explainers.dataset.explain import DatasetJob, explain_dataset
    from xaidash.explainers.params import parse_params
    from xaidash.explainers.registry import get_method
    from xaidash.models.runs.store import Run, load_bundle, resolve_run

    tmp = Path(tempfile.mkdtemp(prefix="xaidash-bench-dataset-"))
    run_path = Path(resolve_run(args.run).path) if args.run else _quick_run(tmp / "runs")
    bundle = load_bundle(Run(run_path), device=args.device)
    specs = [get_method(m.strip(), bundle.modality) for m in args.methods.split(",") if m.strip()]
    given = parse_params(args.param, specs)
    params = {s.id: s.resolve_for(bundle, given.get(s.id, {})) for s in specs}
    from xaidash.data.registry import load_split

    split_size = len(load_split(bundle.info.name, "test"))
    n = min(args.n, split_size)
    print(
        f"run {run_path.name} ({bundle.spec.name} on {bundle.info.name}), samples 0..{n - 1} of {split_size}, "
        f"methods {', '.join(params)}, metrics {'on' if args.metrics else 'off'}, chunks of {args.chunk_size}; "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads, "
        f"local device {bundle.device}",
        flush=True,
    )
    results: dict[str, tuple[float, Path]] = {}
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        job = DatasetJob(
            run_path=str(run_path),
            split="test",
            start=0,
            stop=n,
            methods=list(params),
            params=params,
            chunk_size=args.chunk_size,
            with_metrics=args.metrics,
            device=args.device,
        )
        out = tmp / f"store-{engine}"
        if engine == "ray":
            from xaidash.explainers.dataset.ray_engine import init_ray

            began = time.perf_counter()
            init_ray(None, args.workers, args.gpus_per_worker)
            print(f"ray.init: {time.perf_counter() - began:.1f} s (not counted below)", flush=True)
        began = time.perf_counter()
        explain_dataset(
            job,
            out,
            bundle=bundle,
            split_size=split_size,
            engine=engine,
            progress=sys.stderr.isatty(),
            workers=args.workers,
            gpus_per_worker=args.gpus_per_worker,
        )
        results[engine] = (time.perf_counter() - began, out)

    if "local" in results and "ray" in results:
        from xaidash.explainers.dataset.store import open_store_at

        a, b = open_store_at(results["local"][1]), open_store_at(results["ray"][1])
        assert a is not None and b is not None
        worst = max(float(np.abs(np.stack(a.maps(m, range(n))) - np.stack(b.maps(m, range(n)))).max()) for m in params)
        print(f"largest difference between the engines' maps: {worst:.2e}")
    for engine, (seconds, _) in results.items():
        extra = f" ({args.workers} workers)" if engine == "ray" else ""
        print(f"{engine}: {n} samples in {seconds:.1f} s, {n / seconds:.2f} samples/s{extra}")
    if "local" in results and "ray" in results:
        print(f"ray/local: {results['local'][0] / results['ray'][0]:.2f}")
    if "ray" in results:
        import ray

        ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)  # the stores (and the quick run) were only for timing
    return 0


if __name__ == "__main__":
    sys.exit(main())
