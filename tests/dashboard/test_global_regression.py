"""The Global view page of a model that predicts a number (`tabular_mlp` fitted to `diabetes` in-process) in AppTest:
the importance chooser offers the regression scorings only (R², by default), the header, figures and captions say R²
and the predicted value's name in its units (never a class's probability), the surrogate's fidelity is its R² and its
leaves show values, and the glassbox table reads test R² and the network's gain in R² points, each checked against
the report `global_report` computes with the same options."""

from __future__ import annotations

import json

import pytest
import torch
from app_pages import open_run_page, texts
from table_runs import fitted_bundle, table_run

from xaidash.dashboard.components.global_sections import fidelity_sentence, gain_words, rules_text
from xaidash.dashboard.components.global_tree import tree_dot
from xaidash.explainers.tabular.api import GlobalOptions, global_report, scorings
from xaidash.explainers.tabular.importance import REGRESSION_SCORINGS, UNITS

SMALL = {"global_shap_rows_{}": 12, "global_grid_{}": 8, "global_repeats_{}": 3}
VALUE = "predicted disease progression"
SPEARMAN = "Spearman with the network's importances"


@pytest.fixture(scope="module")
def diabetes(tmp_path_factory: pytest.TempPathFactory):
    torch.set_num_threads(1)
    return table_run(tmp_path_factory.mktemp("global_regression_runs"), fitted_bundle("diabetes"))


@pytest.fixture(scope="module")
def expected():
    """The report the page computes with SMALL's settings (every held-out row: diabetes has 89)."""
    return global_report(fitted_bundle("diabetes"), GlobalOptions(rows=1000, grid_points=8, repeats=3, shap_rows=12))


@pytest.fixture(scope="module")
def page(diabetes):
    """The page over the diabetes run, drawn once for the tests that read it."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        state = {k.format(diabetes.id): v for k, v in SMALL.items()}
        at = open_run_page(diabetes, "global_view", monkeypatch, timeout=300, **state)
        assert not at.exception and not at.error, texts(at.error)
        yield at


def _charts(at) -> list[str]:
    """Each chart's Vega-Lite spec as JSON text, its non-ASCII characters (R²) as they are."""
    return [json.dumps(json.loads(c.proto.spec), ensure_ascii=False) for c in at.main.get("vega_lite_chart")]


def test_the_regression_page_reads_in_r2_and_the_predicted_value(diabetes, expected, page):
    at = page
    scoring = at.selectbox(key=f"global_scoring_{diabetes.id}")
    assert tuple(scoring.options) == tuple(UNITS[s] for s in REGRESSION_SCORINGS)
    assert scoring.value == "r2" and tuple(REGRESSION_SCORINGS) == scorings(fitted_bundle("diabetes"))
    captions = "\n".join(texts(at.caption))
    assert "predicting disease progression, on cpu" in captions and "class " not in captions
    assert f"Test R² of the network: {expected.network_score:.3f}." in captions
    assert f"baseline R² {expected.importance.baseline:.3f}" in captions and "the true values" in captions
    charts = _charts(at)
    joined = "".join(charts)
    assert "P(" not in joined and "probability" not in joined  # no class's probability anywhere
    importance = charts[0]
    assert "drop in R² (share of the target's variance)" in importance
    ranked = [c.column for c in expected.importance.ranked()]
    ice = [c for c in charts if '"ICE of' in c]
    assert len(ice) == 4 and all(f'"title": "{VALUE}"' in c for c in ice)
    assert [f'"ICE of {name}"' in joined for name in ranked[:4]] == [True] * 4
    pair = next(c for c in charts if "Partial dependence of" in c)
    assert f"{VALUE}, mean over the rows" in pair and f"Partial dependence of {ranked[0]} and {ranked[1]}" in pair
    assert "the predicted disease progression as the column is set" in captions
    assert "The mean of the predicted disease progression over the rows" in captions
    shap = [c for c in charts if "dependence of" in c and "ICE" not in c and "Partial" not in c]
    assert shap and all("contribution to the predicted disease progression" in c for c in shap)
    assert "for the predicted disease progression" in captions


def test_the_regression_surrogate_and_glassboxes_read_in_r2(diabetes, expected, page):
    at = page
    s = expected.surrogate
    markdown = "\n".join(texts(at.markdown))
    assert fidelity_sentence(s) in markdown
    assert f"with R² {s.fidelity:.2f} on {s.held_out} held-out rows" in fidelity_sentence(s)
    assert "agrees with the network on" not in markdown
    dot = at.main.get("graphviz_chart")[0].proto.spec
    leaves = [n for n in s.nodes if n.yes is None]
    assert dot.count("→ disease progression") == len(leaves)
    for leaf in leaves:  # each leaf's value in units and the network's spread under it
        assert f"→ {leaf.predicted}\\n{leaf.rows} rows, ± {leaf.spread:.3g}" in dot
    assert " / " not in dot  # no per-class counts
    rules = rules_text(s)
    assert rules.count("→ disease progression") == len(leaves) and "% of them predicted so" not in rules
    captions = "\n".join(texts(at.caption))
    assert "regression tree of depth 3 fitted to the network's predicted disease progression" in captions
    assert f"its R² is {s.accuracy:.2f}" in captions and "coloured by the value they predict" in captions
    by_value = sorted(leaves, key=lambda n: n.value)
    assert f"the lowest leaf, {by_value[0].predicted}; deep blue: the highest, {by_value[-1].predicted}" in captions
    table = at.dataframe[0].value
    assert list(table.columns) == ["model", "test R²", "network's gain (R² points)", SPEARMAN, "what it is"]
    box = expected.glassbox
    score = dict(zip(table["model"], table["test R²"], strict=True))
    gain = dict(zip(table["model"], table["network's gain (R² points)"], strict=True))
    assert score["the network"] == pytest.approx(box.network_score) and gain["the network"] == 0.0
    assert [m.name for m in box.models] == ["ridge regression", "regression tree"]
    for m in box.models:
        assert score[m.name] == pytest.approx(m.score)
        assert gain[m.name] == pytest.approx(100 * (box.network_score - m.score))
        assert f"{m.name} R² {m.score:.3f} ({gain_words(box.network_score - m.score, 'R² points')})" in markdown
    assert f"the network scores **R² {box.network_score:.3f}**" in markdown
    assert "%" not in "".join(str(v) for v in table["test R²"])


def test_a_regression_tree_is_drawn_by_value_and_a_classifier_tree_by_class():
    report = global_report(fitted_bundle("diabetes"), GlobalOptions(repeats=2, grid_points=6, shap_rows=0))
    dot = tree_dot(report.surrogate, report.classes)
    leaves = sorted((n for n in report.surrogate.nodes if n.yes is None), key=lambda n: n.value or 0.0)
    fills = [dot.split(f"  n{n.id} [", 1)[1].split("fillcolor=", 1)[1][:9] for n in leaves]
    darkness = [sum(int(f[i : i + 2], 16) for i in (2, 4, 6)) for f in fills]  # lower: deeper blue
    assert darkness == sorted(darkness, reverse=True) and darkness[0] > darkness[-1]
    planted = global_report(fitted_bundle("planted"), GlobalOptions(repeats=2, grid_points=6, shap_rows=0))
    classes = tree_dot(planted.surrogate, planted.classes)
    assert " / " in classes and "rows, ±" not in classes  # per-class counts, as before
