"""The attribution store's files and reader API (the contract the data-set report reads)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from xaidash.explainers.dataset.store import (
    MethodShard,
    StoreWriter,
    new_manifest,
    open_store,
    read_shard,
    store_dir,
    store_splits,
)


def _rows(start: int, stop: int, methods: list[str]) -> list[dict]:
    return [
        {
            "index": i,
            "method": m,
            "label": i % 2,
            "label_name": "ab"[i % 2],
            "pred": 0,
            "pred_name": "a",
            "prob": 0.75,
            "loss": 0.1 * i,
            "correct": i % 2 == 0,
            "disagreement": float("nan") if len(methods) == 1 else 0.25,
            "seconds": 0.01,
            "deletion_auc": 0.5 if m == "saliency" else float("nan"),
        }
        for i in range(start, stop)
        for m in methods
    ]


def _image_store(run: Path, methods: list[str], chunks: list[tuple[int, int]]) -> StoreWriter:
    w = StoreWriter(
        store_dir(run, "test"),
        new_manifest(split="test", methods=methods, metrics=["deletion_auc"], n_total=10, chunk_size=4, stop=10),
    )
    w.write_manifest()
    for start, stop in chunks:
        n = stop - start
        for m in methods:
            maps = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3) + 100 * start
            w.write_shard(
                start,
                stop,
                MethodShard(m, np.arange(start, stop), maps, {"deletion_auc": np.full(n, 0.5)}, np.full(n, 0.01)),
            )
        w.write_rows(start, stop, _rows(start, stop, methods))
    return w


def test_no_store_is_none(tmp_path: Path) -> None:
    assert open_store(tmp_path, "test") is None
    assert store_splits(tmp_path) == []


def test_image_store_reads_back(tmp_path: Path) -> None:
    w = _image_store(tmp_path, ["saliency", "ig"], [(0, 4), (4, 8)])
    w.write_manifest(n_done=8)
    assert store_splits(tmp_path) == ["test"]
    store = open_store(tmp_path, "test")
    assert store is not None and store.split == "test" and store.manifest["n_done"] == 8
    assert store.methods() == ["saliency", "ig"]
    samples = store.samples()
    assert list(samples["index"]) == list(range(8))
    assert samples["correct"].dtype == bool and list(samples["correct"][:2]) == [True, False]
    assert samples.loc[3, "loss"] == pytest.approx(0.3) and samples.loc[0, "disagreement"] == 0.25
    metrics = store.metrics()
    assert len(metrics) == 16 and {"index", "method", "seconds", "deletion_auc"} <= set(metrics.columns)
    assert math.isnan(metrics[(metrics["index"] == 5) & (metrics["method"] == "ig")]["deletion_auc"].iloc[0])
    maps = store.maps("ig", [5, 1])
    assert maps[0].shape == (2, 3) and maps[0][0, 0] == 100 * 4 + 6 and maps[1][0, 0] == 6
    assert store.has("ig", 7) and not store.has("ig", 8) and not store.has("gradcam", 0)
    assert store.tokens("ig", [1]) is None
    with pytest.raises(KeyError, match="not in the test store"):
        store.maps("ig", [9])


def test_text_shards_keep_words_and_ragged_scores(tmp_path: Path) -> None:
    w = StoreWriter(store_dir(tmp_path, "test"), new_manifest(modality="text", methods=["lime"]))
    w.write_manifest()
    words = [["good", "film"], ["bad"], ["not", "so", "bad"]]
    maps = [np.array([0.5, 0.25]), np.array([-1.0]), np.array([0.1, 0.2, -0.3])]
    w.write_shard(0, 3, MethodShard("lime", np.arange(3), maps, {}, np.zeros(3), words=words))
    w.write_rows(0, 3, _rows(0, 3, ["lime"]))
    shard = read_shard(w.shard_path("lime", 0, 3))
    assert shard.words == words
    store = open_store(tmp_path, "test")
    assert store is not None
    got = store.maps("lime", [2, 0])
    np.testing.assert_allclose(got[0], [0.1, 0.2, -0.3], rtol=1e-6)
    assert store.tokens("lime", [2, 1]) == [["not", "so", "bad"], ["bad"]]
    assert math.isnan(store.samples()["disagreement"][0])


def test_rows_mark_finished_chunks_and_consolidate(tmp_path: Path) -> None:
    w = _image_store(tmp_path, ["saliency"], [(4, 8), (0, 4)])
    assert w.chunk_done(0, 4) and not w.chunk_done(8, 10)
    out = w.consolidate()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["index"] for r in lines] == list(range(8))
    assert lines[0]["disagreement"] is None  # NaN is written as null: JSON has no NaN
    assert not list(w.path.rglob("*.tmp"))


def test_empty_store_has_typed_empty_frames(tmp_path: Path) -> None:
    StoreWriter(store_dir(tmp_path, "train"), new_manifest(split="train", metrics=["deletion_auc"])).write_manifest()
    store = open_store(tmp_path, "train")
    assert store is not None and store.samples().empty and store.metrics().empty
    assert "deletion_auc" in store.metrics().columns and store_splits(tmp_path) == ["train"]


def test_a_damaged_manifest_is_no_store(tmp_path: Path) -> None:
    folder = store_dir(tmp_path, "test")
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{not json")
    assert open_store(tmp_path, "test") is None and store_splits(tmp_path) == []
