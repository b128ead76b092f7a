"""Out-of-distribution hint: a shapes test image is in distribution; a checkerboard, stripes and solid colours
are flagged; uniform noise, close to the noisy backgrounds of shapes' own images, reads at least 'at the edge'."""

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
    test = raw_batch(bundle, load_samples(bundle, "test"), np.arange(40))
    in_dist = ood.score(bundle, ref, test)
    assert sum(s.flagged for s in in_dist) <= 3, [s.distance for s in in_dist]  # about 1% by construction
    shape = in_dist[0] if not in_dist[0].flagged else next(s for s in in_dist if not s.flagged)
    assert ood.distance_phrase(shape.percentile, False) in shape.summary()  # worded by its percentile
    patterns = torch.zeros(4, *bundle.info.input_shape)
    patterns[0, :, ::2, ::2] = patterns[0, :, 1::2, 1::2] = 1.0  # checkerboard
    patterns[1, :, :, ::4] = 1.0  # stripes
    patterns[2, 0] = 1.0  # solid red
    patterns[3] = 0.5  # solid grey
    # Stripes are thin lines on black, as shapes' outlines are: flagged by some trainings, at the edge by others
    # (the same seed trains another model on another CPU's kernels).
    stripes = ood.score(bundle, ref, patterns[1:2])[0]
    assert stripes.percentile >= ood.EDGE_FROM, stripes.percentile
    patterns = patterns[[0, 2, 3]]
    odd = ood.score(bundle, ref, patterns)
    assert all(s.flagged for s in odd), [(s.distance, s.threshold) for s in odd]
    # beyond the 99th-percentile threshold: at least 99% of the 400 reference distances lie below (99.0 exactly
    # when the distance falls between the two reference values the threshold interpolates)
    assert all(s.distance > s.threshold and s.percentile >= ood.PERCENTILE for s in odd), [
        (s.distance, s.threshold, s.percentile) for s in odd
    ]
    # Uniform noise resembles the noisy backgrounds shapes draw on (a 2-epoch model put it at the 97th-99th
    # percentile): not necessarily flagged, but never called close or usual.
    noise = ood.score(bundle, ref, torch.rand(2, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0)))
    assert all(s.percentile >= ood.EDGE_FROM for s in noise), [s.percentile for s in noise]
    assert all(s.summary().startswith(("At the edge", "Looks out of distribution")) for s in noise)
    assert "out of distribution" in odd[0].summary() and f"{odd[0].threshold:.3f}" in odd[0].summary()
    assert all(0.0 <= s.entropy <= s.max_entropy + 1e-9 for s in odd + in_dist)
    one = ood.score(bundle, ref, test[0])  # a single (C, H, W) image
    assert len(one) == 1 and one[0].distance == pytest.approx(in_dist[0].distance, abs=1e-5)


def test_a_model_that_predicts_a_number_has_no_entropy_clause() -> None:
    from xaidash.explainers.inspection.ood import OODScore

    one_output = OODScore(2.0, 1.0, 99.0, 0.0, 0.0, 0.0, True, 5)  # max entropy log(1) = 0
    classes = OODScore(2.0, 1.0, 99.0, 0.5, 80.0, 0.69, True, 5)
    assert "entropy" not in one_output.summary() and one_output.summary().endswith(")."), one_output.summary()
    assert "predictive entropy 0.50 of at most 0.69 nats" in classes.summary()
