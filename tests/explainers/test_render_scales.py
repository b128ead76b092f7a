"""The one way a colour-encoded picture is drawn (issue 21): `ColourScale`, `scaled_map`, `with_colour_bar`,
`scaled_tokens_html`, and the pictures built on them (attention patch maps, the sanity check's maps)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from xaidash.explainers.comparison.compare import METRIC_RANGES, metric_range, sanity_figure, sanity_tokens_html
from xaidash.explainers.figures import render
from xaidash.explainers.figures.html_parts import scaled_tokens_html
from xaidash.explainers.figures.png import INPUT_TAG, input_image
from xaidash.explainers.figures.render import SCALE_TAG
from xaidash.explainers.figures.scales import ColourScale
from xaidash.explainers.inspection.attention_view import AttentionView
from xaidash.explainers.scoring import METRICS


def test_scales_span_the_values():
    v = np.array([[0.2, 0.5], [0.3, 0.9]])
    assert ColourScale.of(v, "w") == ColourScale(0.0, 0.9, "w")
    assert ColourScale.of(v, "w", stretch=True) == ColourScale(0.2, 0.9, "w")
    assert ColourScale.of(-v, "w", signed=True) == ColourScale(-0.9, 0.9, "w", signed=True)
    stretched = ColourScale(0.2, 0.9, "w")
    np.testing.assert_allclose(stretched.positions([0.2, 0.55, 0.9, 5.0, np.nan]), [0, 0.5, 1, 1, 0])
    signed = ColourScale(-2.0, 2.0, "w", signed=True)
    np.testing.assert_allclose(signed.positions([-2, 0, 1, 9]), [0, 0.5, 0.75, 1])
    # an empty range draws one colour, never divides by zero
    assert ColourScale.of(np.full((2, 2), 0.3), "w", stretch=True).positions([0.3]).tolist() == [0.0]
    assert [t for _, t in ColourScale(-1.5, 1.5, "w", signed=True, clipped=True).ticks()] == ["≤ −1.5", "0", "≥ 1.5"]


def test_a_scaled_map_always_carries_its_bar():
    values = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    scale = ColourScale(0.0, 1.0, "share of something", cmap="viridis")
    alone = render.heatmap(values, signed=False, upscale=None)
    fig = render.scaled_map(values, scale, upscale=None, bar_width=200)
    assert fig.info[SCALE_TAG] == "share of something"
    assert fig.width == 200 and fig.height > alone.height + 30  # the bar and its label below
    bar = np.asarray(fig.convert("RGB"))[alone.height + 6 + 8]  # a row through the ramp
    viridis = scale.colours(np.array([0.0, 1.0])) * 255
    np.testing.assert_allclose(bar[1], viridis[0], atol=4)
    np.testing.assert_allclose(bar[-2], viridis[1], atol=4)
    # a picture the page coloured itself gets the bar the same way
    assert SCALE_TAG in render.with_colour_bar(Image.new("RGB", (50, 50)), scale).info


def test_a_map_over_an_image_lies_on_its_grey_copy():
    red = np.zeros((3, 8, 8), np.float32)
    red[0] = 1.0
    values = np.zeros((2, 2), np.float32)
    values[0, 0] = 1.0  # a patch grid: resized to the image in blocks
    fig = render.scaled_map(values, ColourScale(0.0, 1.0, "w"), image=red, upscale=None, alpha=1.0)
    x0 = (fig.width - 8) // 2
    drawn = np.asarray(fig.convert("RGB"))[:8, x0 : x0 + 8].astype(int)
    grey = round(0.299 * 255)
    assert (drawn[4:, :] == grey).all() and (drawn[:4, 4:] == grey).all()  # the lowest value: the input, in grey
    assert not (drawn[:4, :4] == grey).all()  # the top-left block: coloured


def test_attention_patch_maps_are_drawn_over_grey_with_their_weights():
    row = np.array([0.0, 0.7, 0.1, 0.1, 0.1], np.float32)  # the class token, then a 2x2 patch grid
    weights = np.tile(row, (1, 1, 5, 1))
    view = AttentionView(weights, ["[CLS]", *(f"p{i}" for i in range(4))], (2, 2), 0)
    image = np.zeros((3, 8, 8), np.float32)
    image[1] = 1.0  # green: a map over the colour image would not be grey
    fig = view.patch_figure(view.patch_map(view.matrix(0)), "class-token attention weight", image=image, upscale=None)
    assert fig.info[SCALE_TAG].startswith("class-token attention weight")
    x0 = (fig.width - 8) // 2
    drawn = np.asarray(fig.convert("RGB"))[:8, x0 : x0 + 8].astype(int)
    assert (drawn[4:, :] == round(0.587 * 255)).all()  # the map's minimum (0.1): transparent over the grey input
    html = view.tokens_html(row, "attention weight")
    assert html.index("xai-tokens") < html.index("xai-cbar") and "attention weight" in html


def test_highlighted_words_come_with_their_scale():
    html = scaled_tokens_html(["a", "<b>"], [0.2, 0.6], ColourScale(0.2, 0.6, "mean weight"))
    assert "&lt;b&gt;" in html and "<b>" not in html.replace("<b>mean", "")
    assert "xai-cbar" in html and "<span>0.2</span>" in html and "<span>0.6</span>" in html
    with pytest.raises(Exception, match="2 words but 1 scores"):
        scaled_tokens_html(["a", "b"], [1.0], ColourScale(0, 1, "w"))


def test_inputs_are_marked_as_inputs():
    img = input_image(np.zeros((3, 4, 4), np.float32))
    assert img.info[INPUT_TAG] and img.resize((8, 8)).info[INPUT_TAG]


def test_sanity_maps_show_the_input_and_their_bar():
    rng = np.random.default_rng(0)
    image = rng.random((3, 16, 16)).astype(np.float32)
    values = rng.normal(size=(16, 16)).astype(np.float32)
    fig = sanity_figure(values, image=image)
    assert "|attribution|" in fig.info[SCALE_TAG] and fig.height > 160 + 30
    html = sanity_tokens_html(values[0, :3], ["x", "y", "z"])
    assert "xai-tokens" in html and "xai-cbar" in html


def test_every_metric_declares_its_range():
    assert set(METRIC_RANGES) == set(METRICS)
    for name in METRICS:
        low, high = metric_range(name)
        assert low is None or high is None or low < high
    assert metric_range("not a metric") == (None, None)
