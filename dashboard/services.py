"""What pages share across reruns and sessions: the job manager, loaded models, data splits, caches.

Streamlit caching lives here so pages stay short. Keys for a run include its folder and the
time its weights were written, so a retrained or resumed run is reloaded and two runs that
happen to share an id in different run roots never mix.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import streamlit as st
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.registry import ImageSplit, Split, TextSplit, load_split
from xaidash.models.bundle import ModelBundle
from xaidash.models.jobs import JobManager
from xaidash.models.registry import ModelError
from xaidash.models.runstore import WEIGHTS, Run, load_bundle
from xaidash.models.train_process import train_in_process

GALLERY_LIMIT = 2000  # test samples whose predictions the gallery filters use
T = TypeVar("T")


@st.cache_resource(show_spinner=False)
def job_manager() -> JobManager:
    """The one training job manager of this server process, shared by every browser session. Each run trains
    in a child process, so page redraws do not slow it down and a crash there cannot take the server down."""
    return JobManager(train_fn=train_in_process)


def run_key(run: Run) -> str:
    """Identifies a run's current weights: folder + modification time of the weights file."""
    try:
        stamp = run.file(WEIGHTS).stat().st_mtime_ns
    except FileNotFoundError:
        stamp = 0
    return f"{run.path.resolve()}@{stamp}"


@st.cache_resource(max_entries=4, show_spinner=False)
def _bundle(key: str, path: str) -> ModelBundle:
    return load_bundle(Run(Path(path)), device="auto")


def bundle_for(run: Run) -> ModelBundle:
    """The run's model on the best device, loaded once per weights version (ModelError when it has no weights yet)."""
    if not run.file(WEIGHTS).exists():
        state = run.summary().get("state", "unknown")
        raise ModelError(
            f"Run {run.id} has no weights yet (state: {state}): a run writes them after its first epoch. "
            "Wait for it, or pick another run on the Train page."
        )
    return _bundle(run_key(run), str(run.path))


@st.cache_resource(show_spinner=False)
def _locks() -> dict[str, threading.Lock]:
    return {}


_locks_guard = threading.Lock()


def model_lock(key: str) -> threading.Lock:
    """One lock per loaded model: sessions share the model object, and methods that hook its layers
    (Grad-CAM, DeepLift, sanity checks) must not run on it at the same time."""
    with _locks_guard:
        return _locks().setdefault(key, threading.Lock())


@st.cache_resource(max_entries=6, show_spinner=False)
def dataset_split(name: str, split: str) -> Split:
    """A data set split, loaded once per process (offline: only what is under the data root)."""
    return load_split(name, split)  # type: ignore[arg-type]


def image_split(name: str, split: str) -> ImageSplit:
    """`dataset_split` of a data set of images (DatasetError when it holds texts)."""
    data = dataset_split(name, split)
    if not isinstance(data, ImageSplit):
        raise DatasetError(f"{name} holds texts, not images.")
    return data


def text_split(name: str, split: str) -> TextSplit:
    """`dataset_split` of a data set of texts (DatasetError when it holds images)."""
    data = dataset_split(name, split)
    if not isinstance(data, TextSplit):
        raise DatasetError(f"{name} holds images, not texts.")
    return data


@st.cache_data(max_entries=8, show_spinner=False)
def test_predictions(key: str, _bundle_obj: ModelBundle, limit: int = GALLERY_LIMIT) -> np.ndarray:
    """Class probabilities (N, classes) for the first `limit` test samples (for the gallery's filters)."""
    split = dataset_split(_bundle_obj.info.name, "test")
    n = min(len(split), limit)
    with model_lock(key):
        if isinstance(split, TextSplit):
            return _bundle_obj.predict_proba(split.texts[:n]).numpy()
        return _bundle_obj.predict_proba(split.batch(range(n))).numpy()


def content_key(value: Any) -> str:
    """A short hash of an input (tensor, array or text) for cache keys."""
    h = hashlib.sha1()
    if isinstance(value, str):
        h.update(b"s" + value.encode("utf-8"))
    else:
        a = np.ascontiguousarray(torch.as_tensor(value).detach().cpu().numpy())
        h.update(str((a.shape, a.dtype)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


class LRUCache:
    """A small thread-safe LRU map that tells a hit from a miss (pages show which results were reused)."""

    def __init__(self, max_entries: int = 128):
        self.max_entries = max_entries
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> tuple[T, bool]:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key], True
        value = compute()  # outside the lock: other sessions keep reading while this computes
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
        return value, False

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        self.get_or_compute(key, lambda: value)

    def __len__(self) -> int:
        return len(self._data)


@st.cache_resource(show_spinner=False)
def explanation_cache() -> LRUCache:
    """(run, inputs, method, parameters, targets, metric settings) -> explanation and metrics, for every session."""
    return LRUCache(256)


@st.cache_resource(show_spinner=False)
def comparison_cache() -> LRUCache:
    """(run, sample, methods, settings) -> explainers.compare.Comparison."""
    return LRUCache(16)
