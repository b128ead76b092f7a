"""2-D projections of activations: UMAP (umap-learn), t-SNE (openTSNE) and PCA (scikit-learn).

Speed (issue 14): wide features (more than 50) are first reduced to 50 dimensions with PCA; the exact
k-nearest-neighbour graph is computed with torch (chunked matrix products, on the GPU when there is
one) and handed to umap-learn (`precomputed_knn`) and to openTSNE (`PrecomputedNeighbors`), so neither
builds an approximate index; UMAP's layout and openTSNE's gradients (Barnes-Hut, FFT above 5,000 points; 250
iterations after the early exaggeration, half openTSNE's default) use every core.

Reproducibility: the PCA, the neighbour graph and the initialisation (the first two principal
components, seeded) are deterministic. UMAP maps of up to `EXACT_UMAP_MAX` points are fitted on one
thread with `random_state`, so they are identical run after run; larger maps are optimised on all
cores, whose updates race, so a refit gives a map that differs in detail (same clusters, same
neighbourhoods) — the disk cache is what makes a large map come back identical. openTSNE with a
fixed seed and the precomputed graph gives the same map every time.

Results are cached on disk per folder (the page passes `<run>/inspect/projections`), layer
name, method, parameters and a digest of the features, as `.npy` coordinates with a `.json`
description (and PCA's mean and components as `.npy`); nothing is pickled. A new point can be
placed into a UMAP or PCA map with `Projection.transform`; t-SNE has no transform.

UMAP's fitted model cannot be stored without pickle, so it is kept in memory (a few per
process); when it is gone, `transform` refits UMAP with the same parameters and seed, which
reproduces the cached map, and uses that fit.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaidash.data.atomic import atomic_write, atomic_write_json
from xaidash.data.specs import Registry, Spec
from xaidash.explainers.params import ExplainError, Param

SEED = 0
PCA_DIMS = 50  # wider features are reduced to this many principal components before UMAP and t-SNE
EXACT_UMAP_MAX = 2000  # up to this many points UMAP runs seeded on one thread (bit-identical refits)
# t-SNE's optimisation (issue 36, measured on MNIST pixels on 2 shared cores, bench/projection_speed.py):
# openTSNE's 250 early-exaggeration iterations, then TSNE_ITERATIONS more instead of its 500 (scikit-learn runs
# 1,000 in all). The neighbourhoods are settled by then: at 10,000 points trustworthiness 0.9753 against 0.9761 with
# 500, above scikit-learn's 0.974, in 9.7 s instead of 35.5 s (FFT). Repulsive forces: Barnes-Hut up to TSNE_BH_MAX
# points, FFT interpolation above (openTSNE switches at 10,000). With the shorter run Barnes-Hut is faster on small
# maps (1,000 points 1.0 s vs 4.5 s, 3,000: 2.5 s vs 6.3 s), the two are even near 6,000, and FFT wins above
# (10,000: 9.7 s vs 14.2 s; 20,000: 47 s vs 92 s).
TSNE_ITERATIONS = 250
TSNE_BH_MAX = 5_000
# Part of the cache key of UMAP and t-SNE maps: what changes how a map is computed changes the key.
ENGINE = {
    "umap": f"pca{PCA_DIMS}-exactknn-v2",
    "tsne": f"pca{PCA_DIMS}-exactknn-opentsne-v4-it{TSNE_ITERATIONS}",
    "pca": "v1",
}
KNN_BLOCK_BYTES = 1 << 27  # distances held at once per block of query rows (128 MiB)
TSNE_NOTE = (
    "t-SNE keeps neighbours together but not distances: the distances between clusters and the sizes "
    "of clusters in this map carry no meaning."
)
NO_TRANSFORM = (
    "t-SNE has no transform: it optimises the positions of exactly the points it was given, so a new "
    "point cannot be placed without recomputing the whole map. Use UMAP or PCA to place an input."
)

_FITTED: OrderedDict[str, Any] = OrderedDict()  # cache key -> fitted umap.UMAP, most recent last
_FITTED_MAX = 4
_LOCK = threading.Lock()


@dataclass(frozen=True)
class ProjectionSpec(Spec):
    """One way to map features to 2-D: `id` as the caches and the pages name it, `label` as people read it."""

    id: str
    label: str
    params: tuple[Param, ...] = ()

    names_params_by: ClassVar[str] = "label"  # refusals name the attack or projection as people know it


def _unknown(method: Hashable, known: list[str]) -> str:
    return f"Unknown projection {method!r}: choose one of {', '.join(METHODS)}."


PROJECTIONS: Registry[ProjectionSpec] = Registry("projection", error=ExplainError, unknown=_unknown)
PROJECTIONS.register(
    ProjectionSpec(
        "umap",
        "UMAP",
        (
            Param(
                "n_neighbors",
                "int",
                15,
                "Neighbours that define local structure: small keeps detail, large keeps the global layout.",
                min=2,
                max=200,
            ),
            Param("min_dist", "float", 0.1, "How tightly points may pack together in the map.", min=0.0, max=1.0),
        ),
    )
)
PROJECTIONS.register(
    ProjectionSpec(
        "tsne",
        "t-SNE",
        (
            Param(
                "perplexity",
                "float",
                30.0,
                "About the number of neighbours each point keeps close; must be below N.",
                min=2.0,
                max=100.0,
            ),
        ),
    )
)
PROJECTIONS.register(
    ProjectionSpec(
        "pca",
        "PCA",
        (
            Param(
                "x_component",
                "int",
                1,
                "Principal component on the horizontal axis (1 = most variance).",
                min=1,
                max=50,
            ),
            Param("y_component", "int", 2, "Principal component on the vertical axis.", min=1, max=50),
        ),
    )
)
# What the pages read by id: the projections in order, their labels and their parameters.
METHODS: tuple[str, ...] = tuple(s.id for s in PROJECTIONS)
LABELS: dict[str, str] = {s.id: s.label for s in PROJECTIONS}
PARAMS: dict[str, tuple[Param, ...]] = {s.id: s.params for s in PROJECTIONS}


def resolve_params(method: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults filled in and each value checked; unknown names and methods are refused."""
    return PROJECTIONS.get(method).resolve_params(given)


