"""`xaidash import skops:FILE --dataset <a table>`: a scikit-learn classifier saved with skops (never pickle) gives, as
an imported run, exactly scikit-learn's own predict_proba on the same rows, and a regressor of a number to predict its
own predict, in the target's units; untrusted types, other classes or columns, a classifier for a number or a
regressor for classes, and options that do not apply are refused in one line with no run folder left; gradient methods
are refused on it by what its source declares."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.dashboard.cli import main
from xaidash.data.errors import ExplainError
from xaidash.data.registry import get_source, load_split
from xaidash.explainers.registry import MethodOutput, MethodSpec
from xaidash.models.external import ImportOptions, import_model
from xaidash.models.runs.store import load_bundle, runs_root

sio = pytest.importorskip("skops.io")
sklearn_pipeline = pytest.importorskip("sklearn.pipeline")
from sklearn.base import BaseEstimator, TransformerMixin  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

COLOURS = ("red", "green", "blue")


def _table(path: Path, n: int = 150) -> Path:
    """id, age, colour (some NA), size (0..3), y (a, b, c), set by colour, age and size."""
    rng = np.random.default_rng(1)
    lines = ["id,age,colour,size,y"]
    for i in range(n):
        age = int(rng.integers(18, 80))
        colour = "NA" if i % 17 == 0 else COLOURS[int(rng.integers(0, 3))]
        size = int(rng.integers(0, 4))
        y = "c" if colour == "red" else ("a" if age + 10 * size > 60 else "b")
        lines.append(f"r{i},{age},{colour},{size},{y}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _fit(table: Path, classifier, size_as_text: bool) -> tuple[sklearn_pipeline.Pipeline, pd.DataFrame]:
    frame = pd.read_csv(table, dtype={"size": str} if size_as_text else None)
    features = frame.drop(columns=["id", "y"])
    prep = ColumnTransformer(
        [("num", StandardScaler(), ["age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["colour", "size"])]
    )
    pipeline = sklearn_pipeline.Pipeline([("prep", prep), ("clf", classifier)]).fit(features, frame["y"])
    return pipeline, features.set_index(frame["id"])


@pytest.mark.parametrize(
    ("classifier", "size_as_text"),
    [(LogisticRegression(max_iter=500), False), (RandomForestClassifier(n_estimators=20, random_state=0), True)],
)
def test_the_run_gives_scikit_learns_own_probabilities(tmp_path, capsys, classifier, size_as_text) -> None:
    table = _table(tmp_path / "people.csv")
    dataset = f"csv:{table}?target=y&id=id&categorical=size"
    pipeline, features = _fit(table, classifier, size_as_text)
    saved = tmp_path / "model.skops"
    sio.dump(pipeline, saved)
    assert main(["import", f"skops:{saved}", "--dataset", dataset]) == 0
    out = capsys.readouterr()
    assert "gradient and CAM methods do not apply" in out.err, out.err
    saved.unlink()  # the run keeps its own copy
    bundle = load_bundle(out.out.strip().splitlines()[-1], device="cpu")
    assert bundle.info.classes == ("a", "b", "c") and "no gradients" in bundle.spec.no_gradients
    for split in ("train", "test"):
        rows = get_source(dataset).load(split)
        expected = pipeline.predict_proba(features.loc[rows.ids])
        np.testing.assert_allclose(bundle.predict_proba(rows.rows).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dataset", ["breast_cancer", "planted"])
def test_an_estimator_fitted_on_a_splits_rows_reads_them_as_they_are(tmp_path: Path, dataset: str) -> None:
    """Fitted on load_split's raw rows and label codes (planted's `group` as its codes 0..2): the columns in order."""
    train = load_split(dataset, "train")
    model = LogisticRegression(max_iter=5000).fit(train.rows.numpy(), train.labels.numpy())
    saved = tmp_path / "lr.skops"
    sio.dump(model, saved)
    run = import_model(f"skops:{saved}", ImportOptions(dataset=dataset)).run
    bundle = load_bundle(run.id, device="cpu")
    test = load_split(dataset, "test").rows
    expected = model.predict_proba(test.numpy())
    np.testing.assert_allclose(bundle.predict_proba(test).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_a_regressor_gives_scikit_learns_own_predict_in_the_targets_units(tmp_path: Path, capsys) -> None:
    """Ridge on diabetes' raw rows (in order), then gradient boosting on a CSV's named columns with a one-hot category:
    the run's one output is the regressor's predict, the value in the target's units."""
    train, test = load_split("diabetes", "train"), load_split("diabetes", "test")
    ridge = sklearn_pipeline.make_pipeline(StandardScaler(), Ridge(alpha=10.0))
    ridge.fit(train.rows.numpy(), train.labels.numpy())
    saved = tmp_path / "ridge.skops"
    sio.dump(ridge, saved)
    assert main(["import", f"skops:{saved}", "--dataset", "diabetes"]) == 0
    out = capsys.readouterr()
    assert "predicts: a number: disease progression (one output, the value)" in out.err, out.err
    bundle = load_bundle(out.out.strip().splitlines()[-1], device="cpu")
    assert bundle.regression is not None and bundle.info.classes == ("disease progression",)
    expected = ridge.predict(test.rows.numpy())
    np.testing.assert_allclose(bundle.predict_proba(test.rows)[:, 0].numpy(), expected, rtol=1e-5, atol=1e-3)

    table = tmp_path / "prices.csv"
    rng = np.random.default_rng(2)
    lines = ["id,area,colour,rooms,price"]
    for i in range(160):
        area, colour, rooms = rng.uniform(30, 150), COLOURS[i % 3], int(rng.integers(1, 6))
        lines.append(f"h{i},{area:.1f},{colour},{rooms},{1000 * area + 20000 * (colour == 'red') + 5000 * rooms:.2f}")
    table.write_text("\n".join(lines) + "\n")
    dataset = f"csv:{table}?target=price&id=id&unit=EUR"
    frame = pd.read_csv(table)
    features = frame.drop(columns=["id", "price"])
    prep = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["colour"])], remainder="passthrough")
    boosting = sklearn_pipeline.Pipeline([("prep", prep), ("reg", HistGradientBoostingRegressor(random_state=0))])
    boosting.fit(features, frame["price"])
    sio.dump(boosting, tmp_path / "boosting.skops")
    run = import_model(f"skops:{tmp_path / 'boosting.skops'}", ImportOptions(dataset=dataset)).run
    bundle = load_bundle(run.id, device="cpu")
    assert bundle.regression is not None and bundle.regression.unit == "EUR"
    for split in ("train", "test"):
        rows = get_source(dataset).load(split)
        expected = boosting.predict(features.set_index(frame["id"]).loc[rows.ids])
        np.testing.assert_allclose(bundle.predict_proba(rows.rows)[:, 0].numpy(), expected, rtol=1e-5)


