"""One map, three ways, one presentation: the same explanation (model, input, method, parameters) through the
Explain page's builder, through `xaidash explain` and through the stored view of an attribution store gives the
same `MapFigure` JSON (its caption's provenance aside: time, cache, store) and the same PNG bytes. And the CLI's
`--report` page: written beside the folder, or one clear line when its path cannot be written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from inspect_runs import make_run

from xaidash.data.registry import load_split
from xaidash.explainers.cli import main
from xaidash.explainers.dataset.report import stored_figures
from xaidash.explainers.dataset.store import open_store
from xaidash.explainers.figures.report import MethodResult, MethodSetting, ReportSettings, session_report
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.scoring import explain_and_score
from xaidash.models.runs.store import Run, load_bundle

INDEX = 2


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("equivalence_runs")


@pytest.fixture(autouse=True)
def _runs_here(_isolated_roots: None, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(root))


@pytest.fixture(scope="module")
def run(root: Path) -> Run:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_OFFLINE", "1")
        return make_run(root, "shapes", "resnet_small", epochs=1)


def _drawing(figure: dict) -> dict:
    """A figure's JSON less where it came from (the caption's time, cache and store marks)."""
    return {k: v for k, v in figure.items() if k != "caption"} | {"target": figure["target"]}


@pytest.mark.parametrize("method", ["saliency", "gradcam"])
def test_page_cli_and_store_draw_the_same_map(run: Run, method: str, tmp_path: Path) -> None:
    bundle = load_bundle(run, device="cpu")
    x = load_split("shapes", "test").image(INDEX).float()  # what the page's gallery and the stored view load

    # The Explain page: `compute` (explain_and_score) and `build` (session_report) with its default settings.
    scored = explain_and_score(bundle, x[None], method, {}, None, with_metrics=False, steps=CURVE_STEPS)
    page = session_report(
        bundle,
        run.id,
        [(f"test #{INDEX}", x, None)],
        bundle.predict_proba(x[None]).numpy(),
        [MethodResult(method, scored.explanation)],
        ReportSettings([MethodSetting(method, method)], scale_mode="percentile", display="overlay"),
    ).figure(0, method)
    assert page is not None and page.figure_png is not None

    # `xaidash explain` on the same sample, in this process.
    out = tmp_path / "cli"
    common = ["--run", run.id, "--methods", method, "--device", "cpu"]
    assert main(["explain", "--input", f"dataset:{INDEX}", "--out", str(out), *common]) == 0
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["explanations"]
    assert _drawing(entry["figure"]) == _drawing(page.to_json())
    assert (out / entry["files"]["map"]).read_bytes() == page.figure_png
    np.testing.assert_array_equal(np.load(out / entry["files"]["attribution"]), page.values)

    # The stored view: the same sample written by `xaidash explain --input dataset:START:STOP`, read back.
    assert main(["explain", "--input", f"dataset:{INDEX}:{INDEX + 1}", "--fresh", "--quiet", *common]) == 0
    store = open_store(run.path, "test")
    assert store is not None
    row = store.samples().set_index("index").loc[INDEX]
    stored = stored_figures(
        store, INDEX, [method], classes=bundle.info.classes, target=int(row["pred"]), image=x, display="overlay"
    )[method]
    assert _drawing(stored.to_json()) == _drawing(page.to_json())
    assert stored.figure_png == page.figure_png and stored.map_png == page.map_png
    assert stored.caption.stored and "stored" in stored.caption.text() and not page.caption.stored


def test_cli_writes_the_html_report_or_says_why_not(run: Run, tmp_path: Path, capsys) -> None:
    args = ["explain", "--run", run.id, "--input", "dataset:1", "--methods", "saliency", "--device", "cpu"]
    html = tmp_path / "pages" / "report.html"
    assert main([*args, "--out", str(tmp_path / "a"), "--report", str(html)]) == 0
    page = html.read_text()
    assert page.startswith("<!doctype html>") and "data:image/png;base64," in page
    assert "HTML report" in capsys.readouterr().out

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    out = tmp_path / "b"
    code = main([*args, "--out", str(out), "--report", str(blocker / "report.html")])
    err = capsys.readouterr().err
    assert code != 0
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "cannot write the HTML report" in lines[0] and str(blocker) in lines[0]
    assert "Traceback" not in err
    assert (out / "report.json").is_file() and (out / "maps" / "input_00_saliency.png").is_file()  # the rest is written
