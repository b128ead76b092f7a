"""One session: the chosen methods run on the chosen inputs, one after another, each in its guarded call (see
`guard.py`), reusing a cache when the caller has one, reporting progress, and keeping one method's failure from
stopping the others. Every caller that runs several methods goes through `run_session`: `xaidash explain`, the
Explain, Compare and Side by side pages, the whole-data-set engines (`explain_session` for classifiers) and the
Generate page and `xaidash generate` (prompt methods on a model-free query: `explainers/language/api.prompt_session`).
A page computes each method on its leased replica of the model (`lease`), and only the methods its cache lacks.

`run_session` knows nothing of models or inputs: it takes the methods and one `compute(method)` per caller. A
method's result, or the one line that says why it failed, is an `Outcome`; a classifier's session gives each
method's `MethodResult` (its explanation of every input, its per-input metrics and their errors), what reports are
built from."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import torch

from xaidash.data.errors import error_text
from xaidash.data.modalities import GroundTruth
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.scoring import ScoredExplanation, explain_and_score
from xaidash.models.bundle import ModelBundle

T = TypeVar("T")
M = TypeVar("M")
Progress = Callable[[float, str], object]  # (fraction done, message); what it returns is ignored (a page's bar)
# lease(method): the model a computed method runs on, held while it runs (a page's leased replica); the session's
# own model when a caller gives none. A method taken from the cache leases nothing.
Lease = Callable[[str], AbstractContextManager[M]]


class Cache(Protocol):
    """What a session's cache offers: the value under `key`, computed (and kept) when missing; (value, was it kept)."""

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> tuple[Any, bool]: ...


def error_line(err: BaseException, where: str = "") -> str:
    """The one line a failed method (or metric) is reported with: our own error's message, or an unexpected one
    worded in plain words (data/errors.py `error_text`), never with Python's class name."""
    return error_text(err, where, then="the other methods went on; try other parameters for it")


@dataclass
class Outcome(Generic[T]):
    """One method's part of a session: its `value`, or the `error` line (and the exception) that stopped it;
    whether the value came from the cache, and the wall time it took here (about 0 when cached)."""

    method: str
    value: T | None = None
    error: str | None = None
    exception: BaseException | None = None
    cached: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def run_session(
    methods: Sequence[str],
    compute: Callable[[str], T],
    *,
    label: Callable[[str], str] = str,
    cache: Cache | None = None,
    key: Callable[[str], Hashable] | None = None,
    progress: Progress | None = None,
    done: Callable[[Outcome[T]], None] | None = None,
) -> list[Outcome[T]]:
    """Each method's `compute(method)` in order, as an `Outcome`; a method that raises is reported and the others go
    on. With a `cache` and a `key(method)`, a method computed before is reused. `progress(fraction, message)` is told
    before each method and at the end; `done(outcome)` after each (the CLI prints a line per method).

    Only `Exception`s are caught: a page's rerun or stop (Streamlit's, a `BaseException`) still ends the session at
    once, keeping the methods finished before it in the cache."""
    outcomes: list[Outcome[T]] = []
    total = len(methods)
    for j, method in enumerate(methods):
        if progress is not None:
            progress(j / max(total, 1), f"Explaining with {label(method)} ({j + 1}/{total})…")
        start = time.perf_counter()
        try:
            if cache is not None and key is not None:
                value, hit = cache.get_or_compute(key(method), lambda m=method: compute(m))  # type: ignore[misc]
            else:
                value, hit = compute(method), False
            outcome: Outcome[T] = Outcome(method, value, cached=hit, seconds=time.perf_counter() - start)
        except Exception as err:  # noqa: BLE001 - one method failing must not hide the others
            outcome = Outcome(
                method, error=error_line(err, label(method)), exception=err, seconds=time.perf_counter() - start
            )
        outcomes.append(outcome)
        if done is not None:
            done(outcome)
    if progress is not None:
        progress(1.0, "Done")
    return outcomes


@dataclass
class MethodResult:
    """One method's part of a classifier's session, what a report is built from: its explanation of every input (or
    the error that stopped it, and the exception a page shows with its details), its per-input metrics and the metrics
    it could not compute, whether it came from a cache, its wall time, and which model it explained ("A", or "B"
    beside it on Side by side)."""

    method: str
    explanation: Explanation | None = None
    metrics: Mapping[str, Sequence[float]] = field(default_factory=dict)
    metric_errors: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    cached: bool = False
    wall_seconds: float | None = None
    run: str = "A"
    exception: BaseException | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Scoring:
    """How a classifier's session scores its maps: `page` says which metrics (those the metric registry declares
    for 'explain' or 'compare'; None: none), `metrics` which of those (None: every one), `truth` the inputs' ground
    truth, `steps` the deletion and insertion curves' points."""

    page: str | None = "explain"
    truth: GroundTruth = field(default_factory=GroundTruth)
    steps: int = CURVE_STEPS
    metrics: frozenset[str] | None = None  # only these of the page's metrics (Compare's choice); None: all of them


def explain_session(
    bundle: ModelBundle,
    raw: Any,
    methods: Mapping[str, Mapping[str, Any]],
    *,
    target: int | Sequence[int] | None = None,
    scoring: Scoring | None = None,
    background: torch.Tensor | None = None,
    batch_size: int = 256,
    seed: int = 0,
    cache: Cache | None = None,
    key: Callable[[str], Hashable] | None = None,
    progress: Progress | None = None,
    done: Callable[[Outcome[ScoredExplanation]], None] | None = None,
    label: Callable[[str], str] = str,
    run: str = "A",
    lease: Lease[ModelBundle] | None = None,
) -> list[MethodResult]:
    """Every method (id -> its parameters) on the batch `raw` for `target` (None: each input's predicted class),
    each explanation scored as `scoring` says (no metrics when None), as a `run_session`; a computed method runs on
    `lease(method)` when given (a page's leased replica of `bundle`), else on `bundle`."""
    how = scoring or Scoring(page=None)
    held = lease or own(bundle)

    def compute(method: str) -> ScoredExplanation:
        with held(method) as model:
            return explain_and_score(
                model,
                raw,
                method,
                dict(methods[method]),
                target,
                with_metrics=how.page is not None,
                masks=how.truth.masks,
                rationales=how.truth.rationales,
                background=background,
                steps=how.steps,
                batch_size=batch_size,
                seed=seed,
                page=how.page or "explain",
                metrics=how.metrics,
            )

    outcomes = run_session(list(methods), compute, label=label, cache=cache, key=key, progress=progress, done=done)
    return [result_of(o, run) for o in outcomes]


def own(model: M) -> Lease[M]:
    """The lease of a model the caller holds already: every method runs on `model` itself."""
    return lambda method: contextlib.nullcontext(model)


def result_of(outcome: Outcome[ScoredExplanation], run: str = "A") -> MethodResult:
    """A classifier method's `Outcome` as the `MethodResult` a report takes."""
    scored = outcome.value
    if scored is None:
        return MethodResult(
            outcome.method, error=outcome.error, wall_seconds=outcome.seconds, run=run, exception=outcome.exception
        )
    return MethodResult(
        outcome.method,
        scored.explanation,
        scored.metrics,
        scored.metric_errors,
        cached=outcome.cached,
        wall_seconds=outcome.seconds,
        run=run,
    )
