"""The table adapter's explaining half: rows typed or read from a CSV file (bad ones refused in one line naming the
column), maps per column with the row's values as labels, the bar chart with its colour bar, the figure JSON, the
column deletion/insertion curves and every metric it lists, scored on a trained planted model."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from table_bundles import split, trained_bundle

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.table import to_columns
from xaidash.explainers import explain
from xaidash.explainers.figures.map_figure import explanation_figures
from xaidash.explainers.inputs import resolve_input
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.modalities.table_values import edit_row, reference_rows
from xaidash.explainers.scoring import input_metrics
from xaidash.models import ModelBundle

ADAPTER = adapter_of("table")
TYPED = "0.5, -1.25, 6, 0, 0.01, 3, -20, 7, blue"


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle()


def one_line(err: pytest.ExceptionInfo[ExplainError]) -> str:
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_typed_row_reads_numbers_and_category_names(bundle: ModelBundle) -> None:
    row, description = ADAPTER.read_input(TYPED, bundle)
    assert row.tolist() == pytest.approx([0.5, -1.25, 6, 0, 0.01, 3, -20, 7, 2])
    assert description.startswith("typed row: x0 = 0.5, x1 = -1.25")
    raw, label, _ = resolve_input(TYPED.replace("blue", "Blue"), bundle)  # through what the CLI's --input reads
    assert label is None and raw.tolist() == row.tolist()


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("0.5, -1.25, 6", ["has 9 values", "got 3"]),
        ("0.5, -1.25, six, 0, 0.01, 3, -20, 7, blue", ["'x2'", "'six' is not a number"]),
        ("0.5, -9, 6, 0, 0.01, 3, -20, 7, blue", ["'x1'", "outside the training data's range"]),
        ("0.5, -1.25, 6, 0, 0.01, 3, -20, 7, purple", ["'group'", "'purple' is not one of its categories"]),
        ("0.5, -1.25, 6, 0, 0.01, 3, -20, 7.5, blue", ["'x7'", "whole numbers"]),
        ("0.5, -1.25, nan, 0, 0.01, 3, -20, 7, blue", ["'x2'", "not a finite number"]),
        ("   ", ["Give a row"]),
    ],
)
def test_a_bad_typed_row_gets_one_line_naming_the_column(bundle: ModelBundle, typed: str, words: list[str]) -> None:
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(typed, bundle)
    text = one_line(err)
    assert all(w in text for w in words), text


def _csv(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_csv_of_rows_reads_its_columns_by_name(bundle: ModelBundle, tmp_path: Path) -> None:
    header = "label,group,x7,x6,x5,x4,x3,x2,x1,x0"  # any order; the label column is left out
    path = _csv(tmp_path, [header, "1,red,3,0,0,0,0,5,1,0.25", "0,green,4,1,2,0.05,0.5,4,-1,-0.5"])
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(path), bundle)
    assert "holds 2 rows" in one_line(err) and "rows.csv:ROW" in one_line(err)
    row, description = ADAPTER.read_input(f"{path}:2", bundle)
    assert row.tolist() == pytest.approx([-0.5, -1, 4, 0.5, 0.05, 2, 1, 4, 1])
    assert description == "row 2 of rows.csv"
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(f"{path}:3", bundle)
    assert "row 3 is not one of them" in one_line(err)


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (["x0,x1,x2,x3,x4,x5,x6,x7", "0,0,5,0,0,0,0,3"], ["no column 'group'"]),
        (["x0,x1,x2,x3,x4,x5,x6,x7,group", "0,0,5,0,0,0,0,3,teal"], ["line 2", "'group'", "'teal'"]),
        (["x0,x1,x2,x3,x4,x5,x6,x7,group", "0,0,5,0,0,0"], ["line 2", "6 values for 9 header columns"]),
        (["x0,x1,x2,x3,x4,x5,x6,x7,group"], ["a header but no rows"]),
        ([""], ["is empty"]),
    ],
)
def test_a_bad_csv_gets_one_line(bundle: ModelBundle, tmp_path: Path, lines: list[str], words: list[str]) -> None:
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(_csv(tmp_path, lines)), bundle)
    text = one_line(err)
    assert all(w in text for w in words), text


def test_a_csv_that_is_not_text_or_not_there_gets_one_line(bundle: ModelBundle, tmp_path: Path) -> None:
    binary = tmp_path / "rows.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 50)
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(binary), bundle)
    assert "rows.csv is not a text file: read as UTF-16 LE" in one_line(err)  # the bytes only look like a mark
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(tmp_path / "missing.csv"), bundle)
    assert "does not exist" in one_line(err)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ((0, float("nan")), ["column 'x0'", "not a finite number"]),
        ((8, 3.0), ["column 'group'", "not a category code"]),
    ],
)
def test_rows_that_cannot_be_explained_are_refused(
    bundle: ModelBundle, change: tuple[int, float], words: list[str]
) -> None:
    rows = split().rows[:2].clone()
    rows[1, change[0]] = change[1]
    with pytest.raises(ExplainError) as err:
        explain(bundle, rows, method="inputxgrad")
    text = one_line(err)
    assert "row 2" in text and all(w in text for w in words), text
    with pytest.raises(ExplainError) as err:
        explain(bundle, rows[:, :5], method="inputxgrad")
    assert "9 values" in one_line(err)


def test_edit_row_sets_columns_by_name_within_the_data(bundle: ModelBundle) -> None:
    row = split().rows[0]
    edited = edit_row(bundle.info, row, {"x0": "1.5", "group": "green"})
    assert edited[0] == 1.5 and edited[8] == 1 and torch.equal(edited[1:8], row[1:8]) and row[0] != 1.5
    for changes, words in [
        ({"x9": 1}, ["no column 'x9'"]),
        ({"x6": 1e6}, ["'x6'", "outside the training data's range"]),
        ({"group": "black"}, ["'group'", "not one of its categories"]),
    ]:
        with pytest.raises(ExplainError) as err:
            edit_row(bundle.info, row, changes)
        assert all(w in one_line(err) for w in words)


def test_maps_are_per_column_and_labelled_with_the_row_s_values(bundle: ModelBundle) -> None:
    rows = split().rows[:3]
    e = explain(bundle, rows, method="inputxgrad")
    x = bundle.prepare(rows).requires_grad_()
    logits = bundle.model(x)
    grad = torch.autograd.grad(logits.gather(1, torch.as_tensor(e.targets).view(-1, 1)).sum(), x)[0]
    np.testing.assert_allclose(
        np.stack([e.item(i) for i in range(3)]), to_columns(grad * x, bundle.info).detach(), rtol=1e-5, atol=1e-6
    )
    columns = bundle.info.columns
    assert e.tokens is not None
    assert e.tokens[0] == [f"{c.name} = {c.value_text(float(v))}" for c, v in zip(columns, rows[0], strict=True)]
    assert e.tokens[0][-1] in {"group = red", "group = green", "group = blue"}


def test_the_bar_chart_draws_every_column_with_its_colour_bar(bundle: ModelBundle) -> None:
    rows = split().rows[:1]
    e = explain(bundle, rows, method="ig")
    fig = explanation_figures({"ig": e}, 0, classes=bundle.info.classes)["ig"]
    assert fig.map_png and fig.figure_png and fig.words == tuple(e.tokens[0])
    chart = Image.open(io.BytesIO(fig.map_png))
    figure = Image.open(io.BytesIO(fig.figure_png))
    assert figure.height > chart.height + 30 and chart.width >= 600  # the colour bar and its label below the bars
    assert fig.legend.units == "logit contribution per column"
    Path("/tmp/local-bars.png").write_bytes(fig.figure_png)
    d = fig.to_json()
    assert d["columns"] == [c.name for c in bundle.info.columns]
    assert d["row_values"][-1] in bundle.info.columns[-1].categories
    np.testing.assert_allclose(ADAPTER.values_from_json(d), e.item(0), rtol=1e-6)


def test_deletion_moves_columns_to_the_mean_row_strongest_first(bundle: ModelBundle) -> None:
    rows = split().rows[:20]
    e = explain(bundle, rows, method="occlusion", baseline="mean")
    deletion = ADAPTER.perturbation_curve(bundle, rows, e, mode="deletion", steps=9)
    insertion = ADAPTER.perturbation_curve(bundle, rows, e, mode="insertion", steps=9)
    t = torch.as_tensor(e.targets)
    mean_row = bundle.predict_proba(reference_rows("mean", bundle.info, None))[0, t].numpy()
    np.testing.assert_allclose(deletion.curves[:, -1], mean_row, rtol=1e-5)  # every column hidden
    np.testing.assert_allclose(insertion.curves[:, 0], mean_row, rtol=1e-5)
    np.testing.assert_allclose(
        deletion.curves[:, 0], bundle.predict_proba(rows)[torch.arange(20), t].numpy(), rtol=1e-5
    )
    # the least relevant columns first: a worse (higher) deletion area than the map's own order
    weakest_first = [1.0 / (np.abs(e.item(i)) + 1e-6) for i in range(20)]
    worse = ADAPTER.perturbation_curve(bundle, rows, weakest_first, mode="deletion", steps=9)
    assert deletion.mean_auc() < worse.mean_auc()


@pytest.mark.parametrize("page", ["explain", "compare"])
def test_every_listed_metric_scores_a_table_map(bundle: ModelBundle, page: str) -> None:
    rows = split().rows[:4]
    e = explain(bundle, rows, method="ig")
    values, errors = input_metrics(bundle, rows, e, page=page)
    assert not errors
    assert {"deletion_auc", "insertion_auc", "truth_recall", "sparseness", "complexity"} <= set(values)
    assert all(len(v) == 4 and np.isfinite(v).all() for v in values.values())
    assert all(0.0 <= v <= 1.0 for v in values["truth_recall"])


def test_a_row_s_report_is_written_and_read_back(bundle: ModelBundle, tmp_path: Path) -> None:
    from xaidash.explainers.figures.report import ExplainReport, MethodSetting, ReportSettings, session_report
    from xaidash.explainers.session import explain_session

    row = split().rows[3]
    results = explain_session(bundle, row.unsqueeze(0), {"ig": {}, "occlusion": {}})
    probs = bundle.predict_proba(row.unsqueeze(0)).numpy()
    settings = ReportSettings([MethodSetting(r.method, r.method) for r in results], display="bars")
    assert all(r.error is None for r in results)
    report = session_report(bundle, "planted-run", [("row 3", row, 1)], probs, results, settings)
    report.write_dir(tmp_path / "report")
    back = ExplainReport.read_dir(tmp_path / "report")
    inp = back.inputs[0]
    assert inp.values == pytest.approx(row.tolist()) and inp.image is None
    assert inp.text is not None and inp.text.startswith("x0 ") and "group " in inp.text
    assert torch.equal(torch.as_tensor(inp.raw()), row)
    figure = back.explanations[0].figure
    assert figure is not None and figure.figure_png == report.explanations[0].figure.figure_png
    assert "row-values" in back.to_html() and "<td>x0</td>" in back.to_html()
