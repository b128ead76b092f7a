"""The one shape of every registry: entries that declare their facts (`Spec`), kept in a `Registry`, and the
parameters an entry takes as `Param` schemas, resolved and checked in one place (`resolve_params`).

Data sets, models, modalities, explanation methods (classifier and prompt), metrics, attacks, influence methods,
concept sources and the dashboard's pages are each one `Registry` of one `Spec` subclass. A registry is told what
its entries are called (`kind`, for messages), how an entry is keyed, which error a bad lookup raises and which
facts an entry must not contradict (`check`, run when it registers); code elsewhere never decides by an entry's
name: it asks the entry.

A `Param` is one declared parameter (a method's steps, an attack's step size, a projection's perplexity): the
dashboard builds its widget from it, the command line parses `name=value` with it, and `resolve_params` fills in
defaults, coerces and range-checks a caller's values and refuses unknown names with the same sentence everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

from xaidash.data.errors import ExplainError, XaidashError

ParamKind = Literal["int", "float", "bool", "choice", "layer"]


@dataclass(frozen=True)
class Param:
    """One declared parameter. kind 'layer' takes a module path of the model, one of the choices the caller
    passes to `resolve_params` (the model's conv layers for CAM methods)."""

    name: str
    kind: ParamKind
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] = field(default_factory=tuple)

    def coerce(self, value: Any) -> Any:
        """`value` converted to this parameter's type, or ExplainError saying what is allowed. A choice given as
        text (the command line's `--param window=5`) is matched to the declared choice by its text."""
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
        if self.kind == "choice":
            value = self.match_choice(value)
            if value not in self.choices:
                raise ExplainError(
                    f"Parameter {self.name}={value!r}: choose one of {', '.join(map(str, self.choices))}."
                )
        return value

    def match_choice(self, value: Any) -> Any:
        """The declared choice whose text is `value` (a string from a command line or a form), else `value`."""
        if isinstance(value, str) and value not in self.choices:
            return next((c for c in self.choices if str(c) == value), value)
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


@dataclass(frozen=True)
class LayerChoices:
    """What a 'layer' parameter may take on one model: the module paths, and the one used when none is given."""

    paths: tuple[str, ...]
    default: str | None = None
    owner: str = "the model"  # named in the refusal: "Layer 'x' is not a conv layer of resnet_small"


def unknown_params_message(owner: str, given: Iterable[str], params: Sequence[Param]) -> str:
    names = [p.name for p in params]
    return f"{owner} has no parameter {', '.join(sorted(given))}; it takes: {', '.join(names) or 'none'}."


def resolve_params(
    owner: str, params: Sequence[Param], given: Mapping[str, Any] | None, layers: LayerChoices | None = None
) -> dict[str, Any]:
    """Every declared parameter, from `given` or its default, coerced and range-checked (ExplainError for an
    unknown name or a value out of range). A 'layer' parameter takes its default from `layers` and must be one of
    its paths. `owner` names the method (or attack, projection) in the refusal."""
    given = dict(given or {})
    unknown = set(given) - {p.name for p in params}
    if unknown:
        raise ExplainError(unknown_params_message(owner, unknown, params))
    out: dict[str, Any] = {}
    for p in params:
        value = given.get(p.name, p.default)
        if p.kind == "layer":
            choices = layers or LayerChoices(())
            value = value or choices.default
            if value not in choices.paths:
                raise ExplainError(
                    f"Layer {value!r} is not a conv layer of {choices.owner}; pick one of {', '.join(choices.paths)}."
                )
        else:
            value = p.coerce(value)
        out[p.name] = value
    return out


