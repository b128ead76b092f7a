"""Every drawn scale visible (issue 21): every picture or word strip that encodes values by colour is shown with its
colour bar, on every page that draws one.

Two checks:
- by reading the code: a page or widget draws colour-encoded pictures only through the functions that always
  add the bar (`render.scaled_map`, `render.with_colour_bar`, `html_parts.scaled_tokens_html`, the `*_figure` helpers
  of `inspect_charts`, `map_card`), never with the bare drawing functions; and no altair chart turns off the
  legend of a quantitative colour;
- by walking the pages (AppTest, on runs written by `inspect_runs.make_run`): every `st.image` the page draws is
  either marked as carrying its colour bar (`render.SCALE_TAG`) or as a plain input (`png.INPUT_TAG`), or is a map
  card's map (whose colour bar follows it); every strip of highlighted words has its colour bar; every chart that
  colours by a quantity has a legend.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit
from app_pages import open_run_page
from inspect_runs import make_run
from PIL import Image
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

from xaidash.explainers.figures.png import INPUT_TAG
from xaidash.explainers.figures.render import SCALE_TAG
from xaidash.models.runs.store import Run

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "dashboard" / "app.py")
TIMEOUT = 120

# Drawing functions that colour values without drawing the scale: a page never calls them. Only the module that
# wraps its own pictures with their bars (inspect_charts' *_figure helpers) may.
BARE = {
    "heatmap",
    "overlay",
    "colorize",
    "highlight_tokens",
    "colorbar",
    "mosaic",
    "filter_grid",
    "heat_image",
    "attention_grid_image",
}
WRAPS_ITS_OWN = {"dashboard/components/inspect_charts.py"}
# Where the bare functions live: the drawing, the scale policy and the HTML pieces.
FIGURE_MODULES = {f"xaidash.explainers.figures.{m}" for m in ("render", "scales", "html_parts")}
# Callers of st.image whose PNG bytes are a map with its colour bar drawn right after it (HTML legend).
BAR_FOLLOWS = {"xaidash.dashboard.components.explain_maps"}


def dashboard_modules() -> Iterator[Path]:
    yield from sorted((REPO / "dashboard").rglob("*.py"))


def called_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def test_no_page_colours_values_without_its_scale():
    found = []
    for path in dashboard_modules():
        rel = path.relative_to(REPO).as_posix()
        if rel in WRAPS_ITS_OWN:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and called_name(node) in BARE:
                found.append(f"{rel}:{node.lineno} calls {called_name(node)}()")
            if isinstance(node, ast.ImportFrom) and node.module in FIGURE_MODULES:
                found += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names if a.name in BARE]
    assert not found, "colour-encoded drawings without their colour bar:\n" + "\n".join(found)


def test_no_chart_hides_the_legend_of_a_colour_scale():
    """alt.Color("x:Q", legend=None) would draw a quantity in colours nobody can read."""
    found = []
    for path in dashboard_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and called_name(node) == "Color" and node.args):
                continue
            field = node.args[0]
            quantitative = isinstance(field, ast.Constant) and str(field.value).endswith(":Q")
            hidden = any(
                k.arg == "legend" and isinstance(k.value, ast.Constant) and k.value.value is None for k in node.keywords
            )
            if quantitative and hidden:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found


# ---- the pages, walked ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs_by_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("scale_runs")
    return {
        "resnet_small": make_run(root, "shapes", "resnet_small"),
        "vit_tiny": make_run(root, "shapes", "vit_tiny", epochs=1),
        "text_transformer": make_run(root, "cues", "text_transformer"),
    }


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, str]]:
    """Every st.image call of the page: (image, caption, calling module)."""
    calls: list[tuple[Any, str, str]] = []
    original = DeltaGenerator.image

    def image(self, image, caption=None, *args, **kwargs):
        calls.append((image, str(caption), sys._getframe(1).f_globals.get("__name__", "?")))
        return original(self, image, caption, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "image", image)
    monkeypatch.setattr(streamlit, "image", functools.partial(image, streamlit._main))
    return calls


def open_page(run: Run, page: str, monkeypatch: pytest.MonkeyPatch, **state) -> AppTest:
    return open_run_page(run, page, monkeypatch, TIMEOUT, **state)


def unscaled_images(calls: list[tuple[Any, str, str]]) -> list[str]:
    """The pictures drawn without a colour bar that are not plain inputs."""
    bad = []
    for image, caption, caller in calls:
        for im in image if isinstance(image, list) else [image]:
            if isinstance(im, Image.Image) and (SCALE_TAG in im.info or INPUT_TAG in im.info):
                continue
            if not isinstance(im, Image.Image) and caller in BAR_FOLLOWS:
                continue
            bad.append(f"{caller}: {type(im).__name__} captioned {caption!r}")
    return bad


def strips_without_bar(at: AppTest) -> list[str]:
    """Highlighted words (`xai-tokens`) with no colour bar (`xai-cbar`) in the same markdown or the next one."""
    md = [str(m.value) for m in at.markdown]
    return [
        md[i][:120]
        for i, text in enumerate(md)
        if "xai-tokens" in text and "xai-cbar" not in text and not (i + 1 < len(md) and "xai-cbar" in md[i + 1])
    ]


def colour_encodings(spec: Any) -> Iterator[dict]:
    if isinstance(spec, dict):
        enc = spec.get("encoding")
        if isinstance(enc, dict) and isinstance(enc.get("color"), dict):
            yield enc["color"]
        for v in spec.values():
            yield from colour_encodings(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from colour_encodings(v)


def charts_without_legend(at: AppTest) -> list[str]:
    """Charts that colour by a quantity (a 'quantitative' colour field) but hide its legend."""
    bad = []
    for chart in at.main.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        bad += [
            str(spec.get("title", colour.get("field")))
            for colour in colour_encodings(spec)
            if colour.get("type") == "quantitative" and "legend" in colour and colour["legend"] is None
        ]
    return bad


def assert_every_scale_visible(at: AppTest, calls: list[tuple[Any, str, str]], least_images: int) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert len(calls) >= least_images, [c[1] for c in calls]
    assert not unscaled_images(calls)
    assert not strips_without_bar(at)
    assert not charts_without_legend(at)


def scaled(calls: list[tuple[Any, str, str]]) -> list[Image.Image]:
    return [c[0] for c in calls if isinstance(c[0], Image.Image) and SCALE_TAG in c[0].info]


def test_attention_vit_every_map_has_its_bar(runs_by_model, monkeypatch, drawn):
    at = open_page(runs_by_model["vit_tiny"], "attention", monkeypatch)
    # one head over the image and alone, 4 layer means, rollout and the last layer
    assert_every_scale_visible(at, drawn, least_images=8)
    labels = [im.info[SCALE_TAG] for im in scaled(drawn)]
    assert len(labels) == 8 and all("weight" in t for t in labels), labels
    assert sum("stretched from this map's minimum" in t for t in labels) == 4  # the layer means: in their caption


def test_attention_text_every_strip_has_its_bar(runs_by_model, monkeypatch, drawn):
    at = open_page(
        runs_by_model["text_transformer"],
        "attention",
        monkeypatch,
        attention_source="Type text",
        attention_text="a <b>fine</b> film",
    )
    assert_every_scale_visible(at, drawn, least_images=0)
    strips = [str(m.value) for m in at.markdown if "xai-tokens" in str(m.value)]
    assert len(strips) == 1 + 2 + 1  # the chosen head, each of 2 layers, the rollout
    assert all("xai-cbar" in s for s in strips)
    assert all("&lt;b&gt;" in s or "fine" in s for s in strips)


def test_model_and_receptive_fields_draw_every_scale(runs_by_model, monkeypatch, drawn):
    run = runs_by_model["resnet_small"]
    at = open_page(run, "model", monkeypatch)
    assert_every_scale_visible(at, drawn, least_images=3)  # input, feature maps, filters (+ maps across training)
    assert {"share of each map's own range: black = its lowest value, white = its highest"} <= {
        im.info[SCALE_TAG] for im in scaled(drawn)
    }
    drawn.clear()
    at = open_page(run, "receptive_fields", monkeypatch, rf_erf_n=4)
    assert_every_scale_visible(at, drawn, least_images=3)  # the unit's box on an input, two effective fields
    assert len(scaled(drawn)) == 2


def test_compare_sanity_maps_show_the_input_and_their_bars(runs_by_model, monkeypatch, drawn):
    at = open_page(runs_by_model["resnet_small"], "compare", monkeypatch)
    at.multiselect(key="compare_methods").set_value(["saliency", "gradcam"]).run()
    at.number_input(key="compare_n").set_value(2)
    at.slider(key="compare_steps").set_value(4)
    at.number_input(key="compare_sanity_steps").set_value(1)
    next(b for b in at.button if b.label == "Compare").click().run()
    assert_every_scale_visible(at, drawn, least_images=2 * 3)
    sanity = [c for c in drawn if c[2] == "__main__" or "compare" in c[2]]
    inputs = [c for c in sanity if c[1] == "input"]
    assert len(inputs) == 2 and all(INPUT_TAG in im.info for im, _, _ in inputs)  # one per method's row
    assert len(scaled(drawn)) == 2 * 2  # trained + one randomised step, per method


def test_the_agreement_matrix_keeps_whole_labels_within_the_column():
    """Long method labels: the cells shrink so labels, cells and colour bar fit a 1024 px window's column; a label
    is cut only at its end ('…'), and the chart keeps its drawn size (a 'fit' resize cut 'Saliency' to 'iency')."""
    import numpy as np
    import pandas as pd

    from xaidash.dashboard.components.charts import MATRIX_WIDTH, label_width, matrix_heatmap

    labels = ["Grad-CAM", "Saliency", "Integrated Gradients + SmoothGrad (noise tunnel, 25 samples)", *"ABC"]
    chart = matrix_heatmap(pd.DataFrame(np.eye(6), index=labels, columns=labels), "agreement")
    spec = chart.to_dict()
    assert spec["autosize"] == {"type": "pad", "contains": "padding"}
    step = spec["width"]["step"]
    assert label_width(labels) + 6 * step + 90 <= MATRIX_WIDTH
    axes = [layer["encoding"][c]["axis"] for layer in spec["layer"] for c in ("x", "y") if "encoding" in layer]
    assert all(a["labelOverlap"] is False and a["labelLimit"] >= 150 for a in axes)
    legend = spec["layer"][0]["encoding"]["color"]
    assert legend["title"] == "Spearman ρ" and legend.get("legend") is not None


def test_intervals_stay_within_a_bounded_metrics_range():
    import pandas as pd

    from xaidash.dashboard.components.inside_compare import metric_spread_charts
    from xaidash.explainers.comparison.compare import metric_range
    from xaidash.explainers.scoring import METRICS

    row = {"n": 3, "valid": 3, "minimum": 0.0, "maximum": 1.0}
    summary = pd.DataFrame(
        [
            {"method": "a", "metric": "pointing_game", "mean": 0.9, "low": 0.6, "high": 1.2, **row},
            {"method": "a", "metric": "completeness_gap", "mean": 0.1, "low": -0.2, "high": 0.4, **row},
            {"method": "a", "metric": "made_up", "mean": 0.1, "low": -0.2, "high": 0.4, **row},
        ]
    )
    per_input = {"a": {"pointing_game": [1.0, 1.0, 0.7], "completeness_gap": [0.0, 0.1, 0.2], "made_up": [0, 0, 0]}}
    ranges = {c: metric_range(c) for c in ("pointing_game", "completeness_gap", "made_up")}
    pointing, gap, made_up = (c.to_dict() for c in metric_spread_charts(per_input, summary, METRICS, {}, ["a"], ranges))

    def stats(spec):
        data = spec["datasets"]
        return next(rows for rows in data.values() if rows and "low" in rows[0])[0]

    assert (stats(pointing)["low"], stats(pointing)["high"]) == (0.6, 1.0)
    assert "intervals clipped to it" in pointing["title"]["subtitle"][1]
    scales = [layer["encoding"]["x"]["scale"] for layer in pointing["layer"] if "scale" in layer["encoding"]["x"]]
    assert scales and all(s["domain"] == [0.0, 1.0] for s in scales)  # the layers share this x scale
    assert stats(gap)["low"] == 0.0 and "[0, ∞]" in gap["title"]["subtitle"][1]
    assert stats(made_up)["low"] == -0.2 and "no declared range" in made_up["title"]["subtitle"][1]
