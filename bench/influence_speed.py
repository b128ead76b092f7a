"""Training-data influence speed: xaidash's `tracin_fast` beside captum's own `TracInCPFast` on the same run,
checkpoints, learning rates, training samples and queries, with the rank correlation of their scores.

The run's folder is copied to a temporary runs root (its influence cache starts empty, the run is not touched), then:

- xaidash self-influence over the whole training set, from an empty cache (every checkpoint's training features
  computed and cached, then the self-influence job): the issue's target is under a minute on 2 CPU cores for
  shapes' 5,400 training samples with 3 checkpoints;
- xaidash influence of --queries test inputs on every training sample, with the cache warm (what each query costs);
- captum's TracInCPFast.influence on the same queries (one batch) and its self_influence over the same samples;
- Spearman's rank correlation of the scores, per query: captum's definition (no bias term, `bias=False`) and
  xaidash's default (the final layer's bias included).

Without --run, resnet_small is trained on shapes for --epochs epochs (3 checkpoints; about 20 s on one core).

    python bench/influence_speed.py --threads 2
    python bench/influence_speed.py --run RUN --device cuda
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def _quick_run(root: Path, epochs: int, max_train_samples: int, device: str) -> Path:
    from xaidash.models.training.config import TrainConfig
    from xaidash.models.training.engine import train

    os.environ["XAIDASH_RUNS"] = str(root)
    cfg = TrainConfig(dataset="shapes", model="resnet_small", epochs=epochs, batch_size=64, lr=3e-3, seed=1)
    result = train(replace(cfg, max_train_samples=max_train_samples, device=device, optimizer="adamw"))
    if not result.ok:
        raise SystemExit(f"training the benchmark's model failed: {result.error}")
    return Path(result.run_dir)


def _copy(run_dir: Path, root: Path) -> Path:
    """The run without its influence folder, under `root` (a fresh cache; the original is left as it was)."""
    target = root / run_dir.name
    shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("influence", "attributions", ".lock"))
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", help="run id or folder (default: train resnet_small on shapes)")
    p.add_argument("--epochs", type=int, default=3, help="epochs of the trained run (default %(default)s)")
    p.add_argument("--max-train-samples", type=int, default=0, help="cap of the trained run (default 0: all)")
    p.add_argument("--queries", type=int, default=5, help="test inputs explained (default %(default)s)")
    p.add_argument("--device", default="cpu", help="device of both (default %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default %(default)s)")
    p.add_argument("--no-captum", action="store_true", help="time xaidash alone")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="xaidash-influence-bench-") as tmp:
        if args.run:
            from xaidash.models.runs.store import resolve_run

            source = resolve_run(args.run).path
        else:
            source = _quick_run(Path(tmp) / "trained", args.epochs, args.max_train_samples, args.device)
        return _bench(_copy(source, Path(tmp) / "runs"), args)


def _bench(run_dir: Path, args: argparse.Namespace) -> int:
    import torch

    from xaidash.data.registry import load_split
    from xaidash.explainers.influence import explain_influence, run_self_influence
    from xaidash.explainers.influence.training_set import training_data
    from xaidash.models.runs.store import Run, load_bundle

    run = Run(run_dir)
    bundle = load_bundle(run, device=args.device)
    data = training_data(run)
    checkpoints = run.checkpoints()
    print(
        f"run {run.id}: {bundle.spec.name} on {bundle.info.name}, {len(data):,} training samples, "
        f"{len(checkpoints)} checkpoints, device {bundle.device}, {torch.get_num_threads()} threads"
    )

    started = time.perf_counter()
    status = run_self_influence(run, "tracin_fast", device=args.device)
    ours_self = time.perf_counter() - started
    assert status.complete

    test = load_split(bundle.info.name, "test")
    n_q = min(args.queries, len(test))
    raws: list[Any] = [bundle.adapter.item(test, i) for i in range(n_q)]
    started = time.perf_counter()
    results = [explain_influence(bundle, run, raw, method="tracin_fast", k=8) for raw in raws]
    ours_query = (time.perf_counter() - started) / n_q

    rows = [
        ("self-influence, whole set (cold cache)", f"{ours_self:.1f} s", ""),
        ("influence, per query (warm cache)", f"{ours_query:.2f} s", ""),
    ]
    if not args.no_captum:
        rows += _captum_rows(run, bundle, data, raws, [r.target for r in results])
    width = max(len(r[0]) for r in rows)
    print(f"{'':<{width}}  {'xaidash':>12}  {'captum':>12}")
    for name, ours, theirs in rows:
        print(f"{name:<{width}}  {ours:>12}  {theirs:>12}")
    return 0


def _captum_rows(run: Any, bundle: Any, data: Any, raws: list[Any], targets: list[int]) -> list[tuple[str, str, str]]:
    """captum's TracInCPFast on the same samples and checkpoints, timed, and the rank correlation of the scores."""
    import copy

    import torch
    from captum.influence import TracInCPFast
    from scipy.stats import spearmanr
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from xaidash.explainers.influence import get_influence_method
    from xaidash.explainers.influence.cache import FeatureCache
    from xaidash.explainers.influence.fast import FinalLayerTracIn
    from xaidash.models.runs.checkpoint import load_weights

    fast = get_influence_method("tracin_fast")
    exact = replace(fast, id="tracin_fast_captum_definition", scorer=FinalLayerTracIn(bias=False))
    ours_exact = FeatureCache(run, exact, data, bundle.device, bundle=bundle)
    ours = FeatureCache(run, fast, data, bundle.device, bundle=bundle)
    rates = {str(s.path): s.weight for s in ours.snapshots}
    x_train = data.inputs(bundle, 0, len(data))
    y_train = data.labels(0, len(data)).to(bundle.device)
    queries = bundle.prepare(raws if isinstance(raws[0], str) else torch.stack(raws))
    model = copy.deepcopy(bundle.model)  # captum loads every checkpoint into it

    def load(m: nn.Module, path: str) -> float:
        load_weights(m, Path(path))
        m.eval()
        return rates[path]

    tracin = TracInCPFast(
        model,
        model.get_submodule(ours.layer()),
        TensorDataset(x_train, y_train),
        list(rates),
        checkpoints_load_func=load,
        loss_fn=nn.CrossEntropyLoss(reduction="sum"),
        batch_size=512,
    )
    target = torch.tensor(targets, device=bundle.device)
    started = time.perf_counter()
    theirs = tracin.influence((queries, target), k=None).cpu()
    captum_query = (time.perf_counter() - started) / len(raws)
    started = time.perf_counter()
    tracin.self_influence(DataLoader(TensorDataset(x_train, y_train), batch_size=512))
    captum_self = time.perf_counter() - started

    exact_rho, bias_rho, gap = [], [], 0.0
    for q in range(len(raws)):
        mine = ours_exact.query_scores(queries[q : q + 1], targets[q])
        gap = max(gap, float((mine.float() - theirs[q]).abs().max() / theirs[q].abs().max()))
        exact_rho.append(spearmanr(mine.numpy(), theirs[q].numpy()).statistic)
        bias_rho.append(
            spearmanr(ours.query_scores(queries[q : q + 1], targets[q]).numpy(), theirs[q].numpy()).statistic
        )
    return [
        ("self-influence, whole set (captum: no cache)", "", f"{captum_self:.1f} s"),
        ("influence, per query (captum: recomputes all)", "", f"{captum_query:.2f} s"),
        ("spearman vs captum, captum's definition (min)", f"{min(exact_rho):.4f}", f"max rel. gap {gap:.1e}"),
        ("spearman vs captum, with the bias term (min)", f"{min(bias_rho):.4f}", ""),
    ]


if __name__ == "__main__":
    sys.exit(main())
