"""`xaidash import module:FILE.py:CLASS --dataset <a table>`: your nn.Module reads the rows as the table adapter
prepares them (checked here against standardisation and one-hot encoding done by hand), a first layer of another
width is refused in one line, and a refused import leaves no run folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from table_models import table_module

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.dashboard.cli import main
from xaidash.data.modalities.table import prepared_width
from xaidash.data.registry import get_info, load_split
from xaidash.models.external import ImportOptions, import_model
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import load_bundle, runs_root


def _by_hand(rows: torch.Tensor, dataset: str) -> torch.Tensor:
    """The prepared vector built without the adapter: (x - mean) / std per numeric column, one-hot per category."""
    parts = []
    for i, c in enumerate(get_info(dataset).columns):
        x = rows[:, i].double().numpy()
        if c.categorical:
            parts.append(np.eye(len(c.categories))[x.round().astype(int)])
        else:
            parts.append(((x - c.mean) / c.std)[:, None])
    return torch.from_numpy(np.concatenate(parts, axis=1)).float()


def test_a_module_on_the_planted_table_reads_the_prepared_rows(tmp_path: Path) -> None:
    width = prepared_width(get_info("planted"))
    assert width == 8 + 3  # eight numeric columns and the three groups one-hot
    source, weights, net = table_module(tmp_path, width)
    options = ImportOptions(weights=weights, dataset="planted", model_options={"inputs": width})
    run = import_model(f"module:{source}:TableNet", options).run
    bundle = load_bundle(run.id, device="cpu")  # rebuilt from the run folder alone
    assert bundle.info.columns == get_info("planted").columns and bundle.spec.modality == "table"
    rows = load_split("planted", "test").rows[:50]
    expected = torch.softmax(net(_by_hand(rows, "planted")), dim=1)
    torch.testing.assert_close(bundle.predict_proba(rows), expected, rtol=1e-5, atol=1e-6)


def test_a_module_of_your_own_csv_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "people.csv"
    rng = np.random.default_rng(0)
    table.write_text(
        "id,age,colour,y\n"
        + "".join(f"p{i},{rng.integers(18, 80)},{['red', 'green', 'blue'][i % 3]},{'ab'[i % 2]}\n" for i in range(40))
    )
    dataset = f"csv:{table}?target=y&id=id"
    width = prepared_width(get_info(dataset))
    assert width == 1 + 3
    source, weights, net = table_module(tmp_path, width)
    code = main(
        [
            "import",
            f"module:{source}:TableNet",
            "--weights",
            str(weights),
            "--dataset",
            dataset,
            "--option",
            f"inputs={width}",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "input: rows of 2 columns" in out.err and f"data set: {dataset}" in out.err
    bundle = load_bundle(out.out.strip().splitlines()[-1], device="cpu")
    rows = load_split(dataset, "train").rows
    torch.testing.assert_close(
        bundle.predict_proba(rows), torch.softmax(net(_by_hand(rows, dataset)), dim=1), rtol=1e-5, atol=1e-6
    )


def test_a_first_layer_of_another_width_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, weights, _ = table_module(tmp_path, 11)
    argv = ["import", f"module:{source}:TableNet", "--weights", str(weights), "--option", "inputs=11"]
    code = main([*argv, "--dataset", "breast_cancer"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert (
        "its first layer fc1 (Linear) reads 11 numbers, but data set breast_cancer gives 30 numbers per row "
        "(30 numeric columns, one each): build the model with 30 inputs" in err
    )
    assert not runs_root().exists() or not [p for p in runs_root().iterdir() if not p.name.startswith(".")]
    with pytest.raises(ModelError, match="--input-shape describe images"):
        import_model(
            f"module:{source}:TableNet",
            ImportOptions(weights=weights, dataset="planted", input_shape=(3, 8, 8), model_options={"inputs": 11}),
        )
    with pytest.raises(ModelError, match=r"has 2 classes \(negative, positive\) but the model has 3 outputs"):
        _, three, _ = table_module(tmp_path, 11, classes=3)
        import_model(
            f"module:{source}:TableNet",
            ImportOptions(weights=three, dataset="planted", model_options={"inputs": 11, "classes": 3}),
        )


def test_a_module_of_a_number_to_predict_answers_in_its_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module with one output, imported against diabetes: the run's prediction is the module's own output on the
    prepared rows (the value, no softmax); a CSV with a numeric target the same from the command line; two outputs
    for a number are refused in one line with nothing written."""
    width = prepared_width(get_info("diabetes"))
    source, weights, net = table_module(tmp_path, width, classes=1)
    options = ImportOptions(weights=weights, dataset="diabetes", model_options={"inputs": width, "classes": 1})
    bundle = load_bundle(import_model(f"module:{source}:TableNet", options).run.id, device="cpu")
    assert bundle.regression is not None and bundle.regression.name == "disease progression"
    rows = load_split("diabetes", "test").rows
    with torch.no_grad():
        expected = net(_by_hand(rows, "diabetes"))
    torch.testing.assert_close(bundle.predict_proba(rows), expected, rtol=1e-5, atol=1e-5)

    table = tmp_path / "prices.csv"
    rng = np.random.default_rng(4)
    table.write_text(
        "area,colour,price\n"
        + "".join(f"{rng.uniform(30, 150):.1f},{['red', 'blue'][i % 2]},{rng.normal(300, 50):.2f}\n" for i in range(60))
    )
    dataset = f"csv:{table}?target=price&unit=kEUR"
    width = prepared_width(get_info(dataset))
    source, weights, net = table_module(tmp_path, width, classes=1)
    argv = ["import", f"module:{source}:TableNet", "--weights", str(weights), "--dataset", dataset]
    code = main([*argv, "--option", f"inputs={width}", "--option", "classes=1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "predicts: a number: price in kEUR (one output, the value)" in out.err, out.err
    bundle = load_bundle(out.out.strip().splitlines()[-1], device="cpu")
    rows = load_split(dataset, "train").rows
    with torch.no_grad():
        expected = net(_by_hand(rows, dataset))
    torch.testing.assert_close(bundle.predict_proba(rows), expected, rtol=1e-5, atol=1e-5)

    runs_before = sorted(p.name for p in runs_root().iterdir())
    _, two, _ = table_module(tmp_path, width, classes=2)
    code = main(["import", f"module:{source}:TableNet", "--weights", str(two), "--dataset", dataset, "--option",
                 f"inputs={width}", "--option", "classes=2"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert f"Data set {dataset} has a number to predict (price) but the model has 2 outputs: a model of a" in err
    assert sorted(p.name for p in runs_root().iterdir() if not p.name.startswith(".")) == [
        n for n in runs_before if not n.startswith(".")
    ]
