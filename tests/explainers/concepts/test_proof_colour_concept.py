"""The proof the issue asks for: on shapes_colour, where every circle is red and no other shape is, a concept of
red shapes that are NOT circles gets a significant TCAV score for `circle`, and concepts unrelated to the labels
(uniform noise images; shapes that sit in the left part of the image, of every class) do not."""

from __future__ import annotations

import pytest
import torch
from concept_runs import noise_folder, red_folder

from xaidash.data.registry import load_split
from xaidash.explainers.concepts import concept_report
from xaidash.models.runs.store import load_bundle


def left_shapes(n: int) -> str:
    """Test samples whose shape's centre lies in the left third: position says nothing about the class."""
    test = load_split("shapes_colour", "test")
    masks = test.masks.float()
    cx = (masks * torch.arange(32).float()).sum((1, 2)) / masks.sum((1, 2))
    return "gallery:" + ",".join(map(str, torch.nonzero(cx < 11).flatten()[:n].tolist()))


@pytest.mark.slow
@pytest.mark.long(seconds=40)
def test_red_is_a_significant_concept_for_the_red_class_and_unrelated_concepts_are_not(colour_run, tmp_path):
    bundle = load_bundle(colour_run.run, device="cpu")
    red, noise = red_folder(tmp_path / "red"), noise_folder(tmp_path / "noise")
    report = concept_report(bundle, [f"folder:{red}", f"folder:{noise}", left_shapes(50)], "circle")
    assert report.layers == ["layers.1"]  # the default: the block before global average pooling
    found = {r.concept: r for r in report.results}
    print(
        {
            k: (round(r.mean, 3), round(r.std, 3), round(r.random_mean, 3), f"{r.p_adjusted:.2g}")
            for k, r in found.items()
        }
    )
    # Measured over TCAV seeds 0-4 on this run: red 1.00 vs random 0.26-0.71, Bonferroni p 1.6e-6..0.029;
    # noise and left-placed shapes p 0.29..1 (docs/concepts.md).
    assert found["red"].significant and found["red"].mean > found["red"].random_mean + 0.2, found["red"]
    assert not found["noise"].significant, found["noise"]
    left = next(r for name, r in found.items() if name.startswith("gallery"))
    assert not left.significant, left
