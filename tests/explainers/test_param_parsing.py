"""`--param` is read once (`explainers.params.parse_params`) for classifier methods (`xaidash explain`) and prompt
methods (`xaidash generate --explain`) alike, and every registry checks parameters through `data.specs`."""

from __future__ import annotations

import re

import pytest

from xaidash.explainers import get_method
from xaidash.explainers.inspection.projection import resolve_params as projection_params
from xaidash.explainers.language import api  # noqa: F401  (registers the prompt methods)
from xaidash.explainers.language.registry import get_prompt_method
from xaidash.explainers.params import ExplainError, Param, parse_params
from xaidash.explainers.robust.registry import get_attack


def test_one_reader_for_classifier_and_prompt_methods() -> None:
    ig, smooth = get_method("ig", "image"), get_method("smoothgrad", "image")
    prompt = get_prompt_method("shapley_sampling")
    assert parse_params(["ig.steps=8", "samples=4"], [ig, smooth]) == {
        "ig": {"steps": "8"},
        "smoothgrad": {"samples": "4"},
    }
    assert parse_params(["n_samples=5"], [prompt]) == {"shapley_sampling": {"n_samples": "5"}}
    assert parse_params(None, [prompt]) == {"shapley_sampling": {}}


def test_a_choice_is_matched_by_its_text() -> None:
    spec = get_method("ig", "image")
    baseline = next(p for p in spec.params if p.name == "baseline")
    choice = baseline.choices[-1]
    assert parse_params([f"ig.baseline={choice}"], [spec]) == {"ig": {"baseline": choice}}
    window = Param("window", "choice", 3, choices=(3, 5))
    assert window.match_choice("5") == 5 and window.coerce("5") == 5


@pytest.mark.parametrize(
    "items,message",
    [
        (["steps"], "write method.name=value or name=value"),
        (["lime.steps=3"], "'lime' is not one of the chosen methods (ig)"),
        (["bogus=3"], "no chosen method has a parameter 'bogus'"),
        (["ig.bogus=3"], "ig has no parameter bogus; it takes: "),
    ],
)
def test_refusals(items: list[str], message: str) -> None:
    with pytest.raises(ExplainError, match=re.escape(message)):
        parse_params(items, [get_method("ig", "image")])


def test_every_registry_checks_parameters_the_same_way() -> None:
    with pytest.raises(ExplainError, match=r"^shapley_sampling has no parameter x; it takes: n_samples"):
        get_prompt_method("shapley_sampling").resolve_params({"x": 1})
    fgsm = get_attack("fgsm")
    with pytest.raises(ExplainError, match=rf"^{fgsm.label} has no parameter x; it takes: "):
        fgsm.resolve_params({"x": 1})
    with pytest.raises(ExplainError, match=r"^t-SNE has no parameter x; it takes: perplexity"):
        projection_params("tsne", {"x": 1})
    with pytest.raises(ExplainError, match=r"^Unknown projection 'x': choose one of umap, tsne, pca"):
        projection_params("x", {})
    assert projection_params("pca", {"x_component": "3"}) == {"x_component": 3, "y_component": 2}
