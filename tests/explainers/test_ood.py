"""Out-of-distribution hint: a shapes test image is in distribution; noise and a solid colour are flagged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.explainers.inspection import ood
from xaidash.models.inspect.activations import load_samples, raw_batch


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_ood_flags_noise_and_solid_colour_not_shapes(trained_shapes) -> None:
    bundle = trained_shapes
    ref = ood.reference(bundle, n=400)
    assert ref.features.shape[0] == 400 and np.allclose(np.linalg.norm(ref.features, axis=1), 1.0)
    assert 0 < ref.threshold < 2.0
    test = raw_batch(load_samples(bundle, "test"), np.arange(40))
    in_dist = ood.score(bundle, ref, test)
    assert sum(s.flagged for s in in_dist) <= 3, [s.distance for s in in_dist]  # about 1% by construction
    shape = in_dist[0] if not in_dist[0].flagged else next(s for s in in_dist if not s.flagged)
    assert ood.distance_phrase(shape.percentile, False) in shape.summary()  # worded by its percentile
    gen = torch.Generator().manual_seed(0)
    noise = torch.rand(2, *bundle.info.input_shape, generator=gen)
    solid = torch.zeros(2, *bundle.info.input_shape)
    solid[0, 0] = 1.0  # red
    solid[1] = 0.5  # grey
    odd = ood.score(bundle, ref, torch.cat([noise, solid]))
    assert all(s.flagged for s in odd), [(s.distance, s.threshold) for s in odd]
    # beyond the 99th-percentile threshold: at least 99% of the 400 reference distances lie below (99.0 exactly
    # when the distance falls between the two reference values the threshold interpolates)
    assert all(s.distance > s.threshold and s.percentile >= ood.PERCENTILE for s in odd), [
        (s.distance, s.threshold, s.percentile) for s in odd
    ]
    assert "out of distribution" in odd[0].summary() and f"{odd[0].threshold:.3f}" in odd[0].summary()
    assert all(0.0 <= s.entropy <= s.max_entropy + 1e-9 for s in odd + in_dist)
    one = ood.score(bundle, ref, test[0])  # a single (C, H, W) image
    assert len(one) == 1 and one[0].distance == pytest.approx(in_dist[0].distance, abs=1e-5)
