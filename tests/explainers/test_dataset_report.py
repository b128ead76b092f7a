"""The data-set report's numbers (explainers/dataset/report.py) on small frames shaped like an attribution
store's `samples()` and `metrics()`, with values chosen so every aggregate can be checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from xaidash.data.registry import get_info
from xaidash.explainers.dataset import report as R

CLASSES = ["circle", "square", "triangle"]


@pytest.fixture
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """6 samples (indices 10..15), 2 methods; sample 12 and 15 misclassified; insertion missing for one row."""
    labels = [0, 0, 1, 1, 2, 2]
    preds = [0, 0, 2, 1, 2, 0]
    samples = pd.DataFrame(
        {
            "index": range(10, 16),
            "label": labels,
            "label_name": [CLASSES[k] for k in labels],
            "pred": preds,
            "pred_name": [CLASSES[k] for k in preds],
            "prob": [0.9, 0.8, 0.6, 0.7, 0.95, 0.5],
            "loss": [0.1, 0.2, 1.5, 0.4, 0.05, 2.0],
            "correct": [a == b for a, b in zip(labels, preds, strict=True)],
            "disagreement": [0.1, 0.5, 0.2, np.nan, 0.9, 0.3],
        }
    )
    rows = []
    for j, i in enumerate(range(10, 16)):
        rows.append(
            {
                "index": i,
                "method": "saliency",
                "seconds": 0.01,
                "deletion_auc": 0.1 * (j + 1),
                "insertion_auc": 0.5,
                "pointing_game": np.nan,
            }
        )
        rows.append(
            {
                "index": i,
                "method": "ig",
                "seconds": 0.03,
                "deletion_auc": 0.05 * (j + 1),
                "insertion_auc": np.nan if i == 13 else 0.8,
                "pointing_game": np.nan,
            }
        )
    return samples, pd.DataFrame(rows)


def test_metric_names_keep_the_order_of_metrics_and_drop_empty_columns(frames):
    _, metrics = frames
    assert R.metric_names(metrics) == ["deletion_auc", "insertion_auc", "seconds"]  # pointing game: all NaN


def test_method_summary_and_best(frames):
    _, metrics = frames
    s = R.method_summary(metrics, ["saliency", "ig"], ["deletion_auc", "insertion_auc"])
    row = s[(s.method == "saliency") & (s.metric == "deletion_auc")].iloc[0]
    assert row["n"] == 6 and row["valid"] == 6
    assert row["mean"] == pytest.approx(0.35)
    assert row["median"] == pytest.approx(0.35) and row["q25"] == pytest.approx(0.225)
    assert row["std"] == pytest.approx(np.std([0.1 * k for k in range(1, 7)], ddof=1))
    assert row["low"] < 0.35 < row["high"]
    ins = s[(s.method == "ig") & (s.metric == "insertion_auc")].iloc[0]
    assert ins["n"] == 6 and ins["valid"] == 5 and ins["mean"] == pytest.approx(0.8)
    # lower deletion is better (ig), higher insertion is better (ig)
    assert R.best_methods(s) == {"deletion_auc": ["ig"], "insertion_auc": ["ig"]}


def test_per_class_means_and_class_table(frames):
    samples, metrics = frames
    pc = R.per_class(samples, metrics, "deletion_auc", ["saliency", "ig"], CLASSES)
    assert list(pc["class"]) == ["circle", "circle", "square", "square", "triangle", "triangle"]
    sal = pc[pc.method == "saliency"].set_index("class")["mean"]
    assert sal["circle"] == pytest.approx(0.15) and sal["square"] == pytest.approx(0.35)
    assert sal["triangle"] == pytest.approx(0.55)
    assert set(pc["n"]) == {2}
    ct = R.class_table(samples, CLASSES).set_index("class")
    assert ct.loc["square", "samples"] == 2 and ct.loc["square", "accuracy"] == pytest.approx(0.5)
    assert ct.loc["triangle", "mean loss"] == pytest.approx(1.025)
    assert ct.loc["square", "mean disagreement"] == pytest.approx(0.2)  # the NaN is left out
    # a class without stored samples has no row
    assert "hexagon" not in set(R.class_table(samples, [*CLASSES, "hexagon"])["class"])


def test_sample_table_columns_sorts_and_filters(frames):
    samples, metrics = frames
    t = R.sample_table(samples, metrics, ["saliency", "ig"], {"saliency": "Saliency", "ig": "IG"})
    assert list(t.columns) == [
        "index", "label", "prediction", "prob", "loss", "correct", "disagreement", "deletion AUC (mean)",
        "Saliency deletion AUC", "IG deletion AUC", "Saliency insertion AUC", "IG insertion AUC",
    ]  # fmt: skip
    first = t.set_index("index").loc[10]
    assert first["deletion AUC (mean)"] == pytest.approx((0.1 + 0.05) / 2)
    assert math.isnan(t.set_index("index").loc[13, "IG insertion AUC"])

    assert list(R.sort_samples(t, "worst deletion AUC")["index"]) == [15, 14, 13, 12, 11, 10]
    assert list(R.sort_samples(t, "most disagreement between methods")["index"]) == [14, 11, 15, 12, 10, 13]  # NaN last
    assert list(R.sort_samples(t, "highest loss")["index"]) == [15, 12, 13, 11, 10, 14]
    assert list(R.sort_samples(t, "misclassified first")["index"]) == [15, 12, 13, 11, 10, 14]
    assert list(R.sort_samples(t, "data set order")["index"]) == list(range(10, 16))
    with pytest.raises(ValueError, match="Unknown order"):
        R.sort_samples(t, "best first")

    assert list(R.filter_samples(t, ["square"])["index"]) == [12, 13]
    assert list(R.filter_samples(t, which="misclassified")["index"]) == [12, 15]
    assert list(R.filter_samples(t, ["circle", "triangle"], "correct")["index"]) == [10, 11, 14]


def test_distributions_and_histogram(frames):
    _, metrics = frames
    d = R.distribution_frame(metrics, "insertion_auc", ["saliency", "ig"])
    assert len(d) == 11 and set(d["method"]) == {"saliency", "ig"}  # the NaN is left out
    h = R.histogram(R.distribution_frame(metrics, "deletion_auc", ["saliency", "ig"]), bins=5)
    assert len(h) == 10 and h.groupby("method")["count"].sum().to_dict() == {"saliency": 6, "ig": 6}
    assert h["start"].min() == pytest.approx(0.05) and h["end"].max() == pytest.approx(0.6)
    assert h.groupby("method")["share"].sum().to_dict() == pytest.approx({"saliency": 1.0, "ig": 1.0})
    same = R.histogram(pd.DataFrame({"method": ["a", "a"], "value": [0.3, 0.3]}), bins=4)
    assert same["count"].sum() == 2  # every value equal: still counted
    assert R.histogram(pd.DataFrame(columns=["method", "value"])).empty


def test_titles_commands_and_facts():
    assert R.axis_title("deletion_auc").startswith("Deletion AUC (") and "lower is better" in R.axis_title(
        "deletion_auc"
    )
    assert "higher is better" in R.axis_title("insertion_auc")
    manifest = {
        "split": "test", "methods": ["saliency", "ig"], "n_total": 1000, "n_done": 400, "complete": False,
        "engine": "ray", "created": 0, "samples_per_s": 12.5, "seconds": 32.0, "start": 0, "stop": 1000,
    }  # fmt: skip
    cmd = R.resume_command("20261123-shapes-mlp", manifest, split_size=1000)
    assert cmd == (
        "xaidash explain --run 20261123-shapes-mlp --input dataset:all --split test --methods saliency,ig "
        "--metrics --engine ray"
    )
    facts = dict(R.store_facts(manifest))
    assert facts["samples"] == "400 of 1,000 (incomplete)" and facts["speed"] == "12.5 samples/s over 32 s"
    assert facts["methods"] == "saliency, ig" and facts["written"] == "an unknown date"
    assert R.input_spec({**manifest, "start": 40, "stop": 80}, 1000) == "dataset:40:80"
    assert R.input_spec(manifest) == "dataset:0:1000"  # the split's size unknown: the range
    assert R.input_spec({**manifest, "split_size": 1000}) == "dataset:all"  # the engine records it
    # settings that must match to resume, when not the CLI's defaults, and no --metrics when there were none
    odd = {**manifest, "chunk_size": 32, "steps": 16, "seed": 3, "with_metrics": False, "engine": "local"}
    assert R.resume_command("r", odd, 1000) == (
        "xaidash explain --run r --input dataset:all --split test --methods saliency,ig --chunk-size 32 --seed 3"
    )
    assert R.parse_stored("test:12") == ("test", 12) and R.parse_stored("train:0") == ("train", 0)
    assert R.parse_stored("val:3") is None and R.parse_stored("test:x") is None and R.parse_stored(None) is None


def test_sample_metrics(frames):
    _, metrics = frames
    got = R.sample_metrics(metrics, 13, ["saliency", "ig", "lime"])
    assert got == {
        "saliency": {"deletion_auc": pytest.approx(0.4), "insertion_auc": 0.5, "seconds": 0.01},
        "ig": {"deletion_auc": pytest.approx(0.2), "seconds": 0.03},
    }


def test_a_store_written_by_the_writer_reads_into_the_report(tmp_path):
    """The report's functions on what the store's reader returns (a store written by its own writer)."""
    from dataset_stores import HIGHEST_LOSS, WORST_DELETION, write_store
    from inspect_runs import make_run

    from xaidash.explainers.dataset.store import open_store

    run = make_run(tmp_path, "shapes", "mlp", epochs=1)
    write_store(run, n=30, methods=("saliency", "ig"), chunk=10, done=20)
    store = open_store(run.path, "test")
    assert store is not None and not store.manifest["complete"] and store.manifest["n_done"] == 20
    samples, metrics = store.samples(), store.metrics()
    methods = store.methods()
    assert R.metric_names(metrics) == ["deletion_auc", "insertion_auc", "seconds"]
    summary = R.method_summary(metrics, methods, R.metric_names(metrics))
    assert set(summary["n"]) == {20}
    classes = list(get_info("shapes").classes)
    pc = R.per_class(samples, metrics, "deletion_auc", methods, classes)
    assert pc.groupby("method")["n"].sum().to_dict() == {"saliency": 20, "ig": 20}
    table = R.sample_table(samples, metrics, methods)
    assert len(table) == 20
    assert R.sort_samples(table, "worst deletion AUC")["index"].iloc[0] == WORST_DELETION
    assert R.sort_samples(table, "highest loss")["index"].iloc[0] == HIGHEST_LOSS
    assert not R.sort_samples(table, "misclassified first")["correct"].iloc[0]
    assert R.resume_command(run.id, store.manifest, split_size=1000) == (
        f"xaidash explain --run {run.id} --input dataset:0:30 --split test --methods saliency,ig --metrics --chunk-size 10"
    )
    got = R.sample_metrics(metrics, WORST_DELETION, methods)
    assert got["saliency"]["deletion_auc"] == pytest.approx(0.99) and got["ig"]["deletion_auc"] == pytest.approx(0.99)
