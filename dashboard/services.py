"""What pages share across reruns and sessions: the job manager, loaded models, data splits, caches.

Streamlit caching lives here so pages stay short. Keys for a run include its folder and the
time its weights were written, so a retrained or resumed run is reloaded and two runs that
happen to share an id in different run roots never mix.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import os
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import streamlit as st
import torch

from xaidash.dashboard.jobs import JobManager
from xaidash.dashboard.replicas import ReplicaPool
from xaidash.data.errors import DatasetError, XaidashError, error_text
from xaidash.data.modalities.base import held_inputs
from xaidash.data.notes import collect_notes
from xaidash.data.registry import ImageSplit, Split, TextSplit, get_source, load_split
from xaidash.models.bundle import ModelBundle
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.loading import LM_FOLDER, load_language_model
from xaidash.models.language.model import LanguageModel
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import WEIGHTS, Run, load_bundle
from xaidash.models.training.process import train_in_process

GALLERY_LIMIT = 2000  # test samples whose predictions the gallery filters use
T = TypeVar("T")
M = TypeVar("M", ModelBundle, LanguageModel)

log = logging.getLogger(__name__)


@st.cache_resource(show_spinner=False)
def job_manager() -> JobManager:
    """The one training job manager of this server process, shared by every browser session. Each run trains
    in a child process, so page redraws do not slow it down and a crash there cannot take the server down."""
    return JobManager(train_fn=train_in_process)


def _weights_key(run: Run, weights: Path, tag: str = "") -> str:
    """Identifies a run's current weights: folder + modification time of its weights file."""
    try:
        stamp = weights.stat().st_mtime_ns
    except FileNotFoundError:
        stamp = 0
    return f"{run.path.resolve()}@{tag}{stamp}"


def run_key(run: Run) -> str:
    """Identifies a classifier run's current weights."""
    return _weights_key(run, run.file(WEIGHTS))


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


REPLICA_BUDGET_BYTES = 2 * 1024**3  # the most parameter memory one model's replicas may take together
MAX_REPLICAS = 3  # copies of one model that jobs can use at the same moment (XAIDASH_MODEL_REPLICAS overrides)
MAX_POOLS = 8  # models with replicas kept (the oldest pool is dropped, with its copies)