def features_digest(features: np.ndarray) -> str:
    a = np.ascontiguousarray(features, dtype=np.float32)
    h = hashlib.blake2b(digest_size=10)
    h.update(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _key(name: str, method: str, params: dict[str, Any], digest: str) -> str:
    parts = "-".join(f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}" for k, v in sorted(params.items()))
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name) or "features"
    return f"{safe}-{method}-{ENGINE[method]}-{parts}-{digest}"


@dataclass
class Projection:
    method: str
    params: dict[str, Any]
    coords: np.ndarray  # (N, 2) float32
    key: str
    seconds: float
    from_cache: bool = False
    explained_variance: list[float] = field(default_factory=list)  # PCA: the two plotted components' ratios
    features: np.ndarray | None = field(default=None, repr=False)  # what was projected (for a UMAP refit)
    _pca: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)  # (mean, the two components)
    # UMAP and t-SNE of wide features: (mean, PCA_DIMS components) of the reduction before the map
    _reduce: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def note(self) -> str | None:
        return TSNE_NOTE if self.method == "tsne" else None

    @property
    def can_transform(self) -> bool:
        return self.method in ("umap", "pca")

    @property
    def transform_ready(self) -> bool:
        """False when `transform` must first refit UMAP (its fit is not in this process's memory)."""
        if self.method != "umap":
            return self.can_transform
        with _LOCK:
            return self.key in _FITTED

    def axis_labels(self) -> tuple[str, str]:
        if self.method == "pca":
            ev = self.explained_variance or [float("nan")] * 2
            return (
                f"PC{self.params['x_component']} ({100 * ev[0]:.1f}% variance)",
                f"PC{self.params['y_component']} ({100 * ev[1]:.1f}% variance)",
            )
        return f"{LABELS[self.method]} 1", f"{LABELS[self.method]} 2"

    def transform(self, new: np.ndarray) -> np.ndarray:
        """(M, D) new feature rows -> (M, 2) positions in this map (UMAP and PCA only)."""
        new = np.atleast_2d(np.asarray(new, dtype=np.float32))
        if self.method == "tsne":
            raise ExplainError(NO_TRANSFORM)
        if self.method == "pca":
            assert self._pca is not None
            mean, components = self._pca
            if new.shape[1] != mean.shape[0]:
                raise ExplainError(f"The map was made from {mean.shape[0]} features per sample; got {new.shape[1]}.")
            return ((new - mean) @ components.T).astype(np.float32)
        width = self.features.shape[1] if self.features is not None else None
        if width is not None and new.shape[1] != width:
            raise ExplainError(f"The map was made from {width} features per sample; got {new.shape[1]}.")
        reducer = _fitted_umap(self)
        if self._reduce is not None:
            mean, components = self._reduce
            new = np.ascontiguousarray((new - mean) @ components.T, dtype=np.float32)
        return np.asarray(reducer.transform(new), dtype=np.float32)


