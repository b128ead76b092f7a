"""Rendering: image sizes and modes, colour conventions, shared scales, HTML escaping."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from xaidash.explainers import ExplainError
from xaidash.explainers.figures.html_parts import highlight_tokens
from xaidash.explainers.figures.render import colorbar, heatmap, image_hwc, overlay
from xaidash.explainers.figures.scales import colorize, shared_scale


def _signed_map() -> np.ndarray:
    a = np.zeros((28, 28), dtype=np.float32)
    a[2, 3] = 2.0  # strongest positive
    a[20, 10] = -2.0  # strongest negative
    return a


def _px(img: Image.Image, row: int, col: int, factor: int) -> np.ndarray:
    return np.asarray(img)[row * factor + factor // 2, col * factor + factor // 2].astype(int)


def test_overlay_is_rgb_and_upscaled_by_nearest_neighbour() -> None:
    img = overlay(torch.rand(1, 28, 28), _signed_map())
    assert isinstance(img, Image.Image) and img.mode == "RGB"
    assert img.size == (28 * 8, 28 * 8)  # the smallest whole factor reaching 224 px
    arr = np.asarray(img)
    assert arr.dtype == np.uint8
    block = arr[2 * 8 : 3 * 8, 3 * 8 : 4 * 8]
    assert (block == block[0, 0]).all(), "nearest-neighbour keeps each source pixel one flat block"
    assert overlay(np.random.rand(64, 48, 3), np.zeros((64, 48)), upscale=None).size == (48, 64)
    assert overlay(np.random.rand(3, 300, 300), np.zeros((300, 300))).size == (300, 300)


def test_overlay_accepts_channels_first_last_and_grey() -> None:
    rgb = np.random.rand(16, 16, 3)
    a = np.random.randn(16, 16)
    first = np.asarray(overlay(rgb.transpose(2, 0, 1), a, upscale=None))
    last = np.asarray(overlay(rgb, a, upscale=None))
    assert np.array_equal(first, last)
    grey = image_hwc(np.random.rand(16, 16))
    assert grey.shape == (16, 16, 3) and np.allclose(grey[..., 0], grey[..., 2])
    with pytest.raises(ExplainError, match="image"):
        overlay(np.random.rand(2, 16, 16, 3), a)


def test_positive_and_negative_extremes_get_different_colours() -> None:
    a = _signed_map()
    hm = heatmap(a, signed=True)
    pos, neg, zero = _px(hm, 2, 3, 8), _px(hm, 20, 10, 8), _px(hm, 0, 0, 8)
    assert pos[0] > pos[2] + 50, "positive is red"
    assert neg[2] > neg[0] + 50, "negative is blue"
    assert zero.min() > 200, "zero is (near) white"
    ov = overlay(np.full((1, 28, 28), 0.5), a)
    assert not np.array_equal(_px(ov, 2, 3, 8), _px(ov, 20, 10, 8))
    grey = np.array([128, 128, 128])
    assert np.abs(_px(ov, 0, 0, 8) - grey).max() <= 1, "with by_magnitude a zero attribution leaves the image as it is"


def test_unsigned_maps_use_a_sequential_map_of_magnitude() -> None:
    a = np.array([[0.0, 1.0], [-1.0, 0.5]])
    rgb = colorize(a, signed=False)
    assert np.allclose(rgb[0, 1], rgb[1, 0]), "magnitude only"
    assert rgb[0, 0].sum() < rgb[1, 1].sum() < rgb[0, 1].sum(), "brighter with magnitude (inferno)"


def test_shared_scale_is_honoured() -> None:
    weak, strong = np.array([[1.0, -1.0]]), np.array([[2.0, -2.0]])
    scale = shared_scale([weak, strong])
    assert scale == 2.0
    own = colorize(weak, signed=True)
    shared = colorize(weak, signed=True, scale=scale)
    assert not np.allclose(own, shared), "on the shared scale the weak map is paler"
    assert np.allclose(colorize(strong, signed=True, scale=scale)[0, 0], own[0, 0])
    assert np.allclose(colorize(weak, signed=True, scale=4.0)[0, 0], colorize(strong, signed=True, scale=8.0)[0, 0])
    img_a = np.asarray(heatmap(weak, scale=scale, upscale=None))
    img_b = np.asarray(heatmap(weak, upscale=None))
    assert not np.array_equal(img_a, img_b)


def test_all_zero_map_and_bad_arguments() -> None:
    rgb = colorize(np.zeros((3, 3)), signed=True)
    assert np.isfinite(rgb).all() and np.allclose(rgb, rgb[0, 0])
    with pytest.raises(ExplainError, match="colour map"):
        heatmap(np.zeros((3, 3)), cmap="no_such_map")
    with pytest.raises(ExplainError, match="alpha"):
        overlay(np.zeros((3, 3)), np.zeros((3, 3)), alpha=1.5)
    with pytest.raises(ExplainError, match="scale"):
        heatmap(np.ones((3, 3)), scale=-1.0)


def test_colorbar_legend() -> None:
    bar = colorbar(signed=True, scale=0.5, width=200, height=30)
    assert bar.mode == "RGB" and bar.size[0] == 200 and bar.size[1] >= 30
    arr = np.asarray(bar).astype(int)
    left, right = arr[2, 1], arr[2, -2]
    assert left[2] > left[0] and right[0] > right[2]
    labelled = colorbar(signed=False, scale=3.0, label="|attribution|")
    assert labelled.size[1] > colorbar(signed=False, scale=3.0).size[1]


def test_highlight_tokens_escapes_html_and_shows_values() -> None:
    words = ["<script>alert('x')</script>", "good", "&"]
    html = highlight_tokens(words, [0.25, -1.0, 0.0])
    assert "<script>" not in html
    assert "&lt;script&gt;" in html and "&amp;" in html
    assert html.count("<span") == 3
    assert 'title="0.25"' in html and 'title="-1"' in html
    spans = html.split("<span")[1:]
    colour = [s.split("background-color:")[1][:7] for s in spans]
    assert colour[0] != colour[1] and len(set(colour)) == 3
    with pytest.raises(ExplainError, match="2 words but 3 scores"):
        highlight_tokens(["a", "b"], [1.0, 2.0, 3.0])


def test_highlight_tokens_shared_scale() -> None:
    alone = highlight_tokens(["a"], [1.0])
    shared = highlight_tokens(["a"], [1.0], scale=10.0)
    assert alone != shared


# ---- honest scales: units, groups, percentile scales, legends -------------------------------------
def _spec(method_id: str, modality: str = "image"):
    from xaidash.explainers import get_method

    return get_method(method_id, modality)


def test_map_legend_groups_only_maps_in_the_same_units() -> None:
    from xaidash.explainers.figures.legend import map_legend

    legend = {
        m: map_legend(_spec(m))
        for m in ("ig", "deeplift", "shap_gradient", "shap_kernel", "occlusion", "saliency", "gradcam", "lime")
    }
    assert legend["ig"].group == legend["deeplift"].group == legend["shap_gradient"].group
    assert legend["ig"].units == "logit contribution per pixel"
    others = ["shap_kernel", "occlusion", "saliency", "gradcam", "lime"]
    assert len({legend[m].group for m in others} | {legend["ig"].group}) == len(others) + 1, "each in units of its own"
    assert "superpixel" in legend["shap_kernel"].units and "probability" in legend["lime"].units
    for m, lg in legend.items():
        assert lg.signed == _spec(m).signed
        if lg.signed:
            assert "red" in lg.meaning and "blue" in lg.meaning, m
        else:
            assert "bright" in lg.meaning and "red" not in lg.meaning, m
    text_ig = map_legend(_spec("ig", "text"), "text")
    assert text_ig.units == "logit contribution per word" and text_ig.group != legend["ig"].group


def test_map_scales_share_within_a_group_and_resist_outliers() -> None:
    from xaidash.explainers.figures.scales import map_scales, robust_scale

    rng = np.random.default_rng(0)
    ig = rng.normal(0, 0.01, (32, 32))
    ig[0, 0] = 5.0  # one extreme pixel
    deeplift = rng.normal(0, 0.02, (32, 32))
    occlusion = rng.normal(0, 0.8, (32, 32))
    maps = {"ig": ig, "deeplift": deeplift, "occlusion": occlusion}
    groups = {"ig": "logit|pixel|sum", "deeplift": "logit|pixel|sum", "occlusion": "occlusion"}
    own = map_scales(maps, groups, "percentile")
    assert own["ig"] == pytest.approx(robust_scale(ig)) and own["ig"] < 0.1, "the outlier does not set the scale"
    assert map_scales(maps, groups, "max")["ig"] == pytest.approx(5.0)
    shared = map_scales(maps, groups, "units")
    assert shared["ig"] == shared["deeplift"] == pytest.approx(max(own["ig"], own["deeplift"]))
    assert shared["occlusion"] == pytest.approx(own["occlusion"]), "occlusion's logits never set IG's scale"
    assert map_scales({"zero": np.zeros((3, 3))})["zero"] == 1.0
    sparse = np.zeros((10, 10))
    sparse[0, 0] = 2.0
    assert robust_scale(sparse) == 2.0, "a map with 99% zeros falls back to its max"
    with pytest.raises(ExplainError, match="scale mode"):
        map_scales(maps, groups, "bogus")  # type: ignore[arg-type]


def test_colorbar_html_shows_range_units_and_meaning() -> None:
    from xaidash.explainers.figures.html_parts import colorbar_html

    html = colorbar_html(
        True,
        0.25,
        "logit contribution per pixel",
        "red = for, blue = against",
        value_range=(-0.1, 0.4),
        clipped=True,
        note="shared scale: IG, DeepLift",
    )
    assert "≥ 0.25" in html and "≤ −0.25" in html and ">0<" in html
    assert "logit contribution per pixel" in html and "red = for" in html and "shared scale" in html
    assert "−0.1 … 0.4" in html
    unsigned = colorbar_html(False, 3.0, "|∂ logit / ∂ pixel|", "<b>bright</b>")
    assert ">0<" in unsigned and ">3<" in unsigned and "≤" not in unsigned
    assert "&lt;b&gt;bright" in unsigned, "text is escaped"
    # An unsigned ramp runs dark to bright (inferno), never through red-white-blue.
    ramp = unsigned.split("linear-gradient(to right, ")[1].split(")")[0].split(", ")
    first, last = (np.array([int(c[i : i + 2], 16) for i in (1, 3, 5)]) for c in (ramp[0], ramp[-1]))
    assert first.sum() < 60 and last.sum() > 450


def test_colorbar_with_a_readable_font_and_a_legend_below_the_map() -> None:
    from xaidash.explainers.figures.render import with_legend

    small = colorbar(signed=True, scale=0.5, width=300, height=30, label="logit")
    big = colorbar(signed=True, scale=0.5, width=300, height=30, label="logit", font_size=16, clipped=True)
    assert big.size[0] == 300 and big.size[1] > small.size[1], "a larger font makes taller lines"
    img = heatmap(_signed_map())
    both = with_legend(img, big)
    assert both.size == (300, img.height + 6 + big.height)
    assert np.array_equal(np.asarray(both)[: img.height, (300 - img.width) // 2 :][:, : img.width], np.asarray(img))


def test_small_maps_are_drawn_large_without_blur() -> None:
    from xaidash.explainers.figures.render import LARGE_UPSCALE

    a = np.random.default_rng(1).normal(size=(32, 32))
    small, large = heatmap(a), heatmap(a, upscale=LARGE_UPSCALE)
    assert min(small.size) >= 200 and large.size == (512, 512)
    arr = np.asarray(large)
    assert len({tuple(px) for px in arr[:16, :16].reshape(-1, 3)}) == 1, "each source pixel one flat block"