def test_a_classifier_for_a_number_or_a_regressor_for_classes_is_one_line(tmp_path: Path, capsys) -> None:
    cancer, diabetes = load_split("breast_cancer", "train"), load_split("diabetes", "train")
    classifier = tmp_path / "lr.skops"
    sio.dump(LogisticRegression(max_iter=5000).fit(diabetes.rows.numpy(), diabetes.labels.numpy() > 140), classifier)
    assert (
        "lr.skops holds a classifier (LogisticRegression, classes False, True) but data set diabetes predicts a "
        "number (disease progression): save a fitted regressor"
        in _refused(["import", f"skops:{classifier}", "--dataset", "diabetes"], capsys)
    )
    regressor = tmp_path / "ridge.skops"
    sio.dump(Ridge().fit(cancer.rows.numpy(), cancer.labels.numpy()), regressor)
    assert (
        "ridge.skops holds a regressor Ridge without predict_proba and classes_, but data set breast_cancer has "
        "classes" in _refused(["import", f"skops:{regressor}", "--dataset", "breast_cancer"], capsys)
    )
    two = tmp_path / "two.skops"
    targets = np.stack([diabetes.labels.numpy(), -diabetes.labels.numpy()], axis=1)
    sio.dump(Ridge().fit(diabetes.rows.numpy(), targets), two)
    assert "has a number to predict (disease progression) but the model has 2 outputs" in _refused(
        ["import", f"skops:{two}", "--dataset", "diabetes"], capsys
    )


