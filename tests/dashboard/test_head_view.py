"""The bertviz-style head view and model view: distinct head colours, escaped token texts, sparse links."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from skimage.color import rgb2lab

from xaidash.dashboard.components.head_view import (
    HEAD_PALETTE,
    MAX_CELLS,
    attention_views_html,
    head_colour,
    sparse_layers,
)


def _lab(hex_colour: str) -> np.ndarray:
    rgb = np.array([[[int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]]]) / 255.0
    return rgb2lab(rgb)[0, 0]


def _weights(layers: int, heads: int, t: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((layers, heads, t, t)).astype(np.float32) ** 4
    return w / w.sum(-1, keepdims=True)


def test_every_head_gets_a_distinct_colour():
    colours = [head_colour(h) for h in range(12)]  # MiniLM's 12 heads
    assert len(set(colours)) == 12
    distances = [np.linalg.norm(_lab(a) - _lab(b)) for a, b in itertools.combinations(HEAD_PALETTE, 2)]
    assert min(distances) > 25  # CIELAB: clearly different colours, not shades of one olive
    assert all(30 <= _lab(c)[0] <= 72 for c in HEAD_PALETTE[10:])  # dark enough for thin lines on white


def _data(page: str) -> dict:
    body = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S)
    assert body is not None
    return json.loads(body.group(1))


def test_token_texts_are_escaped():
    tokens = ["[CLS]", "<script>alert(1)</script>", "a&b", '"q"', "</script><img src=x onerror=alert(2)>"]
    page, height = attention_views_html(_weights(2, 3, len(tokens)), tokens, layer=1)
    assert "<script>alert" not in page and "<img" not in page and "alert(1)</script>" not in page
    assert "<" not in re.search(r'type="application/json" id="[^"]+">(.*?)</script>', page, re.S).group(1)
    assert _data(page)["tokens"] == tokens  # the page gets the exact texts back as data
    assert "innerHTML" not in page  # they are only ever set as text
    assert height > 5 * 24


def test_page_data_layers_heads_and_sparse_links():
    w = _weights(3, 4, 6)
    page, _ = attention_views_html(w, [f"t{i}" for i in range(6)], layer=2, heads=[1, 3])
    d = _data(page)
    assert d["layer"] == 2 and d["heads"] == 4 and d["shown"] == [1, 3] and d["modelView"]
    assert d["colours"] == [head_colour(h) for h in range(4)]
    links = d["links"][2][1]
    triples = np.array(links).reshape(-1, 3)
    for i, j, thousandths in triples:
        assert abs(w[2, 1, i, j] * 1000 - thousandths) <= 0.5 and w[2, 1, i, j] >= 0.01
    kept = (w[2, 1] >= 0.01).sum()
    assert len(triples) == kept


def test_sparse_layers_drops_faint_links():
    w = np.zeros((1, 1, 3, 3), dtype=np.float32)
    w[0, 0] = [[0.995, 0.005, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]
    assert sparse_layers(w) == [[[0, 0, 995, 1, 0, 500, 1, 1, 500, 2, 2, 1000]]]


def test_long_texts_send_one_layer_without_model_view():
    t = int((MAX_CELLS / 12) ** 0.5) + 2
    w = np.full((6, 2, t, t), 1.0 / t, dtype=np.float32)
    page, _ = attention_views_html(w, ["w"] * t, layer=4)
    d = _data(page)
    assert d["layers"] == [4] and d["layer"] == 0 and not d["modelView"]


def test_shape_is_checked():
    with pytest.raises(ValueError, match="T = 3 tokens"):
        attention_views_html(np.zeros((1, 1, 4, 4)), ["a", "b", "c"])
