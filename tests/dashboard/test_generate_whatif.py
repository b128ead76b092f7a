"""What if: the edited answer is explained at the original's token (same step when the text there is the same, else
its nearest occurrence, said so), never at another token the caption would misname; a token gone is said."""

from __future__ import annotations

from xaidash.dashboard.components.generate_compute import Target
from xaidash.dashboard.components.generate_whatif import matching_target
from xaidash.models.language.generate import Generation, Step
from xaidash.models.language.prompt import Prompt

PROMPT = Prompt("q", "q", (1,), ("q",), (0,), False)


def _answer(tokens: list[str]) -> Generation:
    steps = tuple(Step(100 + sum(map(ord, t)), t, 0.5, ()) for t in tokens)
    return Generation(PROMPT, steps, "max new tokens", 0.1, False, None, 1.0)


def test_the_issue_case_explains_the_nearest_the_and_says_so() -> None:
    original = _answer([f" w{k}" for k in range(31)] + [" the"])
    edited = _answer([" a", " b", " c", " d", " the", *[f" v{k}" for k in range(24)], " the", " end"])
    target = Target((31, 32), contrast=None, unit="word", include_template=True)
    matched, note = matching_target(original, target, edited)
    assert matched == Target((29, 30), None, "word", True)  # not step 4, the first " the"
    assert "step 29" in note and "step 31" in note


def test_same_step_same_text_needs_no_note_and_keeps_the_contrast() -> None:
    original, edited = _answer([" Paris", "."]), _answer([" Paris", "!"])
    matched, note = matching_target(original, Target((0, 1), contrast=7), edited)
    assert matched == Target((0, 1), 7) and note == ""


def test_a_token_gone_explains_nothing() -> None:
    matched, note = matching_target(_answer([" Paris"]), Target((0, 1)), _answer([" Rome", "."]))
    assert matched is None and "does not write ' Paris'" in note
