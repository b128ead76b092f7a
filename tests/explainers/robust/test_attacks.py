"""Attacks: the same result as captum's own FGSM/PGD call, the budget kept (L-infinity and pixel range), a trained
shapes model's prediction flipped at a moderate epsilon, clear refusals, and the registry's facts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from captum.robust import FGSM, PGD

from xaidash.data.registry import get_info
from xaidash.data.transforms import normalize
from xaidash.explainers import ExplainError
from xaidash.explainers.robust import attack, get_attack, list_attacks
from xaidash.explainers.robust.attack import pixel_forward
from xaidash.explainers.robust.attacks import cross_entropy
from xaidash.explainers.robust.registry import check_epsilon
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


def _fresh(name: str = "resnet_small", dataset: str = "shapes") -> ModelBundle:
    info = get_info(dataset)
    torch.manual_seed(0)
    return ModelBundle(build_model(name, info).eval(), get_spec(name), info, torch.device("cpu"))


def _image(bundle: ModelBundle, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(tuple(bundle.info.input_shape), generator=gen)


def test_registry_declares_facts_and_lists_by_modality() -> None:
    ids = [s.id for s in list_attacks("image")]
    assert {"fgsm", "pgd"} <= set(ids)
    assert list_attacks("text") == []
    pgd = get_attack("pgd")
    assert pgd.modalities == ("image",) and pgd.iterative and pgd.targeted and "captum.robust.PGD" in pgd.library
    assert {p.name for p in pgd.params} >= {"steps"}
    with pytest.raises(ExplainError, match="Unknown attack"):
        get_attack("nope")
    with pytest.raises(ExplainError, match="counterfactual"):
        get_attack("fgsm", "text")


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, float("nan"), "x"])
def test_bad_budgets_are_refused_with_a_message(bad) -> None:
    with pytest.raises(ExplainError, match="epsilon"):
        check_epsilon(bad)
    bundle = _fresh()
    with pytest.raises(ExplainError, match="epsilon"):
        attack(bundle, _image(bundle), None, "fgsm", {"epsilon": bad})


@pytest.mark.filterwarnings("ignore:Input Tensor 0 did not already require gradients")
def test_fgsm_and_pgd_equal_captums_own_call() -> None:
    bundle = _fresh()
    x = _image(bundle)
    pred = int(bundle.predict_proba(x[None])[0].argmax())
    label = torch.tensor([pred])
    eps = 6 / 255

    def forward(z: torch.Tensor) -> torch.Tensor:  # the model as a user would wrap it for captum by hand
        return bundle.model(normalize(z, bundle.input_info))

    ours = attack(bundle, x, None, "fgsm", {"epsilon": eps})
    theirs = FGSM(forward, loss_func=cross_entropy, lower_bound=0, upper_bound=1).perturb(x[None].clone(), eps, label)
    np.testing.assert_allclose(ours.perturbed, theirs[0].detach().numpy(), atol=1e-6)

    ours = attack(bundle, x, None, "pgd", {"epsilon": eps, "steps": 5})
    theirs = PGD(forward, loss_func=cross_entropy, lower_bound=0, upper_bound=1).perturb(
        x[None].clone(), radius=eps, step_size=0.25 * eps, step_num=5, target=label
    )
    np.testing.assert_allclose(ours.perturbed, theirs[0].detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("attack_id", ["fgsm", "pgd"])
def test_budget_and_pixel_range_are_kept(attack_id: str) -> None:
    bundle = _fresh()
    x = _image(bundle, 3)
    x[:, :4] = 0.0  # pixels at the range's ends: a step outward must be clamped
    x[:, -4:] = 1.0
    eps = 10 / 255
    r = attack(bundle, x, None, attack_id, {"epsilon": eps})
    assert r.linf <= eps + 1e-6
    assert r.perturbed.min() >= 0.0 and r.perturbed.max() <= 1.0
    assert np.allclose(r.original, x.numpy())
    assert r.l2 == pytest.approx(float(np.linalg.norm(r.perturbed - r.original)))
    assert r.probs_before.sum() == pytest.approx(1.0, abs=1e-5) and r.probs_after.sum() == pytest.approx(1.0, abs=1e-5)
    assert r.to_json()["flipped"] == r.flipped
    assert r.params["epsilon"] == eps


def test_the_model_sees_normalised_pixels() -> None:
    """The budget is in raw pixels: the attack's forward equals the model on `prepare`d input."""
    bundle = _fresh("resnet_small")
    x = _image(bundle)[None]
    torch.testing.assert_close(pixel_forward(bundle)(x), bundle.model.eval()(bundle.prepare(x)).float())


def test_refusals() -> None:
    bundle = _fresh()
    x = _image(bundle)
    pred = int(bundle.predict_proba(x[None])[0].argmax())
    with pytest.raises(ExplainError, match="already predicts"):
        attack(bundle, x, pred, "pgd", {"epsilon": 0.03})
    with pytest.raises(ExplainError, match="out of range"):
        attack(bundle, x, 99, "pgd", {"epsilon": 0.03})
    with pytest.raises(ExplainError, match="no parameter"):
        attack(bundle, x, None, "fgsm", {"epsilon": 0.03, "steps": 3})
    with pytest.raises(ExplainError, match="shape"):
        attack(bundle, torch.rand(3, 5, 5), None, "fgsm", {"epsilon": 0.03})


class _Rounded(torch.nn.Module):
    """A model that is not differentiable in its input (rounds it off the graph)."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(torch.round(x.detach() * 4) / 4)


def test_a_model_without_input_gradients_is_refused() -> None:
    bundle = _fresh()
    bundle.model = _Rounded(bundle.model).eval()
    with pytest.raises(ExplainError, match="gradient"):
        attack(bundle, _image(bundle), None, "pgd", {"epsilon": 0.03})


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_pgd_flips_a_trained_model_at_a_moderate_epsilon(trained_shapes: ModelBundle) -> None:
    from xaidash.data.registry import load_split

    test = load_split("shapes", "test")
    flipped = 0
    for i in range(4):
        r = attack(trained_shapes, test.image(i).float(), None, "pgd", {"epsilon": 8 / 255, "steps": 10})
        assert r.linf <= 8 / 255 + 1e-6
        flipped += r.flipped
    assert flipped >= 3, f"PGD at 8/255 flipped {flipped}/4 of a trained model's test images"
    weak = attack(trained_shapes, test.image(0).float(), None, "fgsm", {"epsilon": 0.5 / 255})
    assert weak.linf <= 0.5 / 255 + 1e-6
