"""Attribution stores for the data-set report's tests, written with the store's own writer
(explainers/dataset/store.py) from fabricated maps and metrics: no model runs, so a store of a few dozen
samples takes milliseconds. Labels are the run's real test labels; predictions, losses and metrics are
drawn from a seeded generator, with a few samples given known extremes the tests look for."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xaidash.data.registry import get_info, load_split
from xaidash.explainers.dataset.store import MethodShard, StoreWriter, new_manifest, store_dir
from xaidash.models.runs.store import Run

WORST_DELETION = 7  # the sample every method scores worst on deletion (highest AUC)
HIGHEST_LOSS = 3  # the sample with the highest loss (misclassified)


def write_store(
    run: Run,
    n: int = 40,
    methods: Sequence[str] = ("saliency", "ig"),
    chunk: int = 20,
    done: int | None = None,
    split: str = "test",
    seed: int = 0,
) -> StoreWriter:
    """A store of samples 0..n-1 of the run's `split`; only the first `done` (whole chunks) written when given."""
    info = get_info(run.config()["dataset"])
    data = load_split(info.name, split)  # type: ignore[arg-type]
    labels = data.labels[:n].numpy().astype(int)
    rng = np.random.default_rng(seed)
    k = info.num_classes
    preds = np.where(rng.random(n) < 0.75, labels, rng.integers(0, k, n))
    preds[HIGHEST_LOSS] = (labels[HIGHEST_LOSS] + 1) % k
    correct = preds == labels
    prob = rng.uniform(0.4, 0.99, n)
    loss = np.where(correct, -np.log(prob), rng.uniform(1.0, 3.0, n))
    loss[HIGHEST_LOSS] = 5.0
    disagreement = rng.uniform(0.0, 0.8, n) if len(methods) > 1 else np.full(n, np.nan)
    image = info.modality == "image"
    shape = tuple(info.input_shape[1:]) if image else None
    metrics = ["deletion_auc", "insertion_auc"]
    writer = StoreWriter(
        store_dir(run.path, split),
        new_manifest(
            split=split,
            methods=list(methods),
            params={m: {} for m in methods},
            metrics=metrics,
            n_total=n,
            chunk_size=chunk,
            start=0,
            stop=n,
            modality=info.modality,
            engine="local",
        ),
    )
    writer.write_manifest()
    finished = 0
    limit = n if done is None else done
    for start in range(0, limit, chunk):
        stop = min(start + chunk, n)
        idx = np.arange(start, stop)
        rows = []
        for j, m in enumerate(methods):
            dele = rng.beta(2, 5 + 2 * j, stop - start)
            dele[idx == WORST_DELETION] = 0.99
            ins = rng.beta(5, 2 + j, stop - start)
            if image:
                maps: np.ndarray | list[np.ndarray] = rng.normal(size=(stop - start, *shape)).astype(np.float32)  # type: ignore[misc]
                words = None
            else:
                texts = [data.texts[i] for i in idx]  # type: ignore[union-attr]
                words = [t.split() for t in texts]
                maps = [rng.normal(size=len(w)).astype(np.float32) for w in words]
            secs = np.full(stop - start, 0.01 * (j + 1))
            writer.write_shard(
                start, stop, MethodShard(m, idx, maps, {"deletion_auc": dele, "insertion_auc": ins}, secs, words=words)
            )
            for r, i in enumerate(idx):
                rows.append(
                    {
                        "index": int(i),
                        "method": m,
                        "label": int(labels[i]),
                        "label_name": info.classes[labels[i]],
                        "pred": int(preds[i]),
                        "pred_name": info.classes[preds[i]],
                        "prob": float(prob[i]),
                        "loss": float(loss[i]),
                        "correct": bool(correct[i]),
                        "disagreement": float(disagreement[i]),
                        "seconds": float(secs[r]),
                        "deletion_auc": float(dele[r]),
                        "insertion_auc": float(ins[r]),
                    }
                )
        writer.write_rows(start, stop, rows)
        finished = stop
        writer.write_manifest(n_done=finished, seconds=finished / 20.0, samples_per_s=20.0)
    writer.write_manifest(complete=finished == n)
    return writer
