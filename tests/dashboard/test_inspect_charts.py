"""Drawings of the inspection pages: filter grids, colour bars, the attention grid's scales."""

from __future__ import annotations

import numpy as np

from xaidash.dashboard.components.inspect_charts import (
    attention_grid_chart,
    attention_grid_image,
    filter_grid,
    filter_scale_bar,
    grid_tile_size,
    scale_bar,
)


def test_rgb_filters_are_enlarged_colour_tiles_on_one_scale():
    w = np.zeros((2, 3, 3, 3), dtype=np.float32)
    w[0, 0] = 0.5  # filter 0: a positive red channel
    w[1, 2, 1, 1] = -0.25  # filter 1: one negative blue weight in the middle
    img, scale, rgb = filter_grid(w, cols=2, cell=60, gap=6)
    assert rgb and scale == 0.5
    px = np.asarray(img)
    # filter 0 fills its tile with (1.0, 0.5, 0.5) = (255, 128, 128), blocky (nearest neighbour): every pixel equal
    tile0 = px[6 + 16 : 6 + 16 + 60, 6 : 6 + 60]
    assert (tile0 == [255, 128, 128]).all()
    # filter 1: mid-grey with a darker-blue centre square of 20x20 px (one weight), not a blur
    tile1 = px[6 + 16 : 6 + 16 + 60, 6 + 66 : 6 + 66 + 60]
    assert (tile1[0, 0] == [128, 128, 128]).all() and (tile1[30, 30] == [128, 128, 64]).all()
    assert (tile1[20:40, 20:40] == [128, 128, 64]).all()


def test_grey_filters_sum_the_channels_and_bars_are_readable():
    w = np.ones((4, 2, 5, 5), dtype=np.float32)
    img, scale, rgb = filter_grid(w)
    assert not rgb and scale == 2.0 and img.width >= 4 * 56
    bar = filter_scale_bar(scale, rgb)
    assert bar.width == 320 and bar.height > 40
    assert scale_bar(0, 1, "attention weight").width == 320


def test_attention_grid_states_its_scale():
    tiles = np.random.default_rng(0).random((2, 3, 4, 4)).astype(np.float32)
    per_tile = attention_grid_chart(tiles, "key", "query").to_dict()
    shared = attention_grid_chart(tiles, "key", "query", scale="shared").to_dict()
    assert "tile's maximum" in str(per_tile) and "one scale" in str(shared)
    assert per_tile["spec"]["width"] == grid_tile_size(3, 4) >= 96  # three heads: large tiles
    assert grid_tile_size(12, 20) >= 56
    same = attention_grid_image(tiles, shared=True)
    own = attention_grid_image(tiles)
    assert same.size == own.size and np.asarray(same).tolist() != np.asarray(own).tolist()