class Shady(BaseEstimator, TransformerMixin):
    """A type of the user's own: skops will not load it, and neither will we."""

    def fit(self, x, y=None):
        return self

    def transform(self, x):
        return x


def _refused(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    said = [line for line in err.strip().splitlines() if not line.startswith("importing ")]
    assert code == 2 and "Traceback" not in err and len(said) == 1 and said[0].startswith("error: "), err
    assert not runs_root().exists() or not [p for p in runs_root().iterdir() if not p.name.startswith(".")]
    return err


def test_bad_imports_are_one_line_and_leave_nothing(tmp_path: Path, capsys) -> None:
    train = load_split("breast_cancer", "train")
    x, y = train.rows.numpy(), train.labels.numpy()
    shady = tmp_path / "shady.skops"
    sio.dump(sklearn_pipeline.make_pipeline(Shady(), LogisticRegression(max_iter=5000)).fit(x, y), shady)
    err = _refused(["import", f"skops:{shady}", "--dataset", "breast_cancer"], capsys)
    assert re.search(r"shady\.skops holds types that are not trusted: [\w.]*test_import_skops\.Shady;", err), err
    good = tmp_path / "lr.skops"
    sio.dump(LogisticRegression(max_iter=5000).fit(x, y), good)
    assert "needs --dataset naming the table" in _refused(["import", f"skops:{good}"], capsys)
    assert "--weights do(es) not apply" in _refused(
        ["import", f"skops:{good}", "--dataset", "breast_cancer", "--weights", str(good)], capsys
    )
    assert "reads 30 columns but data set planted has 9" in _refused(
        ["import", f"skops:{good}", "--dataset", "planted"], capsys
    )
    wine = load_split("wine", "train")
    three = tmp_path / "wine.skops"
    sio.dump(LogisticRegression(max_iter=5000).fit(wine.rows.numpy(), wine.labels.numpy()), three)
    assert "predicts classes 0, 1, 2 but data set breast_cancer has malignant, benign" in _refused(
        ["import", f"skops:{three}", "--dataset", "breast_cancer"], capsys
    )
    junk = tmp_path / "junk.skops"
    junk.write_bytes(b"not a zip file at all")
    assert "junk.skops is not a readable skops file" in _refused(
        ["import", f"skops:{junk}", "--dataset", "breast_cancer"], capsys
    )


def test_gradient_methods_are_refused_by_what_the_source_declares(tmp_path: Path) -> None:
    train = load_split("breast_cancer", "train")
    saved = tmp_path / "lr.skops"
    sio.dump(LogisticRegression(max_iter=5000).fit(train.rows.numpy(), train.labels.numpy()), saved)
    bundle = load_bundle(import_model(f"skops:{saved}", ImportOptions(dataset="breast_cancer")).run.id, device="cpu")

    def compute(ctx, params) -> MethodOutput:
        raise AssertionError("never reached")

    def method(family: str) -> MethodSpec:
        return MethodSpec(
            id=f"probe_{family}",
            label=f"A {family} method",
            modalities=("table",),
            compute=compute,
            family=family,
            output="logit",
        )

    for family in ("gradient", "cam"):
        with pytest.raises(ExplainError, match=r"does not apply to skops:lr: it is a scikit-learn pipeline"):
            method(family).check(bundle)
    for family in ("perturbation", "shap"):
        method(family).check(bundle)  # occlusion, KernelSHAP and LIME only need the model's outputs
    x = bundle.prepare(train.rows[:4]).requires_grad_(True)
    assert not bundle.logits(x).requires_grad  # nothing to backpropagate: the refusal is the truth
    torch.testing.assert_close(bundle.predict_proba(train.rows[:4]).sum(1), torch.ones(4))