class Spec:
    """The base of every registry entry: declared facts, read by whoever needs them.

    Subclasses are frozen dataclasses with their own fields; the two every registry can rely on are `label`
    (how people read the entry) and, where it has any, `params` (its declared parameters) and `featured` (its rank
    among the defaults picked for a user who has not chosen; None: never picked by default)."""

    params: tuple[Param, ...] = ()
    featured: int | None = None
    # How a refusal of a parameter names the entry: by its `id` (methods: "ig has no parameter x"), or by its
    # `label` where people know it by that (attacks, projections: "t-SNE has no parameter x").
    names_params_by: ClassVar[str] = "id"

    def resolve_params(
        self, given: Mapping[str, Any] | None = None, layers: LayerChoices | None = None
    ) -> dict[str, Any]:
        """`given` checked against the declared parameters, defaults filled in (see `resolve_params`)."""
        return resolve_params(self._owner(), self.params, given, layers)

    def _owner(self) -> str:
        named = getattr(self, self.names_params_by, None)
        return str(named or getattr(self, "id", None) or getattr(self, "name", None) or getattr(self, "label", "it"))


S = TypeVar("S", bound=Spec)


def _by_id(spec: Any) -> Iterable[Hashable]:
    return (spec.id,)


class Registry(Generic[S]):
    """Entries of one kind, in registration order.

    `keys(spec)`: the keys an entry is found under (default: its `id`; a method with an image and a text
    implementation is found under (id, modality) for each); `error`: what a lookup of an unknown key raises;
    `unknown(key, known)`: that error's sentence; `check(spec)`: facts that contradict each other are a programming
    error, raised when the entry registers."""

    def __init__(
        self,
        kind: str,
        *,
        keys: Callable[[S], Iterable[Hashable]] = _by_id,
        error: type[Exception] = XaidashError,
        unknown: Callable[[Hashable, list[str]], str] | None = None,
        check: Callable[[S], None] | None = None,
    ) -> None:
        self.kind = kind
        self._keys = keys
        self._error = error
        self._unknown = unknown
        self._check = check
        self._entries: dict[Hashable, S] = {}

    def register(self, spec: S) -> S:
        if self._check is not None:
            self._check(spec)
        keys = list(self._keys(spec))
        for key in keys:
            if key in self._entries:
                raise ValueError(f"{self.kind} {key!r} registered twice")
        for key in keys:
            self._entries[key] = spec
        return spec

    def unregister(self, spec: S) -> None:
        """Remove an entry (tests that register a throwaway one)."""
        for key in list(self._keys(spec)):
            self._entries.pop(key, None)

    def find(self, key: Hashable) -> S | None:
        return self._entries.get(key)

    def get(self, key: Hashable) -> S:
        """The entry under `key`; the registry's error, naming the known ones, when there is none."""
        found = self._entries.get(key)
        if found is None:
            raise self._error(self.unknown_message(key))
        return found

    def unknown_message(self, key: Hashable, known: Iterable[str] | None = None) -> str:
        names = sorted({str(_first(k)) for k in self._entries}) if known is None else list(known)
        if self._unknown is not None:
            return self._unknown(key, names)
        return f"Unknown {self.kind} {key!r}. Known: {', '.join(names) or 'none'}."

    def all(self, where: Callable[[S], bool] | None = None) -> list[S]:
        """Every entry once (in registration order), those `where` accepts when given."""
        out: list[S] = []
        seen: set[int] = set()
        for spec in self._entries.values():
            if id(spec) not in seen and (where is None or where(spec)):
                seen.add(id(spec))
                out.append(spec)
        return out

    def featured(
        self, where: Callable[[S], bool] | None = None, *, among: Iterable[str] | None = None, limit: int | None = None
    ) -> list[S]:
        """The featured entries (`where` accepts, `id` in `among` when given), by rank then id; at most `limit`."""
        allowed = None if among is None else set(among)
        ranked = sorted(
            (
                s
                for s in self.all(where)
                if s.featured is not None and (allowed is None or str(getattr(s, "id", "")) in allowed)
            ),
            key=lambda s: (s.featured, str(getattr(s, "id", ""))),
        )
        return ranked[:limit]

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[S]:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self.all())


def _first(key: Hashable) -> Hashable:
    """A composite key's name part ((id, modality) -> id), for the list of known entries."""
    return key[0] if isinstance(key, tuple) and key else key
