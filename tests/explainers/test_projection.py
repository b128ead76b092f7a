"""PCA, t-SNE and UMAP projections: shapes, caching on disk, placing new points."""

from __future__ import annotations

import numpy as np
import pytest

from xaidash.explainers import projection
from xaidash.explainers.params import ExplainError
from xaidash.explainers.projection import project


def blobs(n_per: int = 20, dim: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 6, size=(3, dim))
    labels = np.repeat(np.arange(3), n_per)
    return (centres[labels] + rng.normal(0, 0.5, size=(len(labels), dim))).astype(np.float32), labels, centres


def test_pca_matches_sklearn_transforms_and_caches(tmp_path):
    from sklearn.decomposition import PCA

    x, _, _ = blobs()
    p = project(x, "pca", cache_dir=tmp_path, name="penultimate")
    assert p.coords.shape == (60, 2) and not p.from_cache and p.can_transform and p.transform_ready and p.note is None
    ref = PCA(n_components=2).fit(x)
    np.testing.assert_allclose(np.abs(p.coords), np.abs(ref.transform(x)), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(p.explained_variance, ref.explained_variance_ratio_, rtol=1e-5)
    np.testing.assert_allclose(p.transform(x[:5]), p.coords[:5], rtol=1e-4, atol=1e-4)
    assert p.axis_labels()[0].startswith("PC1 (")
    files = sorted(f.suffix for f in tmp_path.iterdir())
    assert files == [".json", ".npy", ".npy"] and not list(tmp_path.glob("*.pkl"))
    again = project(x, "pca", cache_dir=tmp_path, name="penultimate")
    assert again.from_cache
    np.testing.assert_array_equal(again.coords, p.coords)
    np.testing.assert_allclose(again.transform(x[:5]), p.coords[:5], rtol=1e-4, atol=1e-4)
    # other components, other features: other cache entries
    other = project(x, "pca", cache_dir=tmp_path, name="penultimate", x_component=2, y_component=3)
    assert not other.from_cache and other.key != p.key
    np.testing.assert_allclose(other.coords[:, 0], p.coords[:, 1], rtol=1e-3, atol=1e-3)
    assert not project(x + 1, "pca", cache_dir=tmp_path, name="penultimate").from_cache
    with pytest.raises(ExplainError, match="component 9 does not exist"):
        project(x[:, :4], "pca", x_component=1, y_component=9)
    with pytest.raises(ExplainError, match="two different"):
        project(x, "pca", x_component=2, y_component=2)


def test_tsne_shapes_cache_and_no_transform(tmp_path):
    x, labels, _ = blobs(n_per=12)
    p = project(x, "tsne", cache_dir=tmp_path, perplexity=8)
    assert p.coords.shape == (36, 2) and p.note and "no meaning" in p.note and not p.can_transform
    # neighbours stay neighbours: each point's nearest map neighbour is from its own blob
    d = np.linalg.norm(p.coords[:, None] - p.coords[None], axis=-1) + np.eye(36) * 1e9
    assert (labels[d.argmin(1)] == labels).mean() > 0.9
    with pytest.raises(ExplainError, match="no transform"):
        p.transform(x[:1])
    assert project(x, "tsne", cache_dir=tmp_path, perplexity=8).from_cache
    with pytest.raises(ExplainError, match="below the number of samples"):
        project(x, "tsne", perplexity=40)


def test_params_are_checked():
    x, _, _ = blobs(n_per=5)
    with pytest.raises(ExplainError, match="Unknown projection"):
        project(x, "lda")
    with pytest.raises(ExplainError, match="no parameter perplexity"):
        project(x, "umap", perplexity=5)
    with pytest.raises(ExplainError, match="outside"):
        project(x, "umap", n_neighbors=1)
    with pytest.raises(ExplainError, match="NaN"):
        project(np.full((5, 2), np.nan), "pca")


def test_umap_places_new_points_and_refits_after_a_restart(tmp_path):
    x, labels, centres = blobs(n_per=20)
    p = project(x, "umap", cache_dir=tmp_path, name="layer", n_neighbors=10, min_dist=0.1)
    assert p.coords.shape == (60, 2) and p.can_transform
    rng = np.random.default_rng(5)
    new = (centres[1] + rng.normal(0, 0.5, size=(2, x.shape[1]))).astype(np.float32)
    placed = p.transform(new)
    means = np.stack([p.coords[labels == k].mean(0) for k in range(3)])
    assert (np.linalg.norm(placed[:, None] - means[None], axis=-1).argmin(1) == 1).all()
    # a new process: coordinates come from disk, the fitted model is gone and is refitted for transform
    projection._FITTED.clear()
    cached = project(x, "umap", cache_dir=tmp_path, name="layer", n_neighbors=10, min_dist=0.1)
    assert cached.from_cache and not cached.transform_ready
    again = cached.transform(new)
    assert cached.transform_ready
    np.testing.assert_allclose(cached.coords, p.coords, atol=1e-3)
    assert (np.linalg.norm(again[:, None] - means[None], axis=-1).argmin(1) == 1).all()