def replica_count(bundle: ModelBundle | LanguageModel) -> int:
    """How many copies of this model concurrent jobs may use: up to MAX_REPLICAS, fewer for a large model (its
    parameters counted: SmolLM2's 134.5M float32 parameters are 538 MB, so three fit the budget)."""
    size = sum(p.numel() * p.element_size() for p in bundle.model.parameters())
    try:
        most = int(os.environ.get("XAIDASH_MODEL_REPLICAS", MAX_REPLICAS))
    except ValueError:
        most = MAX_REPLICAS
    return int(max(1, min(most, REPLICA_BUDGET_BYTES // max(size, 1))))


@st.cache_resource(show_spinner=False)
def _pools() -> OrderedDict[str, ReplicaPool[Any]]:
    return OrderedDict()


_pools_guard = threading.Lock()


def replica_pool(key: str, bundle: M, factory: Callable[[], M] | None = None) -> ReplicaPool[M]:
    """The replicas of the model `key` names (dashboard/replicas.py): `bundle` itself first, then copies made by
    `factory`, or else of a pristine snapshot taken when the pool is made (before any job has hooked the model).
    A new weights version has a new key, hence a new pool."""
    with _pools_guard:
        pools = _pools()
        if key not in pools:
            size = replica_count(bundle)
            if factory is None:
                template = copy.deepcopy(bundle) if size > 1 else bundle
                factory = lambda: copy.deepcopy(template)  # noqa: E731
            pools[key] = ReplicaPool(factory, size, first=bundle)
            while len(pools) > MAX_POOLS:
                pools.popitem(last=False)
        pools.move_to_end(key)
        return pools[key]


@contextmanager
def lease(
    key: str,
    bundle: ModelBundle,
    on_wait: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[ModelBundle]:
    """A copy of the model for the job's own use inside the block: methods that hook layers or switch
    train/eval flags never run on a model another session is using, and a short job waits for another
    session's long one only when every replica is busy (then `on_wait(jobs_ahead)` hears its place in the
    queue; LeaseCancelled when `cancelled()` says the user gave up)."""
    with replica_pool(key, bundle).lease(on_wait, cancelled) as replica:
        yield replica


@st.cache_resource(max_entries=6, show_spinner=False)
def dataset_split(name: str, split: str) -> Split:
    """A data set split, loaded once per process (offline: only what is under the data root). Its notes are the
    sidebar's warning box (`dataset_notes`), not Python warnings in the server's log."""
    with collect_notes():
        return load_split(name, split)  # type: ignore[arg-type]


@st.cache_data(ttl=60, show_spinner=False)
def dataset_notes(name: str) -> tuple[str, ...]:
    """What a data set of the user's own noted when read (files skipped, links left out, an encoding guessed, values
    filled); () for a built-in one, and for one that cannot be read now (the page that loads it says why)."""
    try:
        with collect_notes():
            return tuple(getattr(get_source(name), "notes", ()))
    except DatasetError:
        return ()


def image_split(name: str, split: str) -> ImageSplit:
    """`dataset_split` of a data set of images (DatasetError when it holds another kind of input)."""
    data = dataset_split(name, split)
    if not isinstance(data, ImageSplit):
        raise DatasetError(f"{name} holds {held_inputs(name)}, not images.")
    return data


def text_split(name: str, split: str) -> TextSplit:
    """`dataset_split` of a data set of texts (DatasetError when it holds another kind of input)."""
    data = dataset_split(name, split)
    if not isinstance(data, TextSplit):
        raise DatasetError(f"{name} holds {held_inputs(name)}, not texts.")
    return data


@st.cache_data(max_entries=8, show_spinner=False)
def test_predictions(key: str, _bundle_obj: ModelBundle, limit: int = GALLERY_LIMIT) -> np.ndarray:
    """Class probabilities (N, classes) for the first `limit` test samples (for the gallery's filters)."""
    split = dataset_split(_bundle_obj.info.name, "test")
    n = min(len(split), limit)
    with lease(key, _bundle_obj) as bundle:
        return bundle.predict_proba(bundle.adapter.items(split, range(n))).numpy()


def _hash_into(h: Any, value: Any) -> None:
    """Feed `value` into the hash `h`: a text, a number or None, a tensor or array, a dataclass's fields (a graph
    input: its graph and node) or a mapping-like object's items (a PyG graph's `to_dict()`), in a fixed order."""
    if isinstance(value, str):
        h.update(b"s" + value.encode("utf-8"))
    elif value is None or isinstance(value, bool | int | float):
        h.update(f"v{value!r}".encode())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            h.update(f"f{f.name}".encode())
            _hash_into(h, getattr(value, f.name))
    elif callable(getattr(value, "to_dict", None)):
        items = value.to_dict()
        for name in sorted(items):
            h.update(f"k{name}".encode())
            _hash_into(h, items[name])
    else:
        a = np.ascontiguousarray(torch.as_tensor(value).detach().cpu().numpy())
        h.update(str((a.shape, a.dtype)).encode())
        h.update(a.tobytes())


def content_key(value: Any) -> str:
    """A short hash of an input (tensor, array, text, or a structured input such as a graph and its node) for cache
    keys."""
    h = hashlib.sha1()
    _hash_into(h, value)
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


# ---- generative language models ----------------------------------------------------------------------------------
def lm_weights(run: Run) -> Path:
    return run.path / LM_FOLDER / "model.safetensors"


def lm_key(run: Run) -> str:
    """Identifies a language model's current weights (its converted weights file)."""
    return _weights_key(run, lm_weights(run), "lm")


@st.cache_resource(max_entries=2, show_spinner=False)
def _language_model(key: str, path: str) -> LanguageModel:
    return load_language_model(Run(Path(path)), device="auto")


def language_model_for(run: Run) -> LanguageModel:
    """The run's language model on the best device, loaded once per weights version (0.2-0.5 s for SmolLM2)."""
    if not lm_weights(run).is_file():
        raise ModelError(f"Run {run.id} has no converted weights ({LM_FOLDER}/model.safetensors): import it again.")
    return _language_model(lm_key(run), str(run.path))


@contextmanager
def lease_lm(
    run: Run,
    lm: LanguageModel,
    on_wait: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[LanguageModel]:
    """A copy of the language model for the job's own use (methods hook its layers). Copies beyond the first are
    loaded again from the run folder (0.5 s), not deep-copied from a snapshot: no idle 540 MB template is kept.
    The pool counts the parameters (`replica_count`): SmolLM2 gets 3 replicas, so two sessions work at once."""
    key = lm_key(run)
    factory = lambda: load_language_model(Run(run.path), device="auto")  # noqa: E731
    with replica_pool(key, lm, factory).lease(on_wait, cancelled) as replica:
        yield replica


@st.cache_resource(show_spinner=False)
def lm_cache() -> LRUCache:
    """(tag, language model weights, inputs, settings) -> prompts, generations, explanations, lenses, attention."""
    return LRUCache(128)


@dataclass(frozen=True)
class ImportSnapshot:
    """A background language-model import as pages see it: state idle | running | completed | failed."""

    source: str
    state: str
    started: float | None
    finished: float | None
    run_id: str | None
    error: str | None

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started


class BackgroundImport:
    """One `import_language_model` at a time in a thread of the server, shared by every session (Home's
    "Get SmolLM2" button): the page redraws its progress from `snapshot()` and finds the run when it ends. Plain
    threading: the job manager (jobs.py) trains runs, it does not import them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap = ImportSnapshot("", "idle", None, None, None, None)
        self._thread: threading.Thread | None = None

    def snapshot(self) -> ImportSnapshot:
        with self._lock:
            return self._snap

    def start(self, source: str) -> bool:
        """Start importing `source` (False when an import is already running)."""
        with self._lock:
            if self._snap.state == "running":
                return False
            self._snap = ImportSnapshot(source, "running", time.time(), None, None, None)
            self._thread = threading.Thread(target=self._work, args=(source,), name="xaidash-lm-import", daemon=True)
            self._thread.start()
        return True

    def _work(self, source: str) -> None:
        run_id, error = None, None
        try:
            run_id = import_language_model(source).id  # looked up here, so tests can swap it
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            if not isinstance(e, XaidashError):
                log.error("language model import of %s crashed:\n%s", source, traceback.format_exc())
            error = error_text(e, "the import")
        with self._lock:
            self._snap = ImportSnapshot(
                source, "failed" if error else "completed", self._snap.started, time.time(), run_id, error
            )

    def wait(self, timeout: float | None = None) -> ImportSnapshot:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.snapshot()


@st.cache_resource(show_spinner=False)
def language_import() -> BackgroundImport:
    """The server's one background language-model import."""
    return BackgroundImport()
