"""The Model page's maps across training carry what each epoch's completeness check found, as every other map
does (`map_figure.completeness_of` into the `Caption` they build): '⚠ values do not add up ...' where the promise
fails, what IG did to keep it where it holds with raised steps, nothing where it holds as asked. Built by hand, no
training."""

from __future__ import annotations

import numpy as np

import xaidash.explainers  # noqa: F401  (registers the methods)
from xaidash.explainers.comparison.across_training import EpochExplanations, TrainingExplanations
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.registry import OUTPUT_CHANGE, STEPS_USED

CLASSES = ["circle", "square"]
WORDS = ["not", "bad", "at", "all"]


def _ig(delta: float, change: float, steps_used: int, *, modality: str = "image", seed: int = 0) -> Explanation:
    rng = np.random.default_rng(seed)
    text = modality == "text"
    return Explanation(
        method="ig",
        params={"steps": 50},
        targets=np.array([1]),
        attributions=[rng.normal(size=len(WORDS)).astype(np.float32)]
        if text
        else rng.normal(size=(1, 8, 8)).astype(np.float32),
        seconds=0.3,
        device="cpu",
        modality=modality,
        tokens=[WORDS] if text else None,
        diagnostics={"convergence_delta": [delta], OUTPUT_CHANGE: [change], STEPS_USED: [float(steps_used)]},
    )


def _across(*explanations: Explanation) -> TrainingExplanations:
    return TrainingExplanations(
        target=1,
        epochs=[EpochExplanations(i + 1, 0.5, 1, 0.6, {"ig": e}) for i, e in enumerate(explanations)],
    )


def test_across_training_captions_carry_a_broken_promise_and_raised_steps() -> None:
    result = _across(
        _ig(0.7, 2.0, 400),  # off by 35% after raising the steps as far as allowed
        _ig(0.016, 2.0, 296),  # 0.8% with 296 points
        _ig(0.001, 2.0, 50),  # holds as asked: nothing to say
    )
    (_, broken), (_, raised), (_, kept) = result.figures("ig", CLASSES)
    assert broken.caption.incomplete
    text = broken.caption.text()
    assert "⚠ values do not add up to f(x) − f(baseline): off by 35%" in text
    assert "steps raised 50 → 400, the most allowed" in text
    assert "target square" in text and broken.caption.note == "one scale for every epoch shown"
    assert broken.to_json()["caption"]["incomplete"] is True
    assert not raised.caption.incomplete
    assert raised.caption.completeness == "steps raised 50 → 296 to reach gap 0.8%"
    assert kept.caption.completeness == "" and not kept.caption.incomplete


def test_text_across_training_captions_carry_the_note() -> None:
    result = _across(_ig(0.5, 1.0, 400, modality="text"))
    [(_, fig)] = result.figures("ig", CLASSES)
    assert fig.modality == "text" and fig.words == tuple(WORDS)
    text = fig.caption.text()
    assert fig.caption.incomplete and "⚠ values do not add up" in text and "off by 50%" in text


def test_a_method_without_a_declared_total_says_nothing() -> None:
    e = Explanation(
        method="saliency",
        params={},
        targets=np.array([1]),
        attributions=np.ones((1, 8, 8), np.float32),
        seconds=0.1,
        device="cpu",
        modality="image",
    )
    result = TrainingExplanations(target=1, epochs=[EpochExplanations(1, 0.5, 1, 0.6, {"saliency": e})])
    [(_, fig)] = result.figures("saliency", CLASSES)
    assert fig.caption.completeness == "" and not fig.caption.incomplete
