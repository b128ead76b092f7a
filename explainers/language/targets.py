"""Which token of an answer to explain: the default target, and the same token in an edited answer.

A filler token (a stop word, punctuation, whitespace, a special token) is a poor default: "What is the largest planet
in the solar system?" answered in 32 tokens ended on " the", whose maps no method made more faithful than a random
order. The default is the answer's first content token the prompt does not already hold (" Neptune" in SmolLM2's "The
largest planet in the solar system is Neptune, ...", " Paris" in "The capital of France is Paris."), else its first
content token, else its first token that is not blank. What counts as filler is declared here alone (`is_content`), by
text, so it holds for any tokenizer: a content token's text, stripped, is letters and digits only and not a stop word.

`matching_span` finds an explained span again in another answer (the What-if comparison): at the same steps when the
text there is the same, else at the nearest place the same text occurs (said so), else nowhere (said so).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from xaidash.models.language.generate import Generation
from xaidash.models.language.prompt import Prompt

# English function words: the answer's words that carry no content of their own (a small list on purpose: a word
# missing here only makes a content word of a filler one, never the reverse).
_STOP_TEXT = """
a an the and or but nor so yet if then than that this these those there here it its is are was were be been being am
do does did done has have had having of in on at to for from by with as into onto about over under between through
during before after above below up down out off again further once not no yes very can could will would shall should
may might must i me my we us our you your he him his she her they them their what which who whom whose when where why
how all any both each few more most other some such own same too just also only s t
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

NEW_CONTENT = "the answer's first content word that the prompt does not already contain"
FIRST_CONTENT = "the answer's first content word (every content word repeats one of the prompt's)"
FIRST_WORD = "the answer's first token that is not blank (it has no content word)"
FIRST_TOKEN = "the answer's first token"


def is_content(token: str) -> bool:
    """Whether a token's text carries content: stripped, it is letters and digits only and not a stop word
    (punctuation, whitespace and stop words are filler)."""
    text = token.strip()
    return text.isalnum() and text.lower() not in STOP_WORDS


def _prompt_words(prompt: Prompt) -> set[str]:
    """The user's words and tokens, lower-cased: an answer token among them repeats the question."""
    words = set(re.findall(r"\w+", prompt.text.lower()))
    return words | {t.strip().lower() for t in prompt.feature_tokens() if t.strip()}


@dataclass(frozen=True)
class DefaultTarget:
    step: int
    why: str  # one of the sentences above: why this step was picked


def default_target(generation: Generation, special: Collection[int]) -> DefaultTarget:
    """The step a page explains first (see the module docstring); special tokens are never picked unless the answer
    has nothing else."""
    steps = [(k, s) for k, s in enumerate(generation.steps) if s.id not in special]
    seen = _prompt_words(generation.prompt)
    content = [(k, s) for k, s in steps if is_content(s.token)]
    for k, s in content:
        if s.token.strip().lower() not in seen:
            return DefaultTarget(k, NEW_CONTENT)
    if content:
        return DefaultTarget(content[0][0], FIRST_CONTENT)
    for k, s in steps:
        if s.token.strip():
            return DefaultTarget(k, FIRST_WORD)
    return DefaultTarget(0, FIRST_TOKEN)


@dataclass(frozen=True)
class SpanMatch:
    """Where an explained span is in another answer: `span` (None: it is not there) and what to tell the reader
    ('' when it sits at the same steps)."""

    span: tuple[int, int] | None
    note: str


def _span_label(tokens: Sequence[str]) -> str:
    return repr("".join(tokens))


def matching_span(original: Sequence[str], span: tuple[int, int], other: Sequence[str]) -> SpanMatch:
    """The steps of `other` (an answer's token texts) that hold the text `original[span]` holds: the same steps when
    they do, else the nearest occurrence (the earlier one on a tie), else none."""
    start, stop = span
    wanted = tuple(original[start:stop])
    width = stop - start
    label = _span_label(wanted)
    where = f"step {start}" if width == 1 else f"steps {start}-{stop - 1}"
    if tuple(other[start:stop]) == wanted:
        return SpanMatch(span, "")
    found = [k for k in range(len(other) - width + 1) if tuple(other[k : k + width]) == wanted]
    if not found:
        return SpanMatch(
            None,
            f"The edited answer does not write {label} (the original's {where}): there is no same token to explain, "
            "so nothing is explained for it.",
        )
    k = min(found, key=lambda i: (abs(i - start), i))
    there = f"step {k}" if width == 1 else f"steps {k}-{k + width - 1}"
    others = f" (it occurs {len(found)} times; this is the nearest)" if len(found) > 1 else ""
    return SpanMatch(
        (k, k + width),
        f"The edited answer writes {label} at {there}, not at the original's {where}: it is explained there{others}.",
    )
