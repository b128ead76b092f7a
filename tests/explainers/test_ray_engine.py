"""`--engine ray`: two CPU actors of a local Ray give the same store as the local engine, and resume it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from xaidash.explainers.dataset.explain import DatasetJob, explain_dataset
from xaidash.explainers.dataset.store import AttributionStore, open_store_at
from xaidash.models.runs.store import Run, load_bundle
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

pytest.importorskip("ray.data", reason="the Ray engine's tests need the extra: pip install 'xaidash[ray]'")

METHODS = ["saliency", "ig"]
PARAMS = {"saliency": {}, "ig": {"baseline": "black", "steps": 4}}


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray with two CPU workers for the whole module (starting Ray takes seconds)."""
    from xaidash.explainers.dataset.ray_engine import init_ray

    ray = init_ray(None, workers=2, gpus_per_worker=0.0)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def image_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray_runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        result = train(
            TrainConfig(
                dataset="shapes", model="resnet_small", epochs=1, batch_size=32, max_train_samples=64, device="cpu"
            )
        )
    assert result.ok, result.error
    return result.run_dir


def _run(run: Path, out: Path, engine: str, stop: int, *, metrics: bool = True, chunk: int = 16, **kw: Any):
    job = DatasetJob(
        run_path=str(run), split="test", start=0, stop=stop, methods=METHODS, params=PARAMS, chunk_size=chunk,
        steps=4, with_metrics=metrics, device="cpu",
    )  # fmt: skip
    bundle = load_bundle(Run(run), device="cpu")
    return explain_dataset(job, out, bundle=bundle, split_size=1000, engine=engine, progress=False, workers=2, **kw)


def _same(a: AttributionStore, b: AttributionStore, n: int) -> None:
    for method in METHODS:
        np.testing.assert_allclose(np.stack(a.maps(method, range(n))), np.stack(b.maps(method, range(n))), atol=1e-6)
    pd.testing.assert_frame_equal(a.samples(), b.samples(), rtol=1e-5)
    pd.testing.assert_frame_equal(a.metrics().drop(columns="seconds"), b.metrics().drop(columns="seconds"), rtol=1e-5)


def test_ray_gives_the_local_engines_store(ray_local, image_run: Path, tmp_path: Path) -> None:
    local = _run(image_run, tmp_path / "local", "local", 16, chunk=4)
    remote = _run(image_run, tmp_path / "ray", "ray", 16, chunk=4)
    assert remote.store.manifest["engine"] == "ray" and remote.store.manifest["complete"]
    assert remote.computed == 16 and len(list((tmp_path / "ray" / "maps" / "ig").iterdir())) == 4
    _same(local.store, remote.store, 16)


def test_ray_resumes_a_store_the_local_engine_left(ray_local, image_run: Path, tmp_path: Path) -> None:
    def stop_after_first(result) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(image_run, tmp_path / "s", "local", 24, metrics=False, chunk=8, on_chunk=stop_after_first)
    first = (tmp_path / "s" / "rows" / "0-8.jsonl").stat().st_mtime_ns
    resumed = _run(image_run, tmp_path / "s", "ray", 24, metrics=False, chunk=8)
    assert resumed.skipped == 8 and resumed.computed == 16
    assert (tmp_path / "s" / "rows" / "0-8.jsonl").stat().st_mtime_ns == first
    whole = _run(image_run, tmp_path / "whole", "local", 24, metrics=False, chunk=8)
    _same(resumed.store, whole.store, 24)


@pytest.mark.long(seconds=60)
@pytest.mark.slow
def test_the_whole_shapes_test_split_matches(ray_local, image_run: Path, tmp_path: Path) -> None:
    """All 1,000 test samples, two methods, both engines (160 s on 2 busy cores)."""
    local = _run(image_run, tmp_path / "local", "local", 1000, metrics=False, chunk=100)
    remote = _run(image_run, tmp_path / "ray", "ray", 1000, metrics=False, chunk=100)
    assert local.store.manifest["n_done"] == remote.store.manifest["n_done"] == 1000
    _same(local.store, remote.store, 1000)
    assert open_store_at(tmp_path / "ray") is not None
