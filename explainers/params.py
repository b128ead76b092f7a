"""Declared method parameters: a schema the dashboard builds controls from and `explain` validates against, and
the one reader of `--param method.name=value` for classifier and prompt methods alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from xaidash.data.errors import ExplainError
from xaidash.data.specs import Param, ParamKind, unknown_params_message

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_TEXT_CHARS",
    "ExplainError",
    "Param",
    "ParamKind",
    "check_text_length",
    "parse_params",
]

# The longest text explained: LIME and occlusion build one perturbed copy per sample and word, so a 5 MB text
# ran them out of memory. Texts are first cut to the words the model reads (`modalities.text.read_part`, a few
# hundred tokens for the text models here), so only a model that reads more than this is refused; the dashboard's
# text box keeps this many characters per line.
MAX_TEXT_CHARS = 20_000
MAX_BATCH_SIZE = 65_536  # samples per forward pass (--batch-size)


def check_text_length(texts: list[str]) -> None:
    """ExplainError for a text longer than MAX_TEXT_CHARS, naming which one and the limit."""
    for i, text in enumerate(texts):
        if len(text) > MAX_TEXT_CHARS:
            which = f"Text {i + 1} of {len(texts)}" if len(texts) > 1 else "The text"
            raise ExplainError(
                f"{which} has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} can be explained: "
                "shorten it or explain a part of it."
            )


class ParamOwner(Protocol):
    """A method as `parse_params` reads it (a classifier or a prompt method spec)."""

    @property
    def id(self) -> str: ...

    @property
    def params(self) -> tuple[Param, ...]: ...


def parse_params(items: Sequence[str] | None, methods: Sequence[ParamOwner]) -> dict[str, dict[str, Any]]:
    """`method.name=value` for one method, or `name=value` for every chosen method that declares `name`.

    Values stay strings except choices, which are matched to the declared choice by text (so
    `occlusion.window=5` finds the integer choice 5); the method's `resolve_params` coerces and range-checks them.
    """
    out: dict[str, dict[str, Any]] = {m.id: {} for m in methods}
    by_id = {m.id: m for m in methods}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ExplainError(f"--param {item!r}: write method.name=value or name=value.")
        method_id, dot, name = key.rpartition(".")
        if dot and method_id not in by_id:
            raise ExplainError(
                f"--param {item!r}: {method_id!r} is not one of the chosen methods ({', '.join(by_id)})."
            )
        targets = [by_id[method_id]] if dot else [m for m in methods if any(p.name == name for p in m.params)]
        if not targets:
            raise ExplainError(f"--param {item!r}: no chosen method has a parameter {name!r}.")
        for m in targets:
            declared = {p.name: p for p in m.params}
            if name not in declared:
                raise ExplainError(unknown_params_message(m.id, [name], m.params))
            out[m.id][name] = declared[name].match_choice(value)
    return out
