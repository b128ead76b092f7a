"""What reads a run's data set reads a table's rows through the table adapter, as it reads images and texts: the
activations behind the Embeddings page and the out-of-distribution hint, the training samples influence scores,
calibration's logits, TCAV's inputs; where a table cannot serve (TCAV's concept examples) the refusal is one line,
and a data set of the wrong kind is named by what it holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from train_configs import tiny_run

from xaidash.data.errors import DatasetError
from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_info, load_split
from xaidash.explainers.concepts.api import class_inputs, concept_report
from xaidash.explainers.concepts.randoms import random_pool
from xaidash.explainers.influence.training_set import training_data
from xaidash.explainers.params import ExplainError
from xaidash.models.calibration_run import split_logits_of
from xaidash.models.inspect.activations import PENULTIMATE, compute_activations
from xaidash.models.runs.store import Run, load_bundle
from xaidash.models.training.data import training_samples


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("table_runs")


@pytest.fixture(autouse=True)
def _runs_in_root(_isolated_roots: None, run_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(run_root))


@pytest.fixture(scope="module")
def wine_run(run_root: Path) -> Run:
    return Run(tiny_run(run_root, "wine", "tabular_mlp"))


def test_activations_of_the_penultimate_layer_for_table_rows(wine_run) -> None:
    bundle = load_bundle(wine_run.id, device="cpu")
    acts = compute_activations(bundle, PENULTIMATE, n=20, use_cache=False)
    rows = load_split("wine", "test").rows[torch.as_tensor(acts.indices)]
    with torch.no_grad():
        logits = bundle.logits(bundle.prepare(rows))
        hidden = bundle.model.net[:-1](bundle.prepare(rows))  # the input of the last Linear layer
    assert acts.features.shape == (20, hidden.shape[1])
    np.testing.assert_allclose(acts.features, hidden.numpy(), atol=1e-5)
    np.testing.assert_array_equal(acts.preds, logits.argmax(1).numpy())


def test_influence_reads_the_rows_the_run_trained_on(wine_run) -> None:
    data = training_data(wine_run)
    samples = training_samples(wine_run)
    assert len(data) == len(samples) == 64 - 6  # tiny_run's cap, less the validation tenth
    train = load_split("wine", "train")
    assert torch.equal(data.raw([0, 5]), train.rows[samples.indices[[0, 5]]])
    bundle = load_bundle(wine_run.id, device="cpu")
    assert torch.equal(data.inputs(bundle, 0, 3), bundle.prepare(train.rows[samples.indices[:3]]))


def test_calibration_reads_logits_of_rows(wine_run) -> None:
    bundle = load_bundle(wine_run.id, device="cpu")
    test = load_split("wine", "test")
    logits, labels = split_logits_of(bundle, test, [2, 0, 9])
    assert torch.allclose(logits, bundle.logits(bundle.prepare(test.rows[[2, 0, 9]])), atol=1e-6)
    assert torch.equal(labels, test.labels[[2, 0, 9]])


def test_tcav_takes_rows_as_inputs_and_refuses_concepts_in_one_line(wine_run) -> None:
    bundle = load_bundle(wine_run.id, device="cpu")
    test, train = load_split("wine", "test"), load_split("wine", "train")
    inputs = class_inputs(bundle, 1, 6, 0, None).inputs
    assert inputs.shape == (6, len(bundle.info.columns)) and bool((test.labels[_rows_of(inputs, test.rows)] == 1).all())
    pool = random_pool(bundle, None, 10, 0).inputs
    assert pool.shape == (10, len(bundle.info.columns)) and len(_rows_of(pool, train.rows)) == 10
    with pytest.raises(ExplainError, match=r"^tabular_mlp declares no conv or block layers for TCAV; name one with "):
        concept_report(bundle, ["dataset:wine:cultivar 1"], 0)
    with pytest.raises(ExplainError) as refused:
        concept_report(bundle, ["dataset:wine:cultivar 1"], 0, layers=["net.3"])
    assert str(refused.value) == (
        "Concept 'dataset:wine:cultivar 1': dataset: concepts are for image or text or series models; this is a table model."
    )


def _rows_of(rows: torch.Tensor, split_rows: torch.Tensor) -> list[int]:
    """The split's index of each row (each must be there)."""
    out = []
    for row in rows:
        (where,) = torch.nonzero((split_rows == row).all(1), as_tuple=True)
        assert len(where) >= 1
        out.append(int(where[0]))
    return out


@pytest.mark.parametrize(
    ("adapter", "dataset", "message"),
    [
        ("image", "wine", "Data set wine holds rows; this model reads images."),
        ("text", "planted", "Data set planted holds rows; this model reads texts."),
        ("causal_lm", "breast_cancer", "Data set breast_cancer holds rows; a language model reads texts."),
        ("table", "shapes", "Data set shapes holds images; this model reads rows."),
        ("table", "cues", "Data set cues holds texts; this model reads rows."),
        ("image", "cues", "Data set cues holds texts; this model reads images."),
    ],
)
def test_a_split_of_another_kind_is_named_by_what_it_holds(adapter: str, dataset: str, message: str) -> None:
    with pytest.raises(DatasetError) as refused:
        modality_of(adapter).check_split(load_split(dataset, "test"), dataset)  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_a_row_in_one_line_names_each_column_in_its_units() -> None:
    info = get_info("planted")
    adapter = modality_of(info.modality)
    row = torch.tensor([0.5, -1.25, 5.0, 0.0, 0.0, 12.5, -100.0, 7.0, 2.0])
    line = adapter.one_line(row, info, 1000)
    assert line == "x0 0.5, x1 -1.25, x2 5, x3 0, x4 0, x5 12.5, x6 -100, x7 7, group blue"
    assert adapter.one_line(row, info, 20) == line[:19] + "…" and len(adapter.one_line(row, info, 20)) == 20
    text = modality_of("text")
    assert text.one_line("a short text", info, 50) == "a short text" and text.one_line("abcdef", info, 4) == "abc…"
