"""The one session (explainers/session.py): each method in order, a method computed before reused from the cache, a
failure reported in one line while the others go on, progress before each method and at the end, a page's stop
passing straight through; and a classifier's session with a lease and a cache, as the pages run it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers methods)
from xaidash.data.registry import get_source
from xaidash.explainers.session import MethodResult, explain_session, run_session
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


class Cache:
    """A dictionary with the session's `get_or_compute`."""

    def __init__(self) -> None:
        self.data: dict[Hashable, Any] = {}

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> tuple[Any, bool]:
        if key in self.data:
            return self.data[key], True
        self.data[key] = value = compute()
        return value, False


def test_cached_methods_are_reused_and_a_failure_does_not_stop_the_others() -> None:
    computed: list[str] = []

    def compute(method: str) -> int:
        computed.append(method)
        if method == "bad":
            raise ValueError("no such thing")
        return len(method)

    cache, seen, done = Cache(), [], []
    first = run_session(
        ["a", "bad", "ccc"],
        compute,
        label=str.upper,
        cache=cache,
        key=lambda m: ("k", m),
        progress=lambda fraction, text: seen.append((fraction, text)),
        done=done.append,
    )
    assert [(o.method, o.value, o.error, o.cached) for o in first] == [
        ("a", 1, None, False),
        # An unexpected error in plain words, under the method's label: never Python's class name (issue 36).
        (
            "bad",
            None,
            "an unexpected error in BAD: no such thing; the other methods went on; try other parameters for it",
            False,
        ),
        ("ccc", 3, None, False),
    ]
    assert isinstance(first[1].exception, ValueError) and not first[1].ok and first[0].ok
    assert done == first  # told after each method, in order
    assert seen == [
        (0.0, "Explaining with A (1/3)…"),
        (1 / 3, "Explaining with BAD (2/3)…"),
        (2 / 3, "Explaining with CCC (3/3)…"),
        (1.0, "Done"),
    ]
    again = run_session(["a", "bad", "ccc"], compute, cache=cache, key=lambda m: ("k", m))
    assert computed == ["a", "bad", "ccc", "bad"]  # only the failure (never cached) runs again
    assert [(o.value, o.cached) for o in again] == [(1, True), (None, False), (3, True)]


def test_a_page_stop_passes_through_and_keeps_what_finished() -> None:
    class Rerun(BaseException):  # what Streamlit raises to rerun or stop a page
        pass

    def compute(method: str) -> str:
        if method == "second":
            raise Rerun
        return method

    cache = Cache()
    with pytest.raises(Rerun):
        run_session(["first", "second", "third"], compute, cache=cache, key=lambda m: m)
    assert cache.data == {"first": "first"}


def test_a_classifier_session_leases_only_what_it_computes() -> None:
    torch.manual_seed(0)
    info = get_source("shapes").info
    image_bundle = ModelBundle(
        build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu")
    )
    leases: list[str] = []

    @contextlib.contextmanager
    def lease(method: str) -> Iterator[Any]:
        leases.append(method)
        yield image_bundle

    x = torch.rand(2, *image_bundle.info.input_shape)
    methods = {"saliency": {}, "ig": {"steps": -1}}
    cache = Cache()
    results = explain_session(image_bundle, x, methods, cache=cache, key=lambda m: m, lease=lease, run="B")
    assert [type(r) for r in results] == [MethodResult, MethodResult]
    ok, bad = results
    assert ok.explanation is not None and ok.error is None and ok.run == "B" and not ok.cached
    assert bad.explanation is None and "steps" in (bad.error or "") and bad.exception is not None
    again = explain_session(image_bundle, x, methods, cache=cache, key=lambda m: m, lease=lease)
    assert again[0].cached and again[0].explanation is ok.explanation
    assert leases == ["saliency", "ig", "ig"]  # the cached method leased no model
