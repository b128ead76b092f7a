"""The Global view page in AppTest on a `tabular_mlp` fitted to `planted` in-process (one thread, seconds): the page
draws every part from `global_report` with the values it computed (the importances' order, the fidelity sentence,
the glassbox accuracies, the truth columns marked), recomputes nothing on a rerun, takes the user's columns and pair,
and refuses an image run with one line that says where to get a table run."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
import torch
from app_pages import open_run_page, texts
from inspect_runs import make_run
from table_runs import fitted_bundle, table_run

from xaidash.dashboard.components import global_compute
from xaidash.dashboard.components.global_sections import fidelity_sentence, global_json, global_zip, rules_text
from xaidash.dashboard.components.global_tree import tree_dot
from xaidash.dashboard.state import run_label
from xaidash.data.formatting import percent
from xaidash.explainers.tabular.api import GlobalOptions, global_report
from xaidash.explainers.tabular.importance import UNITS
from xaidash.explainers.tabular.report_figures import figure_files

SMALL = {"global_shap_rows_{}": 12, "global_grid_{}": 12, "global_repeats_{}": 3}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory):
    torch.set_num_threads(1)
    return table_run(tmp_path_factory.mktemp("global_page_runs"), fitted_bundle("planted"))


def _small(run_id: str) -> dict[str, object]:
    return {k.format(run_id): v for k, v in SMALL.items()}


def _charts(at) -> list[str]:
    return [str(c.proto.spec) for c in at.main.get("vega_lite_chart")]


def test_the_page_draws_the_report_it_computed(table, monkeypatch):
    at = open_run_page(table, "global_view", monkeypatch, timeout=300, **_small(table.id))
    assert at.title[0].value == "Global view"
    assert not at.error, texts(at.error)
    expected = global_report(
        fitted_bundle("planted"),
        GlobalOptions(target="positive", rows=400, grid_points=12, repeats=3, shap_rows=12),
    )
    ranked = [c.column for c in expected.importance.ranked()]
    markdown = "\n".join(texts(at.markdown))
    assert fidelity_sentence(expected.surrogate) in markdown  # "agrees with the network on 90% of held-out rows"
    assert "of held-out rows (" in markdown and "logistic regression" in markdown
    charts = _charts(at)
    # importance + 4 ICE + pair + SHAP bars + 4 SHAP dependence
    assert len(charts) == 11, len(charts)
    importance = charts[0]
    assert "rise in log-loss of the true class (nats)" in importance and "95% interval over 3 shuffles" in importance
    assert "sets the label (known truth)" in importance
    assert sum("ICE of" in c for c in charts) == 4
    assert [f'"ICE of {name}"' in "".join(charts) for name in ranked[:4]] == [True] * 4  # the 4 most important
    assert "P(positive), predicted" in "".join(charts) and "row's own value" in "".join(charts)
    pair = next(c for c in charts if "Partial dependence of" in c)
    assert f"Partial dependence of {ranked[0]} and {ranked[1]}" in pair and "mean over the rows" in pair
    assert any("the column that interacts with it most" in c for c in charts)
    captions = "\n".join(texts(at.caption))
    assert "x0, x1, x2 set the label" in captions and "the two most important columns" in captions
    scoring = at.selectbox(key=f"global_scoring_{table.id}")  # a classifier's scorings, log-loss by default
    assert scoring.options == [UNITS["accuracy"], UNITS["log_loss"]] and scoring.value == "log_loss"
    assert (
        "class 'positive'" in captions
        and f"Test accuracy of the network: {percent(expected.network_accuracy)}." in captions
    )
    table_shown = at.dataframe[0].value
    assert list(table_shown.columns) == [
        "model", "test accuracy", "network's gain (points)", "Spearman with the network's importances", "what it is"
    ]  # fmt: skip
    accuracy = dict(zip(table_shown["model"], table_shown["test accuracy"], strict=True))
    for model in expected.glassbox.models:
        assert accuracy[model.name] == pytest.approx(100 * model.accuracy)
    assert accuracy["the network"] == pytest.approx(100 * expected.network_accuracy)


def test_a_rerun_reuses_the_report_and_chosen_columns_are_drawn(table, monkeypatch):
    calls: list[GlobalOptions] = []
    real = global_compute.global_report

    def counting(bundle, options, progress=None):
        calls.append(options)
        return real(bundle, options, progress)

    monkeypatch.setattr(global_compute, "global_report", counting)
    state = {**_small(table.id), "global_shap_rows_" + table.id: 0}
    at = open_run_page(table, "global_view", monkeypatch, timeout=300, **state)
    first = len(calls)
    at.run()
    assert len(calls) == first  # the same options: the cached report
    assert any("kept from an earlier computation" in c for c in texts(at.caption))
    at.multiselect(key=f"global_columns_{table.id}").set_value(["group", "x3"])
    at.multiselect(key=f"global_pair_{table.id}").set_value(["x0", "x1"])
    at.button[-1].click().run()  # Compute (the form's submit button)
    assert not at.exception and not at.error, texts(at.error)
    assert calls[-1].columns == ["group", "x3"] and calls[-1].pair == ["x0", "x1"]
    assert len(calls) == first + 1  # a pair of the user's: no ranking pass
    charts = _charts(at)
    assert sum("ICE of" in c for c in charts) == 2 and '"ICE of group"' in "".join(charts)
    assert '"red"' in "".join(charts)  # a categorical column's values by their names
    assert any("Partial dependence of x0 and x1" in c for c in charts)
    at.segmented_control(key=f"global_centred_{table.id}").set_value("centred").run()
    assert len(calls) == first + 1  # the toggle redraws, it does not recompute
    centred = [c for c in _charts(at) if "ICE of" in c]
    assert len(centred) == 2 and all('"Centred ICE of' in c and "from the first value" in c for c in centred)
    assert any("Global SHAP" in h for h in texts(at.subheader))
    assert any("Off: set Rows for global SHAP" in c for c in texts(at.caption))


def test_an_image_run_gets_one_line_and_a_way_to_a_table_run(tmp_path: Path, monkeypatch):
    image = make_run(tmp_path, "shapes", "mlp", epochs=1)
    at = open_run_page(image, "global_view", monkeypatch)
    assert not at.exception and not at.error
    info = texts(at.info)
    assert len(info) == 1, info
    assert "needs a model of table rows" in info[0] and "does not read table rows" in info[0]
    assert "tabular_mlp on breast_cancer, wine, diabetes or planted" in info[0]  # diabetes: a number to predict
    assert not at.main.get("vega_lite_chart")


def test_downloads_hold_the_json_and_every_figure(table):
    report = global_report(fitted_bundle("planted"), GlobalOptions(repeats=2, grid_points=6, shap_rows=0))
    options = GlobalOptions(repeats=2, grid_points=6, shap_rows=0)
    with zipfile.ZipFile(io.BytesIO(global_zip(report, options, table.id))) as z:
        names = set(z.namelist())
        document = json.loads(z.read("global.json"))
    assert set(figure_files(report)) <= names and document["figures"] == sorted(figure_files(report))
    assert document["schema"] == "xaidash.global" and document["request"]["run"] == table.id
    assert document["request"]["parameters"]["grid_points"] == 6
    assert {f"arrays/{Path(f).name}" for f in names if f.startswith("arrays/")} == {
        f for f in names if f.startswith("arrays/")
    }
    alone = json.loads(global_json(report, options, table.id))
    assert alone["surrogate"]["fidelity"] == pytest.approx(report.surrogate.fidelity)


def test_the_tree_is_drawn_and_listed_from_its_nodes(table):
    report = global_report(fitted_bundle("planted"), GlobalOptions(repeats=2, grid_points=6, shap_rows=0))
    s = report.surrogate
    dot = tree_dot(s, report.classes)
    leaves = [n for n in s.nodes if n.yes is None]
    assert dot.count("->") == len(s.nodes) - 1 and dot.count("→") == len(leaves)
    rules = rules_text(s).splitlines()
    assert sum(line.strip().startswith("→") for line in rules) == len(leaves)
    assert sum(line.strip().startswith("if ") for line in rules) == len(s.nodes) - 1
    root = s.nodes[0]
    yes = next(n for n in s.nodes if n.id == root.yes)
    assert rules[0] == f"if {yes.condition}:"


def test_a_wide_table_shows_its_most_important_columns_first():
    from xaidash.dashboard.components.global_charts import MAX_BARS, importance_chart
    from xaidash.explainers.tabular.importance import ColumnImportance, PermutationImportance

    columns = [ColumnImportance(f"c{j}", float(j), 0.0, float(j) - 0.5, float(j) + 0.5) for j in range(MAX_BARS + 10)]
    importance = PermutationImportance("accuracy", "drop in accuracy (share of rows)", 0.9, 3, 100, 0, columns)
    spec = importance_chart(importance, truth=("c49",)).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == MAX_BARS
    assert [r["column"] for r in rows[:3]] == ["c49", "c48", "c47"] and rows[-1]["column"] == "c10"
    assert rows[0]["role"] == "sets the label (known truth)" and rows[1]["role"] == "other columns"
    assert [rows[0]["low"], rows[0]["high"]] == [48.5, 49.5]


def test_the_picker_lists_table_runs_only_and_picking_one_draws_it(tmp_path: Path, monkeypatch):
    image = make_run(tmp_path, "shapes", "mlp", epochs=1)
    rows = table_run(tmp_path, fitted_bundle("planted"))
    at = open_run_page(image, "global_view", monkeypatch, timeout=300, **_small(rows.id))
    picker = at.selectbox(key="global_table_run")
    assert picker.options == [run_label(rows)]  # the image run is not offered
    assert run_label(rows).startswith("tabular_mlp on planted")
    assert picker.value is None and len(at.info) == 1 and "or pick one above" in at.info[0].value
    picker.set_value(rows.id).run()
    assert not at.exception and not at.error, texts(at.error)
    assert not at.info and any("agrees with the network on" in m for m in texts(at.markdown))
    assert at.session_state["xai_selected_run"] == rows.id  # picked for every page
