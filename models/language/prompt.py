"""A prompt as the model reads it: the user's text inside the chat template, as token ids, with the positions of
the user's own tokens (the features explanations perturb) told apart from template and special tokens.

captum's LLMAttribution treats every prompt token as a feature, so on a chat prompt it ranks `<|im_start|>`,
`assistant` and the template's newlines highest (they matter to any answer). Here the features are the tokens
whose characters fall inside the user's text, found through the tokenizer's offsets."""

from __future__ import annotations

from dataclasses import dataclass

from xaidash.models.language.model import LanguageModel
from xaidash.models.registry import ModelError

MAX_PROMPT_TOKENS = 1024  # the longest prompt accepted (model context permitting); longer text is cut with a notice
MAX_NEW_TOKENS = 256  # the most tokens one generation writes


@dataclass(frozen=True)
class Prompt:
    """text: what the user wrote (after any cut); rendered: the text the model reads (template applied);
    ids / tokens: its token ids and their text; features: positions of the user's tokens, in order;
    truncated: user tokens cut to fit (0: none); chat: whether the template was applied."""

    text: str
    rendered: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    features: tuple[int, ...]
    chat: bool
    truncated: int = 0
    original_tokens: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def notice(self) -> str:
        """One sentence when the text was cut, else ''."""
        if not self.truncated:
            return ""
        kept = self.original_tokens - self.truncated
        return (
            f"The prompt was cut to its first {kept} of {self.original_tokens} tokens to fit the context bound; "
            "the rest was not read."
        )

    def feature_tokens(self) -> list[str]:
        return [self.tokens[p] for p in self.features]


def render(lm: LanguageModel, text: str, chat: bool) -> str:
    """The text the model reads: the chat template around `text` (with the assistant's turn opened) when asked and
    the model has one, else `text` itself."""
    if chat and lm.has_chat_template:
        messages = [{"role": "user", "content": text}]
        return str(lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return text


def _encode(lm: LanguageModel, rendered: str) -> tuple[list[int], list[tuple[int, int]] | None]:
    enc = lm.tokenizer(rendered, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc.get("offset_mapping")
    return list(enc["input_ids"]), None if offsets is None else [(int(a), int(b)) for a, b in offsets]


def _user_positions(
    lm: LanguageModel, ids: list[int], offsets: list[tuple[int, int]] | None, start: int, end: int
) -> tuple[int, ...]:
    special = lm.special_ids()
    if offsets is None:  # a slow tokenizer: every non-special token counts (no template can be told apart)
        return tuple(i for i, t in enumerate(ids) if t not in special)
    return tuple(i for i, (a, b) in enumerate(offsets) if ids[i] not in special and b > start and a < end)


def _bound(lm: LanguageModel, max_tokens: int | None) -> int:
    limit = MAX_PROMPT_TOKENS if max_tokens is None else int(max_tokens)
    return max(1, min(limit, lm.context - MAX_NEW_TOKENS))


def build_prompt(lm: LanguageModel, text: str, *, chat: bool = True, max_tokens: int | None = None) -> Prompt:
    """The prompt for `text`; a text longer than the bound (`max_tokens`, default MAX_PROMPT_TOKENS, less than the
    model's context minus MAX_NEW_TOKENS) is cut to its first tokens and says so (`Prompt.notice`)."""
    if not isinstance(text, str) or not text.strip():
        raise ModelError("The prompt is empty: type a question or an instruction.")
    bound = _bound(lm, max_tokens)
    own = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    original = len(own["input_ids"])
    overhead = len(_encode(lm, render(lm, "x", chat))[0]) - 1
    room = bound - max(0, overhead)
    if room < 1:
        raise ModelError(f"The chat template alone takes {overhead} tokens, more than the bound of {bound}.")
    truncated = 0
    if original > room:
        offsets = own.get("offset_mapping")
        cut = int(offsets[room - 1][1]) if offsets else len(lm.tokenizer.decode(own["input_ids"][:room]))
        text = text[:cut]
        truncated = original - room
    rendered = render(lm, text, chat)
    ids, offsets = _encode(lm, rendered)
    start = rendered.rfind(text)  # the user's text is the last copy of it: a system prompt never ends the template
    features = _user_positions(lm, ids, offsets, start, start + len(text)) if start >= 0 else ()
    if not features:
        raise ModelError("None of the prompt's tokens are the user's text (only template or special tokens).")
    return Prompt(
        text=text,
        rendered=rendered,
        ids=tuple(ids),
        tokens=tuple(lm.token_text(ids)),
        features=features,
        chat=chat and lm.has_chat_template,
        truncated=truncated,
        original_tokens=original,
    )


def word_groups(prompt: Prompt) -> list[list[int]]:
    """The feature positions grouped into words: a token that starts with a space or a newline, or follows one
    that ends with one, starts a new word; punctuation stays with the word before it, and a token of whitespace
    alone (BPE tokenizers split " 123" into " ", "1", "2", "3") with the word after it."""
    groups: list[list[int]] = []
    previous = None
    for p in prompt.features:
        token = prompt.tokens[p]
        after_blank = previous is not None and not prompt.tokens[previous].strip()
        new_word = (
            not groups
            or previous is None
            or p != previous + 1
            or (not after_blank and (token[:1].isspace() or prompt.tokens[previous][-1:].isspace()))
        )
        if new_word:
            groups.append([p])
        else:
            groups[-1].append(p)
        previous = p
    return groups
