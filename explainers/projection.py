"""2-D projections of activations: UMAP (umap-learn), t-SNE and PCA (scikit-learn).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xaidash.data.atomic import atomic_write, atomic_write_json
from xaidash.explainers.params import ExplainError, Param

METHODS: tuple[str, ...] = ("umap", "tsne", "pca")
LABELS = {"umap": "UMAP", "tsne": "t-SNE", "pca": "PCA"}
SEED = 0
PARAMS: dict[str, tuple[Param, ...]] = {
    "umap": (
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
    "tsne": (
        Param(
            "perplexity",
            "float",
            30.0,
            "About the number of neighbours each point keeps close; must be below N.",
            min=2.0,
            max=100.0,
        ),
    ),
    "pca": (
        Param(
            "x_component", "int", 1, "Principal component on the horizontal axis (1 = most variance).", min=1, max=50
        ),
        Param("y_component", "int", 2, "Principal component on the vertical axis.", min=1, max=50),
    ),
}
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


def resolve_params(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and each value checked; unknown names and methods are refused."""
    if method not in PARAMS:
        raise ExplainError(f"Unknown projection {method!r}: choose one of {', '.join(METHODS)}.")
    known = {p.name: p for p in PARAMS[method]}
    unknown = set(given) - set(known)
    if unknown:
        raise ExplainError(
            f"{LABELS[method]} has no parameter {', '.join(sorted(unknown))}; it takes {', '.join(known)}."
        )
    return {name: p.coerce(given.get(name, p.default)) for name, p in known.items()}


def features_digest(features: np.ndarray) -> str:
    a = np.ascontiguousarray(features, dtype=np.float32)
    h = hashlib.blake2b(digest_size=10)
    h.update(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _key(name: str, method: str, params: dict[str, Any], digest: str) -> str:
    parts = "-".join(f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}" for k, v in sorted(params.items()))
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name) or "features"
    return f"{safe}-{method}-{parts}-{digest}"


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
        reducer = _fitted_umap(self)
        if new.shape[1] != reducer._raw_data.shape[1]:
            raise ExplainError(
                f"The map was made from {reducer._raw_data.shape[1]} features per sample; got {new.shape[1]}."
            )
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


def _umap(params: dict[str, Any], n: int):
    import umap  # imported late: numba compiles on first use (seconds)

    if n <= 2:
        raise ExplainError(f"UMAP needs at least 3 samples; got {n}.")
    # umap needs n_neighbors < N; clamp rather than refuse, since N is the user's sample count choice
    return umap.UMAP(
        n_components=2,
        n_neighbors=min(params["n_neighbors"], n - 1),
        min_dist=params["min_dist"],
        random_state=SEED,
        n_jobs=1,
    )


def _remember(key: str, reducer: Any) -> None:
    with _LOCK:
        _FITTED[key] = reducer
        _FITTED.move_to_end(key)
        while len(_FITTED) > _FITTED_MAX:
            _FITTED.popitem(last=False)


def _fitted_umap(p: Projection) -> Any:
    with _LOCK:
        reducer = _FITTED.get(p.key)
    if reducer is not None:
        return reducer
    if p.features is None:
        raise ExplainError("This UMAP map was loaded without its features, so it cannot place new points.")
    reducer = _umap(p.params, len(p.features))
    coords = np.asarray(reducer.fit_transform(p.features), dtype=np.float32)
    if not np.allclose(coords, p.coords, atol=1e-3):
        p.coords = coords  # another machine or library version: keep map and transform consistent
    _remember(p.key, reducer)
    return reducer


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
        from sklearn.manifold import TSNE

        if n < 4:
            raise ExplainError(f"t-SNE needs at least 4 samples; got {n}.")
        if params["perplexity"] >= n:
            raise ExplainError(
                f"t-SNE's perplexity ({params['perplexity']:g}) must be below the number of samples ({n})."
            )
        coords = TSNE(
            n_components=2, perplexity=params["perplexity"], init="pca", learning_rate="auto", random_state=SEED
        ).fit_transform(features)
    else:
        reducer = _umap(params, n)
        coords = reducer.fit_transform(features)
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
    )
    if cache_dir is not None:
        _save(Path(cache_dir), result)
    return result