def _save_npy(path: Path, array: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object: np.save would append .npy to a path
            np.save(f, array, allow_pickle=False)

    atomic_write(path, write)


def _save(cache_dir: Path, p: Projection) -> None:
    _save_npy(cache_dir / f"{p.key}.npy", p.coords)
    if p._pca is not None:
        _save_npy(cache_dir / f"{p.key}.pca.npy", np.vstack([p._pca[0][None], p._pca[1]]))
    meta = {
        "method": p.method,
        "params": p.params,
        "seconds": p.seconds,
        "explained_variance": p.explained_variance,
        "n": len(p.coords),
        "seed": SEED,
        "engine": ENGINE[p.method],
    }
    atomic_write_json(cache_dir / f"{p.key}.json", meta)


def _load(cache_dir: Path, key: str, method: str, params: dict[str, Any], features: np.ndarray) -> Projection | None:
    coords_file, meta_file = cache_dir / f"{key}.npy", cache_dir / f"{key}.json"
    if not (coords_file.is_file() and meta_file.is_file()):
        return None
    try:
        coords = np.load(coords_file, allow_pickle=False)
        meta = json.loads(meta_file.read_text())
        pca = None
        if method == "pca":
            stacked = np.load(cache_dir / f"{key}.pca.npy", allow_pickle=False)
            pca = (stacked[0], stacked[1:])
    except (OSError, ValueError, json.JSONDecodeError):
        return None  # torn or foreign files: compute again
    if coords.shape != (len(features), 2):
        return None
    return Projection(
        method,
        params,
        coords.astype(np.float32),
        key,
        float(meta.get("seconds", 0.0)),
        True,
        list(meta.get("explained_variance", [])),
        features,
        pca,
    )


def knn_device() -> Any:
    """The torch device the neighbour search runs on: the GPU when there is one."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def knn_graph(
    base: np.ndarray,
    k: int,
    queries: np.ndarray | None = None,
    device: Any = None,
    block_bytes: int = KNN_BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact Euclidean k nearest neighbours of `queries` (default: `base` itself) among `base`:
    (indices int64 (M, k), distances float32 (M, k)), nearest first. With queries=None every
    point's first neighbour is itself at distance 0, as umap-learn expects of a precomputed graph.

    Written with torch because no library at hand gives an exact, GPU-capable search: blocks of
    query rows against all of `base` as one matrix product (|q|^2 - 2 q.b + |b|^2), `topk`, then the
    chosen distances recomputed directly so the float32 cancellation of the expansion cannot creep in.
    """
    import torch

    if k < 1 or k > len(base):
        raise ExplainError(f"Cannot find {k} nearest neighbours among {len(base)} points.")
    dev = torch.device(device) if device is not None else knn_device()
    b = torch.as_tensor(np.ascontiguousarray(base, dtype=np.float32), device=dev)
    q_all = b if queries is None else torch.as_tensor(np.ascontiguousarray(queries, dtype=np.float32), device=dev)
    b_sq = (b * b).sum(1)
    rows = max(1, block_bytes // (4 * len(b)))
    out_i = np.empty((len(q_all), k), dtype=np.int64)
    out_d = np.empty((len(q_all), k), dtype=np.float32)
    with torch.inference_mode():
        for lo in range(0, len(q_all), rows):
            q = q_all[lo : lo + rows]
            d2 = torch.addmm(b_sq[None, :], q, b.T, alpha=-2.0).add_((q * q).sum(1, keepdim=True))
            if queries is None:  # each point is its own first neighbour, even among duplicates
                ar = torch.arange(len(q), device=dev)
                d2[ar, ar + lo] = -1.0
            idx = d2.topk(k, dim=1, largest=False, sorted=True).indices
            dist = (q[:, None, :] - b[idx]).pow(2).sum(-1).sqrt()
            dist, order = dist.sort(dim=1, stable=True)  # exact distances may reorder near-ties
            out_i[lo : lo + len(q)] = idx.gather(1, order).cpu().numpy()
            out_d[lo : lo + len(q)] = dist.cpu().numpy()
    return out_i, out_d


def reduce_dims(features: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Features with more than PCA_DIMS columns -> their first PCA_DIMS principal components (seeded
    scikit-learn PCA), with (mean, components) to reduce new points the same way; else unchanged."""
    n, d = features.shape
    if d <= PCA_DIMS or n <= PCA_DIMS:
        return features, None
    from sklearn.decomposition import PCA

    pca = PCA(n_components=PCA_DIMS, random_state=SEED).fit(features)
    mean, components = pca.mean_.astype(np.float32), pca.components_.astype(np.float32)
    return np.ascontiguousarray((features - mean) @ components.T, dtype=np.float32), (mean, components)


def pca_init(x: np.ndarray, reduced: bool) -> np.ndarray:
    """The first two principal components of `x` (float64, seeded): UMAP's and t-SNE's starting layout.
    After `reduce_dims` they are simply its first two columns."""
    if reduced:
        return np.asarray(x[:, :2], dtype=np.float64).copy()
    from sklearn.decomposition import PCA

    if min(x.shape) < 2:
        return np.column_stack([x[:, 0], np.zeros(len(x))]).astype(np.float64)
    return PCA(n_components=2, random_state=SEED).fit_transform(x).astype(np.float64)


class _ExactIndex:
    """What umap-learn's `transform` asks of its search index (`query(X, k, epsilon)` and
    `_angular_trees`), answered by the exact `knn_graph`: a map fitted on a precomputed graph has no
    pynndescent index, and building one would be a second, approximate neighbour search."""

    _angular_trees = False

    def __init__(self, data: np.ndarray) -> None:
        self._raw_data = data

    def query(self, queries: np.ndarray, k: int, epsilon: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        idx, dist = knn_graph(self._raw_data, min(k, len(self._raw_data)), queries=queries)
        return idx.astype(np.int32), dist


_JIT_CACHED = False


def _cache_umap_jit() -> None:
    """Turn on numba's on-disk cache for the umap-learn functions a fit on a precomputed graph compiles.
    umap-learn compiles them without `cache=True`, which costs every new process 8-10 s on 2 cores;
    with numba's cache (beside umap's sources, or under NUMBA_CACHE_DIR) only the first process pays.
    Only the parallel layout epoch: umap's serial one wraps the same Python function, and numba's cache
    index, keyed by function and signature, would not tell the two apart.
    Best effort: a umap-learn without these functions, or a read-only cache, just compiles as before."""
    global _JIT_CACHED
    if _JIT_CACHED:
        return
    _JIT_CACHED = True
    from umap import layouts, umap_

    for fn in (
        getattr(umap_, "smooth_knn_dist", None),
        getattr(umap_, "compute_membership_strengths", None),
        getattr(layouts, "_nb_optimize_layout_euclidean_single_epoch_parallel", None),
    ):
        try:
            fn.enable_caching()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - not a numba dispatcher here: it compiles as before
            continue


def warm_up() -> float:
    """Compile (and store in numba's disk cache) the kernels a UMAP map uses, on 2,500 random points: run once
    at install (scripts/setup.sh), so a user's first map does not pay the 15-20 s of compilation a fresh
    environment otherwise costs its first process. Returns the seconds it took."""
    start = time.perf_counter()
    x = np.random.default_rng(SEED).normal(size=(EXACT_UMAP_MAX + 500, 8)).astype(np.float32)  # the parallel path
    _umap(resolve_params("umap", {}), x, pca_init(x, reduced=False), n_epochs=10)
    return time.perf_counter() - start


def _umap(params: dict[str, Any], x: np.ndarray, init: np.ndarray, n_epochs: int | None = None) -> Any:
    """A umap.UMAP for the reduced features `x` with the exact neighbour graph precomputed."""
    import warnings

    import numba
    import umap  # imported late: numba compiles on first use (seconds)

    _cache_umap_jit()
    n = len(x)
    if n <= 2:
        raise ExplainError(f"UMAP needs at least 3 samples; got {n}.")
    # umap needs n_neighbors < N; clamp rather than refuse, since N is the user's sample count choice
    k = min(params["n_neighbors"], n - 1)
    idx, dist = knn_graph(x, k)
    exact = n <= EXACT_UMAP_MAX
    if not exact:  # a seeded fit before sets numba's threads to 1 for the process
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    reducer = umap.UMAP(
        n_components=2,
        n_neighbors=k,
        min_dist=params["min_dist"],
        init=init,
        n_epochs=n_epochs,
        precomputed_knn=(idx.astype(np.int32), dist),
        random_state=SEED if exact else None,  # a seed forces one thread
        transform_seed=SEED,
        n_jobs=1 if exact else -1,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*knn_search_index.*")  # _ExactIndex is set after the fit
        reducer.fit(x)
    reducer._knn_search_index = _ExactIndex(x)
    return reducer


def _remember(key: str, reducer: Any) -> None:
    with _LOCK:
        _FITTED[key] = reducer
        _FITTED.move_to_end(key)
        while len(_FITTED) > _FITTED_MAX:
            _FITTED.popitem(last=False)


def _fitted_umap(p: Projection) -> Any:
    """The fitted UMAP of `p`: from memory, else rebuilt around the cached map. The graph is rebuilt
    (exact, so identical) with no optimisation epochs, and the cached coordinates become its
    embedding, so placed points land in the very map on screen."""
    with _LOCK:
        reducer = _FITTED.get(p.key)
    if reducer is not None:
        return reducer
    if p.features is None:
        raise ExplainError("This UMAP map was loaded without its features, so it cannot place new points.")
    x, p._reduce = _reduced(p)
    reducer = _umap(p.params, x, p.coords.astype(np.float64), n_epochs=0)
    reducer.embedding_ = np.ascontiguousarray(p.coords, dtype=np.float32)
    reducer.n_epochs = None  # transform then optimises new points for umap's default epochs
    _remember(p.key, reducer)
    return reducer


def _reduced(p: Projection) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    assert p.features is not None
    if p._reduce is None:
        return reduce_dims(p.features)
    mean, components = p._reduce
    return np.ascontiguousarray((p.features - mean) @ components.T, dtype=np.float32), p._reduce


def _tsne(x: np.ndarray, init: np.ndarray, perplexity: float) -> np.ndarray:
    """openTSNE (Barnes-Hut or FFT-accelerated gradients, on every core) on the exact neighbour graph."""
    from openTSNE import TSNE  # type: ignore[import-untyped]
    from openTSNE.affinity import PerplexityBasedNN  # type: ignore[import-untyped]
    from openTSNE.nearest_neighbors import PrecomputedNeighbors  # type: ignore[import-untyped]

    n = len(x)
    k = min(n - 1, int(3 * perplexity))
    idx, dist = knn_graph(x, k + 1)
    # Small maps on one thread: there a thread pool's per-iteration hand-offs cost more than the work (150
    # points took 20 s with both cores on a loaded machine, 1 s on one).
    threads = 1 if n <= EXACT_UMAP_MAX else -1
    gradient = "bh" if n <= TSNE_BH_MAX else "fft"
    # openTSNE's graphs leave each point out of its own neighbours
    affinities = PerplexityBasedNN(
        perplexity=perplexity,
        knn_index=PrecomputedNeighbors(idx[:, 1:], dist[:, 1:]),
        n_jobs=threads,
        random_state=SEED,
    )
    start = init / init[:, 0].std() * 1e-4  # openTSNE's recommended scale for a PCA start
    tsne = TSNE(
        n_components=2,
        n_jobs=threads,
        random_state=SEED,
        negative_gradient_method=gradient,
        n_iter=TSNE_ITERATIONS,
    )
    embedding = tsne.fit(affinities=affinities, initialization=start)
    return np.asarray(embedding, dtype=np.float32)


def project(
    features: np.ndarray,
    method: str = "umap",
    cache_dir: str | Path | None = None,
    name: str = "",
    **params: Any,
) -> Projection:
    """Project features (N, D) to 2-D with `method` ('umap', 'tsne' or 'pca') and its parameters
    (see PARAMS); read from / written to `cache_dir` when given."""
    params = resolve_params(method, params)
    features = np.ascontiguousarray(np.asarray(features, dtype=np.float32))
    if features.ndim != 2 or len(features) == 0:
        raise ExplainError(f"Projections need features of shape (N, D) with N >= 1; got {features.shape}.")
    if not np.isfinite(features).all():
        raise ExplainError("The features contain NaN or infinite values; the model's activations are not finite.")
    n, d = features.shape
    key = _key(name, method, params, features_digest(features))
    if cache_dir is not None:
        cached = _load(Path(cache_dir), key, method, params, features)
        if cached is not None:
            return cached
    start = time.perf_counter()
    explained: list[float] = []
    pca_model = None
    reduction = None
    if method == "pca":
        from sklearn.decomposition import PCA

        top = max(params["x_component"], params["y_component"])
        if params["x_component"] == params["y_component"]:
            raise ExplainError("Pick two different principal components for the two axes.")
        if top > min(n, d):
            raise ExplainError(
                f"PCA of {n} samples with {d} features has {min(n, d)} components; component {top} does not exist."
            )
        pca = PCA(n_components=top, random_state=SEED).fit(features)
        picks = [params["x_component"] - 1, params["y_component"] - 1]
        components = pca.components_[picks].astype(np.float32)
        mean = pca.mean_.astype(np.float32)
        coords = (features - mean) @ components.T
        explained = [float(pca.explained_variance_ratio_[i]) for i in picks]
        pca_model = (mean, components)
    elif method == "tsne":
        if n < 4:
            raise ExplainError(f"t-SNE needs at least 4 samples; got {n}.")
        if params["perplexity"] >= n:
            raise ExplainError(
                f"t-SNE's perplexity ({params['perplexity']:g}) must be below the number of samples ({n})."
            )
        x, reduction = reduce_dims(features)
        coords = _tsne(x, pca_init(x, reduction is not None), params["perplexity"])
    else:
        x, reduction = reduce_dims(features)
        reducer = _umap(params, x, pca_init(x, reduction is not None))
        coords = reducer.embedding_
        _remember(key, reducer)
    result = Projection(
        method,
        params,
        np.asarray(coords, dtype=np.float32),
        key,
        time.perf_counter() - start,
        False,
        explained,
        features,
        pca_model,
        reduction,
    )
    if cache_dir is not None:
        _save(Path(cache_dir), result)
    return result
