"""Declared method parameters: a schema the dashboard builds controls from and `explain` validates against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from xaidash.data.errors import XaidashError

ParamKind = Literal["int", "float", "bool", "choice", "layer"]

# The longest text explained: LIME and occlusion build one perturbed copy per sample and word, so a 5 MB text
# ran them out of memory; the text models read at most a few hundred tokens of it anyway.
MAX_TEXT_CHARS = 20_000
MAX_BATCH_SIZE = 65_536  # samples per forward pass (--batch-size)


def check_text_length(texts: list[str]) -> None:
    """ExplainError for a text longer than MAX_TEXT_CHARS, naming which one and the limit."""
    for i, text in enumerate(texts):
        if len(text) > MAX_TEXT_CHARS:
            which = f"Text {i + 1} of {len(texts)}" if len(texts) > 1 else "The text"
            raise ExplainError(
                f"{which} has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} can be explained "
                "(the model reads only its first few hundred words): shorten it or explain a part of it."
            )


class ExplainError(XaidashError):
    """An explanation cannot be computed as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Param:
    """One parameter of a method. kind 'layer' takes a module path from the model spec's conv layers."""

    name: str
    kind: ParamKind
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] = field(default_factory=tuple)

    def coerce(self, value: Any) -> Any:
        """Return `value` converted to this parameter's type, or raise ExplainError saying what is allowed."""
        try:
            if self.kind == "int":
                value = int(value)
            elif self.kind == "float":
                value = float(value)
            elif self.kind == "bool":
                value = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
        except (TypeError, ValueError):
            raise ExplainError(f"Parameter {self.name} must be a {self.kind}, got {value!r}.") from None
        if self.kind in ("int", "float") and (
            (self.min is not None and value < self.min) or (self.max is not None and value > self.max)
        ):
            raise ExplainError(f"Parameter {self.name}={value} is outside [{self.min}, {self.max}].")
        if self.kind == "choice" and value not in self.choices:
            raise ExplainError(f"Parameter {self.name}={value!r}: choose one of {', '.join(map(str, self.choices))}.")
        return value

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            rng = f" [{self.min}..{self.max}]"
        elif self.min is not None:
            rng = f" >= {self.min}"
        else:
            rng = f" <= {self.max}" if self.max is not None else ""
        ch = f" {{{', '.join(map(str, self.choices))}}}" if self.choices else ""
        return f"{self.name} ({self.kind}{rng}{ch}, default {self.default}): {self.help}"
