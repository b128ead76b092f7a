"""Table runs on the pages through AppTest: Explain picks test rows from a table of their values (category names,
never codes), draws the table methods' bars with colour bars and the truth-columns metric, edits a row ("Edit this
row": the prediction checked against the model's own on the edited row) and finds the fewest changed columns with
the fixed ones left alone; rows typed as values are read by the adapter (a bad one in one line); Train offers the
table data sets with tabular_mlp recommended and reads a `csv:` table typed as a path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_pages import assert_ok, make_app, open_page, texts

from xaidash.dashboard.components.train_form import OWN
from xaidash.data.registry import get_info, load_split
from xaidash.models.registry import recommended_model
from xaidash.models.runs.store import load_bundle, resolve_run
from xaidash.models.training.config import TrainConfig

TIMEOUT = 180
PLANTED = "planted"


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tabular_mlp trained on the planted table by the engine (a few seconds on the CPU): (runs root, run id)."""
    from xaidash.models.training.engine import train

    root = tmp_path_factory.mktemp("table_runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        result = train(TrainConfig(dataset=PLANTED, model="tabular_mlp", epochs=12, device="cpu", seed=0))
    assert result.ok, result.error
    return root, Path(result.run_dir).name


def _explain(planted_run, monkeypatch, **state):
    root, run_id = planted_run
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(run_id, TIMEOUT)
    for k, v in state.items():
        at.session_state[k] = v
    return open_page(at, "views/explain.py")


def _frame(at, column: str) -> pd.DataFrame:
    found = [d.value for d in at.dataframe if column in list(d.value.columns)]
    assert found, f"no table with a {column!r} column"
    return found[0]


def test_explain_a_table_row_with_bars_metrics_what_if_and_counterfactual(planted_run, monkeypatch) -> None:
    info = get_info(PLANTED)
    at = _explain(planted_run, monkeypatch, explain_methods_kept=["ig", "occlusion"])
    # The test rows as a table: every column, the category column by its names, the true class and the prediction.
    rows = _frame(at, "test #")
    assert [c.name for c in info.columns] == [c for c in rows.columns if c in {c.name for c in info.columns}]
    group = next(c for c in info.columns if c.categorical)
    assert set(rows[group.name]) <= set(group.categories)
    test = load_split(PLANTED, "test")
    assert np.allclose(rows[info.columns[0].name].to_numpy(), test.rows[: len(rows), 0].numpy(), atol=1e-5)
    assert set(rows["true"]) <= set(info.classes) and set(rows["predicted"]) <= set(info.classes)

    # The picked row's values above its maps; one bar map per method with its colour bar in the method's units.
    header = next(d.value for d in at.dataframe if group.name in d.value.columns and "test #" not in d.value.columns)
    assert header.shape[0] == 1 and header[group.name][0] in group.categories
    legends = [v for v in texts(at.markdown) if 'class="xai-cbar"' in v]
    assert any("logit contribution per column" in v for v in legends)
    assert any("Δ logit per column" in v for v in legends)
    metrics = _frame(at, "Deletion AUC ↓")
    assert list(metrics.index) == ["Integrated Gradients", "Occlusion"]
    assert any(c.startswith("Truth columns found") for c in metrics.columns)

    # What-if: a slider per numeric column within the training range; the edited row's prediction is the model's.
    x2 = next(j for j, c in enumerate(info.columns) if c.name == "x2")
    slider = next(s for s in at.slider if s.label == "x2")
    column = info.columns[x2]
    assert slider.min <= column.low and slider.max >= column.high
    row = test.rows[0].clone()
    new = float(column.high if row[x2] < column.median else column.low)
    slider.set_value(new).run()
    assert_ok(at)
    row[x2] = new
    expected = (
        load_bundle(resolve_run(planted_run[1], planted_run[0]), device="cpu")
        .predict_proba(row.unsqueeze(0))[0]
        .numpy()
    )
    probs = _frame(at, "edited row")
    assert np.allclose(probs["edited row"].to_numpy(), expected, atol=1e-5)
    assert any(t.startswith("**x2:") for t in texts(at.markdown))
    at.button(key="whatif_reset_0").click().run()
    assert any("nothing changed" in t for t in texts(at.markdown))

    # Counterfactual: the fewest changed columns, the fixed ones left alone.
    at.multiselect(key="attack_0_cf_fixed").set_value(["x2"]).run()
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    said = texts(at.success) + texts(at.warning)
    assert any("column" in s for s in said), said
    if any(s.startswith("Counterfactual:") for s in texts(at.success)):
        changed = _frame(at, "→ changed to")
        assert "x2" not in set(changed["column"])
    # Only a noise column left free: none found, said in one line.
    at.multiselect(key="attack_0_cf_fixed").set_value([c.name for c in info.columns if c.name != "x7"]).run()
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    assert any(w.startswith("None found within 3 changed columns") for w in texts(at.warning)), texts(at.warning)


def test_typed_rows_are_read_by_the_adapter(planted_run, monkeypatch) -> None:
    info = get_info(PLANTED)
    at = _explain(planted_run, monkeypatch, explain_methods_kept=["occlusion"])
    at.radio(key="explain_source").set_value("Type values").run()
    assert_ok(at)
    typical = ", ".join(c.value_text(c.median) for c in info.columns)
    at.text_area(key="explain_rows_text").set_value(typical.replace(info.columns[-1].categories[0], "purple")).run()
    errors = texts(at.error)
    assert any("Row 1" in e and "purple" in e and "categories" in e for e in errors), errors
    at.text_area(key="explain_rows_text").set_value(typical).run()
    assert_ok(at)
    assert not texts(at.error)
    assert any("typed row 1" in t for t in texts(at.markdown))

    # A CSV of rows: its header names the columns in any order; an id column is left out; every row is read.
    test = load_split(PLANTED, "test")
    frame = pd.concat(
        [
            pd.DataFrame({"id": [7, 8]}),
            pd.DataFrame(
                {c.name: [c.value_text(float(v)) for v in test.rows[:2, j]] for j, c in enumerate(info.columns)}
            ).iloc[:, ::-1],
        ],
        axis=1,
    )
    at.radio(key="explain_source").set_value("Upload .csv rows").run()
    at.file_uploader(key="explain_rowsfile").set_value(("rows.csv", frame.to_csv(index=False).encode(), "text/csv"))
    at.run()
    assert_ok(at)
    shown = " ".join(texts(at.markdown))
    assert "row 1 of rows.csv" in shown and "row 2 of rows.csv" in shown


def test_train_offers_tables_and_reads_a_csv_path(tmp_path, fresh_jobs) -> None:
    at = open_page(make_app(timeout=120), "views/train.py")
    at.selectbox(key="train_dataset").set_value(PLANTED).run()
    assert_ok(at)
    assert at.selectbox(key="train_model").value == recommended_model(get_info(PLANTED)).name == "tabular_mlp"
    # Your own table, typed as a csv: path.
    rng = np.random.default_rng(0)
    a = rng.normal(size=200)
    pd.DataFrame({"a": a, "b": rng.integers(0, 9, 200), "label": np.where(a > 0, "yes", "no")}).to_csv(
        tmp_path / "own.csv", index=False
    )
    at.selectbox(key="train_dataset").set_value(OWN).run()
    at.text_input(key="train_own_dataset").set_value(f"csv:{tmp_path / 'own.csv'}?target=label").run()
    assert_ok(at)
    assert at.selectbox(key="train_model").value == "tabular_mlp"
    assert any("target 'label'" in c for c in texts(at.caption))
    at.text_input(key="train_own_dataset").set_value(f"csv:{tmp_path / 'own.csv'}?target=nope").run()
    errors = texts(at.error)
    assert len(errors) == 1 and "nope" in errors[0]
    assert not at.button or "Start training" not in [b.label for b in at.button]


def test_side_by_side_shows_a_table_row_and_both_models_bars(planted_run, monkeypatch) -> None:
    info = get_info(PLANTED)
    root, run_id = planted_run
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = open_page(make_app(run_id, TIMEOUT), "views/side_by_side.py")
    assert_ok(at)
    names = {c.name for c in info.columns}
    rows = [d.value for d in at.dataframe if names <= set(d.value.columns) and "test #" not in d.value.columns]
    assert rows and rows[0].shape[0] == 1, "the row's values above both models' maps"
    legends = [v for v in texts(at.markdown) if 'class="xai-cbar"' in v]
    assert len(legends) >= 2
