"""The one presentation of a map (explainers/figures/map_figure.py): the clipping rule, the value range, the
caption, shared-scale notes, reproducible PNG bytes and escaped words."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from xaidash.explainers import get_method
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.map_figure import Caption, MapFigure, explanation_figures, map_figure
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.figures.scales import finite_range, is_clipped

CLASSES = ("circle", "square", "<b>tri</b>")


def test_is_clipped_counts_finite_values_beyond_a_positive_scale() -> None:
    assert is_clipped([0.1, -0.5, 2.0], 1.0)
    assert is_clipped([-1.5], 1.0)  # negative values clip too
    assert not is_clipped([0.1, 1.0, -1.0], 1.0)  # at the scale is not beyond it
    assert not is_clipped([0.1, np.nan, np.inf, -np.inf], 1.0)  # NaN and inf are ignored
    assert is_clipped([np.nan, 3.0], 1.0)
    assert not is_clipped([5.0, -5.0], 0.0) and not is_clipped([5.0], -1.0)  # scale 0 (all-zero map) never clips
    assert not is_clipped([5.0], float("nan")) and not is_clipped([], 1.0)
    assert not is_clipped([np.nan, np.nan], 1.0)


def test_finite_range_ignores_nan_and_inf() -> None:
    assert finite_range([np.nan, -2.0, np.inf, 3.0]) == (-2.0, 3.0)
    assert finite_range([np.nan, np.inf]) is None and finite_range([]) is None


def _explanation(method: str, maps: np.ndarray, seconds: float = 0.5) -> Explanation:
    return Explanation(method, {}, np.array([1] * len(maps)), maps.astype(np.float32), seconds, "cpu", "image")


def test_a_figure_holds_scale_clipping_range_caption_and_pngs() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(8, 8)).astype(np.float32)
    a[0, 0], a[0, 1] = np.nan, np.inf
    image = rng.random((3, 8, 8))
    fig = map_figure(
        get_method("ig", "image"),
        a,
        target=1,
        classes=CLASSES,
        scale=0.5,
        image=image,
        caption=Caption("square", 0.004),
    )
    finite = a[np.isfinite(a)]
    assert fig.clipped and fig.value_range == (float(finite.min()), float(finite.max()))
    assert fig.legend.signed and fig.legend.units == "logit contribution per pixel" and fig.cmap == "RdBu_r"
    assert fig.caption.text() == "target square · <0.01 s" and fig.target_name == "square"
    assert fig.map_png is not None and fig.figure_png is not None and fig.tokens_html is None
    drawn, with_bar = Image.open(io.BytesIO(fig.map_png)), Image.open(io.BytesIO(fig.figure_png))
    assert drawn.size == (224, 224) == (fig.map_width, 224)  # an 8x8 map enlarged to >= 224 px
    assert with_bar.width >= 320 and with_bar.height > drawn.height  # the colour bar below it
    again = map_figure(
        get_method("ig", "image"),
        a,
        target=1,
        classes=CLASSES,
        scale=0.5,
        image=image,
        caption=Caption("square", 0.004),
    )
    assert again.figure_png == fig.figure_png and again.map_png == fig.map_png  # the same bytes every time
    assert png_bytes(drawn) == png_bytes(drawn.copy())
    assert fig.render(512).width >= 512  # the enlarged view
    assert "≥ 0.5" in fig.colorbar_html() and "this map:" in fig.colorbar_html()

    zero = map_figure(get_method("saliency", "image"), np.zeros((8, 8)), target=0, classes=CLASSES, scale=0.0)
    assert zero.scale == 1.0 and not zero.clipped and zero.display == "overlay"  # no input: drawn as a heatmap


def test_explanation_figures_share_scales_only_in_the_same_units() -> None:
    rng = np.random.default_rng(1)
    ig = _explanation("ig", rng.normal(size=(2, 8, 8)))
    deeplift = _explanation("deeplift", 10 * rng.normal(size=(2, 8, 8)))
    occlusion = _explanation("occlusion", rng.normal(size=(2, 8, 8)))
    explanations = {"ig": ig, "deeplift": deeplift, "occlusion": occlusion}
    own = explanation_figures(explanations, 1, classes=CLASSES, scale_mode="percentile")
    assert own["ig"].scale != own["deeplift"].scale and not own["ig"].caption.note
    units = explanation_figures(explanations, 1, classes=CLASSES, scale_mode="units", cached={"ig": True})
    assert units["ig"].scale == units["deeplift"].scale == own["deeplift"].scale
    assert (
        units["ig"].caption.note == "shared scale: Integrated Gradients, DeepLift"
        and not units["occlusion"].caption.note
    )
    assert units["ig"].caption.text() == "target square · 0.50 s for 2 inputs · cached"
    assert list(units) == ["ig", "deeplift", "occlusion"]
    with pytest.raises(Exception, match="display"):
        explanation_figures(explanations, 0, classes=CLASSES, display="sideways")


def test_text_figures_escape_words_and_round_trip() -> None:
    words = ["<script>alert(1)</script>", "fine", "&"]
    e = Explanation(
        "saliency", {}, np.array([2]), [np.array([0.5, np.nan, -0.25], np.float32)], 0.1, "cpu", "text", tokens=[words]
    )
    fig = explanation_figures({"saliency": e}, 0, classes=CLASSES)["saliency"]
    assert fig.modality == "text" and fig.display == "tokens" and fig.map_png is None
    assert "<script>" not in (fig.tokens_html or "") and "&lt;script&gt;" in (fig.tokens_html or "")
    assert fig.target_name == "<b>tri</b>" and "<b>tri" not in fig.colorbar_html()
    d = fig.to_json()
    assert d["words"] == words and d["scores"] == [0.5, None, -0.25]
    back = MapFigure.from_json(d)
    assert back.to_json() == d and back.tokens_html == fig.tokens_html
