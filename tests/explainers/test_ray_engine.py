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


def test_chunks_travel_as_safetensors_bytes_never_pickle() -> None:
    """An actor's ChunkResult reaches the driver as safetensors bytes (arrays as tensors, the rest as JSON): image
    maps and text scores of varying lengths come back equal, and the module imports no pickle (issue 21)."""
    import ast
    import inspect

    from xaidash.explainers.dataset import ray_engine
    from xaidash.explainers.dataset.explain import ChunkResult
    from xaidash.explainers.dataset.store import MethodShard

    rng = np.random.default_rng(0)
    image = MethodShard(
        method="saliency",
        index=np.arange(4, 7),
        maps=rng.random((3, 5, 5), dtype=np.float32),
        metrics={"deletion": rng.random(3), "insertion": rng.random(3)},
        seconds=np.array([0.1, 0.2, 0.3]),
        metric_errors={"pointing": "no masks"},
    )
    text = MethodShard(
        method="ig",
        index=np.arange(4, 7),
        maps=[rng.random(n, dtype=np.float32) for n in (2, 0, 5)],
        metrics={},
        seconds=np.zeros(3),
        words=[["a", "b"], [], ["c", "d", "é", "f", "g"]],
    )
    result = ChunkResult(
        start=4, stop=7, labels=np.array([1, -1, 0]), preds=np.array([1, 0, 0]),
        probs=rng.random((3, 2), dtype=np.float32), losses=np.array([0.5, np.nan, 0.1], dtype=np.float32),
        shards=[image, text], seconds=1.25,
    )  # fmt: skip
    data = ray_engine.encode_chunk(result)
    assert isinstance(data, bytes)
    back = ray_engine.decode_chunk(data)
    assert (back.start, back.stop, back.seconds) == (4, 7, 1.25)
    for name in ("labels", "preds", "probs", "losses"):
        np.testing.assert_array_equal(getattr(back, name), getattr(result, name))
        assert getattr(back, name).dtype == getattr(result, name).dtype
    one, two = back.shards
    np.testing.assert_array_equal(one.maps, image.maps)
    assert one.metric_errors == image.metric_errors and one.words is None and set(one.metrics) == set(image.metrics)
    np.testing.assert_array_equal(one.metrics["deletion"], image.metrics["deletion"])
    assert two.words == text.words and [len(m) for m in two.maps] == [2, 0, 5]
    np.testing.assert_array_equal(np.concatenate(two.maps), np.concatenate(text.maps))
    imported = {
        alias.name
        for node in ast.walk(ast.parse(inspect.getsource(ray_engine)))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {
        node.module
        for node in ast.walk(ast.parse(inspect.getsource(ray_engine)))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not any("pickle" in name for name in imported), imported
