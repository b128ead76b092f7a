"""The image searches are named for what they find, from their declared facts (explainers/robust/searches.py): the
smallest-ε search is a minimal adversarial example, with how visible its change is measured (L∞ in grey levels, L2,
the share of pixels moved by VISIBLE_LEVELS or more); the patch search is a counterfactual a person can see,
confined to one patch; every search reports each model run before it starts (a progress bar's steps)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

from xaidash.explainers import ExplainError
from xaidash.explainers.robust import attack, counterfactual
from xaidash.explainers.robust.counterfactual import MAX_PROBES, patch_counterfactual
from xaidash.explainers.robust.figures import perturbation_figure
from xaidash.explainers.robust.searches import (
    EDITS,
    PATCH,
    PERTURBATION,
    SEARCHES,
    VISIBLE_LEVELS,
    SearchStep,
    searches,
)
from xaidash.models.bundle import ModelBundle


@pytest.fixture(scope="module")
def sensitive() -> tuple[ModelBundle, torch.Tensor, int]:
    """An untrained simple_cnn with its weights tripled (its answer then moves under small changes), an image and
    the runner-up class to reach."""
    bundle = fresh_bundle("simple_cnn")
    with torch.no_grad():
        for m in bundle.model.modules():
            if isinstance(m, torch.nn.Conv2d | torch.nn.Linear):
                m.weight.mul_(3)
    x = torch.rand(*bundle.info.input_shape, generator=torch.Generator().manual_seed(1))
    probs = bundle.predict_proba(x[None])[0]
    return bundle, x, int(torch.argsort(-probs)[1])


def test_searches_come_from_the_adapter_and_are_named_by_their_facts() -> None:
    assert searches("image") == [PERTURBATION, PATCH]
    assert searches("text") == [EDITS]
    assert SEARCHES[PERTURBATION].name == "minimal adversarial example"
    assert SEARCHES[EDITS].name == "counterfactual"  # word edits are real counterfactuals and keep the name


def test_the_smallest_epsilon_is_called_an_adversarial_example_and_its_invisibility_said(sensitive) -> None:
    bundle, x, to = sensitive
    steps: list[SearchStep] = []
    cf = counterfactual(bundle, x, to, steps=10, progress=steps.append)
    assert cf.found and cf.search == PERTURBATION and cf.name == "minimal adversarial example"
    said = cf.summary()
    assert said.startswith("Minimal adversarial example: ") and " at ε = " in said
    change = cf.change
    assert change is not None and change.linf_levels < VISIBLE_LEVELS and not change.visible
    assert "not a change a person sees" in said and "L∞ " in said and "/255" in said
    data = cf.to_json()
    assert data["name"] == "minimal adversarial example" and data["visible"] is False
    assert data["changed_share"] == 0.0 and data["linf_255"] == pytest.approx(cf.result.linf * 255, rel=1e-4)
    # one step per attack run, in order, each with its ε, out of the most the bisection can make
    assert [s.run for s in steps] == list(range(1, cf.probes + 1))
    assert all(s.runs == steps[0].runs and cf.probes <= s.runs <= MAX_PROBES for s in steps)
    assert steps[0].text() == f"PGD run 1 of at most {steps[0].runs} · ε = 25.5/255"
    assert all("ε = " in s.detail for s in steps) and 0 <= steps[-1].fraction < 1


def test_the_patch_search_finds_a_visible_change_inside_one_patch(sensitive) -> None:
    bundle, x, to = sensitive
    steps: list[SearchStep] = []
    cf = counterfactual(bundle, x, to, search=PATCH, steps=10, progress=steps.append)
    assert cf.found and cf.name == "patch counterfactual" and cf.patch is not None
    assert cf.result is not None and cf.result.pred_after == to
    top, left, h, w = cf.patch
    diff = np.abs(cf.result.perturbation).max(0)
    outside = diff.copy()
    outside[top : top + h, left : left + w] = 0
    assert outside.max() == 0.0 and diff.max() * 255 >= VISIBLE_LEVELS
    change = cf.change
    assert change is not None and change.visible and change.changed <= h * w / diff.size + 1e-9
    said = cf.summary()
    assert said.startswith("Patch counterfactual: ") and f"{h}×{w} px patch" in said and "visible" in said
    assert cf.to_json()["patch"] == {"top": top, "left": left, "height": h, "width": w}
    assert steps[0].text().startswith("PGD run 1 of at most ") and "patch" in steps[0].detail
    # the difference image reads in grey levels, its scale the whole range
    fig = perturbation_figure(cf.result)
    assert fig.scale == pytest.approx(255.0) and "grey levels" in fig.legend.units


def test_none_within_the_largest_patch_is_said_plainly(sensitive) -> None:
    bundle, x, to = sensitive
    cf = patch_counterfactual(bundle, x, to, sides=[1 / 28], steps=1)
    if cf.found:  # one pixel moved the answer: still a patch, still inside
        assert cf.patch is not None and cf.patch[2:] == (1, 1)
    else:
        assert cf.summary().startswith("None found within a patch of 1×1 px: no patch counterfactual")
        assert cf.to_json()["visible"] is None


def test_a_region_confines_the_attack(sensitive) -> None:
    bundle, x, to = sensitive
    r = attack(bundle, x, to, "pgd", {"epsilon": 1.0}, region=(2, 3, 4, 5))
    d = np.abs(r.perturbation).max(0)
    assert d[2:6, 3:8].max() > 0 and d.sum() == pytest.approx(d[2:6, 3:8].sum())
    assert r.to_json()["region"] == {"top": 2, "left": 3, "height": 4, "width": 5}
    with pytest.raises(ExplainError, match="does not lie inside"):
        attack(bundle, x, to, "pgd", {"epsilon": 1.0}, region=(20, 20, 10, 10))


def test_a_search_the_model_does_not_allow_is_refused(sensitive) -> None:
    bundle, x, to = sensitive
    with pytest.raises(ExplainError, match="does not apply to image models"):
        counterfactual(bundle, x, to, search=EDITS)
