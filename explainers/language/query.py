"""What a prompt explanation asks, without the model: the prompt, the generated tokens read after it, the explained
span (and contrast), the features and their labels, the baseline token, the batch size and the seed. A `PromptQuery`
is plain, frozen and hashable, so a page builds it once per click and caches it (and every method's answer under
it); a prompt method computes on `(lm, query, params)` and returns a `PromptResult`.

The explained output is the log-probability of the target (one generated token, or a span's tokens summed, read
teacher-forced after the prompt), or with a contrast token the difference log p(target) - log p(contrast).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import Prompt, word_groups

FeatureUnit = Literal["token", "word"]
DEFAULT_BATCH = 32


@dataclass(frozen=True)
class PromptQuery:
    """What a method explains.

    prompt: the model input (template included); target_ids: the generated tokens read after it, teacher-forced
    (every step up to the last explained one); span: the steps [start, stop) whose summed log-probability is the
    explained output; features: prompt positions grouped into the units perturbed (tokens or words; template and
    special tokens left out unless asked for); labels: one text per feature; steps: each target id's text;
    contrast: a token id whose log-probability at step `span[0]` is subtracted ("why this token rather than that
    one"; one-step spans only), with its text; baseline_id: the token that replaces a hidden feature (captum's
    TextTokenInput default, 0, unless chosen); batch_size: rows per forward pass (halved on out-of-memory); model:
    the name of the language model whose token ids these are."""

    prompt: Prompt
    target_ids: tuple[int, ...]
    span: tuple[int, int]
    features: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]
    steps: tuple[str, ...]
    contrast: int | None = None
    contrast_text: str | None = None
    baseline_id: int = 0
    batch_size: int = DEFAULT_BATCH
    seed: int = 0
    unit: FeatureUnit = "token"
    model: str = ""

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_steps(self) -> int:
        return len(self.target_ids)


@dataclass
class PromptResult:
    """attributions: (n_features,) for the explained output; per_step: (n_steps, n_features) one row per
    generated step's own log-probability (None when the method made no such rows: gradient methods make them only
    when asked, at one backward pass per step); rows: model rows run (forward, or forward+backward for gradients);
    batch: the rows per pass it ran at; diagnostics: name -> value."""

    attributions: np.ndarray
    per_step: np.ndarray | None = None
    rows: int = 0
    batch: int = 0
    diagnostics: dict[str, float] = field(default_factory=dict)


def features_of(prompt: Prompt, unit: FeatureUnit = "token", include_template: bool = False) -> list[list[int]]:
    """Prompt positions grouped into features: the user's tokens or words (template and special tokens left out),
    or with `include_template` every prompt token (captum's default)."""
    if include_template:
        return [[p] for p in range(len(prompt.ids))]
    if unit == "word":
        return word_groups(prompt)
    return [[p] for p in prompt.features]


def _checked_span(lm: LanguageModel, ids: tuple[int, ...], span: tuple[int, int] | None, contrast: int | None) -> None:
    """ExplainError for a span outside the answer, a contrast on a span of several steps, or a contrast equal to
    the target or outside the vocabulary."""
    if not ids:
        raise ExplainError("There is no generated token to explain: generate an answer first.")
    start, stop = span if span is not None else (0, len(ids))
    if not 0 <= start < stop <= len(ids):
        raise ExplainError(f"Steps {start}-{stop} are outside the answer's {len(ids)} tokens.")
    if contrast is not None:
        if stop - start != 1:
            raise ExplainError("A contrast token compares one generated token with another: pick a single token.")
        if int(contrast) == ids[start]:
            raise ExplainError("The contrast token is the generated token itself: pick another one.")
        if not 0 <= int(contrast) < lm.vocab_size:
            raise ExplainError(f"Contrast token id {contrast} is outside the vocabulary (0-{lm.vocab_size - 1}).")


def make_query(
    lm: LanguageModel,
    prompt: Prompt,
    target_ids: Sequence[int],
    *,
    span: tuple[int, int] | None = None,
    contrast: int | None = None,
    unit: FeatureUnit = "token",
    include_template: bool = False,
    baseline_id: int = 0,
    batch_size: int = DEFAULT_BATCH,
    seed: int = 0,
) -> PromptQuery:
    """A query explaining steps span=[start, stop) of `target_ids` (default: all of them); only the steps up to
    `stop` are read. The model's tokenizer names the tokens; the query keeps no reference to the model.
    ExplainError for a span outside the answer, a contrast on a span of several steps, or a contrast equal to the
    target."""
    ids = tuple(int(i) for i in target_ids)
    _checked_span(lm, ids, span, contrast)
    start, stop = span if span is not None else (0, len(ids))
    if not 0 <= int(baseline_id) < lm.vocab_size:
        raise ExplainError(f"Baseline token id {baseline_id} is outside the vocabulary (0-{lm.vocab_size - 1}).")
    groups = features_of(prompt, unit, include_template)
    return PromptQuery(
        prompt=prompt,
        target_ids=ids[:stop],
        span=(int(start), int(stop)),
        features=tuple(tuple(g) for g in groups),
        labels=tuple("".join(prompt.tokens[p] for p in g) for g in groups),
        steps=tuple(lm.token_text(list(ids[:stop]))),
        contrast=None if contrast is None else int(contrast),
        contrast_text=None if contrast is None else lm.token_text([int(contrast)])[0],
        baseline_id=int(baseline_id),
        batch_size=max(1, int(batch_size)),
        seed=int(seed),
        unit="token" if include_template else unit,
        model=lm.name,
    )
