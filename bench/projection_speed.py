"""Projection speed: xaidash's UMAP and t-SNE against the plain library calls, on MNIST, in one run.

Features: MNIST pixels scaled to [0, 1] (784 per image), the test split first, then the training
split (`--n 70000` is all of MNIST). Pixels are the widest features the Embeddings page meets on
MNIST (its default, a CNN's penultimate layer, is narrower), so they show the PCA step's cost too.

For each method it times, in this order and in this one process:
- xaidash: `explainers.projection.project(features, method)` with no disk cache, so the first call
  includes importing umap-learn / openTSNE and numba's compilation (the goal counts the first call);
- the reference: `umap.UMAP().fit_transform(features)` / scikit-learn `TSNE().fit_transform(features)`,
  the libraries' defaults on the same features.
Then the trustworthiness (scikit-learn, 5 neighbours) of both maps on the same `--sample` points,
measured against the original 784-d features, and as the last line per method (the load average is the
machine's over the last minute when the method ended: on a shared machine other jobs slow both sides, and a
load that changes between the two calls moves the wall-clock ratio; the ratio of the CPU seconds the process spent
on each side, also printed, moves less):

    METHOD N points: xaidash S s, reference S s, ratio R x (CPU time C x); trustworthiness T vs T (diff D); load L

The goals (issue 36 for t-SNE): xaidash at least 2x faster than the reference, its trustworthiness no more than
0.01 below the reference's; `--check` exits 1 when a measured method misses either.

scikit-learn's t-SNE above `--tsne-reference-max` points (default 20,000) would take many minutes
(35-60 s at 10,000 on 2 cores, and it grows faster than N): it is skipped with a printed reason.
The machine's load average is printed before and after: other jobs on a shared machine slow both
sides, so the ratio holds better than the times.

    python bench/projection_speed.py --n 10000 --methods umap,tsne
    python bench/projection_speed.py --n 70000 --methods umap
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from xaidash.data.argtypes import int_range
from xaidash.data.paths import data_root
from xaidash.data.registry import ImageSplit, load_split

GOAL_RATIO = 2.0  # xaidash at least this many times faster than the library's own call
GOAL_TRUST = 0.01  # and its trustworthiness at most this much below the library's


def mnist_pixels(n: int, root: Path | None) -> np.ndarray:
    """The first `n` MNIST images (test split, then train) as (n, 784) float32 in [0, 1]."""
    parts: list[np.ndarray] = []
    for split in ("test", "train"):
        if sum(len(p) for p in parts) >= n:
            break
        s = load_split("mnist", split, root=root)
        assert isinstance(s, ImageSplit)
        parts.append(np.asarray(s.batch(list(range(len(s))))).reshape(len(s), -1))
    x = np.concatenate(parts)
    if n > len(x):
        sys.exit(f"error: MNIST has {len(x)} images; asked for {n}")
    return np.ascontiguousarray(x[:n], dtype=np.float32)


def reference(method: str, x: np.ndarray) -> np.ndarray:
    if method == "umap":
        import umap

        return np.asarray(umap.UMAP().fit_transform(x))
    from sklearn.manifold import TSNE

    return np.asarray(TSNE().fit_transform(x))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int_range(1, 70000), default=10000, help="points (MNIST test, then train; up to 70000)")
    ap.add_argument("--methods", default="umap,tsne", help="comma-separated: umap, tsne")
    ap.add_argument("--sample", type=int_range(1), default=2000, help="points the trustworthiness is measured on")
    ap.add_argument("--tsne-reference-max", type=int_range(1), default=20000)
    ap.add_argument("--root", type=Path, default=None, help="data root holding MNIST (default: xaidash's)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a method misses the 2x or 0.01 goal")
    args = ap.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in ("umap", "tsne")]
    if bad:
        sys.exit(f"error: unknown method(s) {', '.join(bad)}: choose umap, tsne")

    from sklearn.manifold import trustworthiness

    from xaidash.explainers.inspection.projection import PCA_DIMS, knn_device, project

    x = mnist_pixels(args.n, args.root or data_root())
    sample = np.random.default_rng(0).choice(len(x), size=min(args.sample, len(x)), replace=False)
    print(
        f"MNIST pixels {x.shape}, {os.cpu_count()} cores, neighbour search on {knn_device()}, "
        f"PCA to {PCA_DIMS} dims; load average {os.getloadavg()[0]:.1f}"
    )

    def trust(coords: np.ndarray) -> float:
        return float(trustworthiness(x[sample], coords[sample], n_neighbors=5))

    missed: list[str] = []
    for method in methods:
        start, cpu = time.perf_counter(), time.process_time()
        ours = project(x, method).coords
        t_ours, c_ours = time.perf_counter() - start, time.process_time() - cpu
        q_ours = trust(ours)
        print(
            f"{method}: xaidash {t_ours:.1f} s (first call in this process; CPU {c_ours:.1f} s), "
            f"trustworthiness {q_ours:.4f}, load {os.getloadavg()[0]:.1f}"
        )
        if method == "tsne" and args.n > args.tsne_reference_max:
            print(
                f"{method}: reference skipped: scikit-learn TSNE on {args.n} points would take far longer than "
                f"its 35-60 s at 10,000 (raise --tsne-reference-max to run it)"
            )
            print(f"{method} {args.n} points: xaidash {t_ours:.1f} s, reference skipped, ratio n/a")
            continue
        start, cpu = time.perf_counter(), time.process_time()
        ref = reference(method, x)
        t_ref, c_ref = time.perf_counter() - start, time.process_time() - cpu
        q_ref = trust(ref)
        print(f"{method}: reference {t_ref:.1f} s (CPU {c_ref:.1f} s), trustworthiness {q_ref:.4f}")
        ratio = t_ref / t_ours
        print(
            f"{method} {args.n} points: xaidash {t_ours:.1f} s, reference {t_ref:.1f} s, ratio {ratio:.2f} x "
            f"(CPU time {c_ref / max(c_ours, 1e-9):.2f} x); "
            f"trustworthiness {q_ours:.4f} vs {q_ref:.4f} (diff {q_ours - q_ref:+.4f}); "
            f"load {os.getloadavg()[0]:.1f}"
        )
        if ratio < GOAL_RATIO or q_ours < q_ref - GOAL_TRUST:
            missed.append(method)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if args.check and missed:
        sys.exit(f"goal missed (>= {GOAL_RATIO:g}x, trustworthiness within {GOAL_TRUST:g}): {', '.join(missed)}")


if __name__ == "__main__":
    main()
