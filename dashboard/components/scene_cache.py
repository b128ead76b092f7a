"""What the Scenes page keeps across reruns and sessions: the loaded scene model, the test split of its data set,
predictions and explanations. Keys for a run hold its folder and the time its weights were written, so a resumed or
retrained run is loaded again (the pattern of `dashboard/services.py`, kept here so that file stays the classifiers')."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import streamlit as st

from xaidash.dashboard.services import LRUCache, run_key
from xaidash.data.scenes.registry import load_scene_set
from xaidash.data.scenes.types import SceneSplit
from xaidash.models.runs.store import Run
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.loading import load_scene_run

T = TypeVar("T")


@st.cache_resource(max_entries=3, show_spinner=False)
def _scene_bundle(key: str, path: str) -> SceneBundle:
    return load_scene_run(Run(Path(path)), device="auto")


def scene_bundle(run: Run) -> tuple[str, SceneBundle]:
    """(key, the run's model on the best device), loaded once per weights version; one-line ModelError for a run
    without usable weights (`load_scene_run` says which)."""
    key = run_key(run)
    return key, _scene_bundle(key, str(run.path))


@st.cache_resource(max_entries=4, show_spinner=False)
def scene_test_split(name: str) -> SceneSplit:
    """The test split of scene set `name`, read once per process (the page never changes it)."""
    return load_scene_set(name, "test")


@st.cache_resource(show_spinner=False)
def scene_results() -> LRUCache:
    """(model, scene, ...) -> predictions and explanations, for every session."""
    return LRUCache(256)


def cached(key: tuple[Any, ...], compute: Callable[[], T]) -> tuple[T, bool]:
    """`compute()`'s value for `key`, computed once; (value, whether it was a cache hit)."""
    value, hit = scene_results().get_or_compute(key, compute)
    return value, hit


def stored(key: tuple[Any, ...]) -> Any | None:
    """What `keep` stored under `key`, or None."""
    return scene_results().get(key)


def keep(key: tuple[Any, ...], value: Any) -> None:
    scene_results().put(key, value)


@st.cache_resource(show_spinner=False)
def _locks() -> dict[str, threading.Lock]:
    return {}


_locks_guard = threading.Lock()


@contextmanager
def model_lock(key: str) -> Iterator[None]:
    """One job at a time on one loaded model: CAMs hook its layers, and two sessions' hooks must not mix."""
    with _locks_guard:
        lock = _locks().setdefault(key, threading.Lock())
    with lock:
        yield
