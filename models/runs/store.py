"""Run store: one folder per training run under the runs root.

    <runs root>/<run id>/
        config.json          model, dataset (classes, shapes, normalisation), hyperparameters, versions, device
        metrics.jsonl        one JSON record per logged step and per epoch
        summary.json         state (running/completed/stopped/failed), error, final test metrics
        confusion.npy        the test confusion matrix when it has more than CONFUSION_INLINE_MAX classes
                             (smaller ones stay in summary.json, as older runs have them)
        .lock                the live process that writes the run (models/runs/lock.py)
        model.safetensors    the latest weights
        checkpoints/epoch_NNN.safetensors   weights after each epoch
        train_state.safetensors             optimizer + RNG state for resuming
        vocab.json           word vocabulary (text models trained from scratch)

Every write is atomic (temporary file, then rename); nothing is ever unpickled.

A summary's `running` is what the writer said, not a fact: `run_liveness` checks the run's lock (its owner's
pid on this host, its heartbeat from another) and reports a run whose writer is gone as `interrupted`, with
what it kept and how to go on. Every place that shows a state (xaidash runs, the runs table, the sidebar)
reads it from there. Listing, opening or resuming a run whose writer is gone also makes its folder say so
(models/runs/tidy.py): its `running` summary becomes `interrupted` with `interrupted_at`, and the temporary files of
the write the writer was in the middle of are removed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from xaidash.data.atomic import atomic_write_bytes, atomic_write_json
from xaidash.data.registry import DatasetInfo, Forecast, GraphFacts, RegressionTarget, TableColumn
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import pick_device
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runs import schema as run_schema
from xaidash.models.runs.checkpoint import load_weights, nonfinite_tensors
from xaidash.models.runs.files import CHECKPOINTS, CONFIG, CONFUSION, METRICS, SUMMARY, VOCAB, WEIGHTS
from xaidash.models.runs.files import STATE as STATE  # re-exported: the engine and the pages import it from here
from xaidash.models.runs.lock import RunLocked, writer_of
from xaidash.models.runs.tidy import settle_run

# What a run holds (`Run.kind`), told by a key of its config.json: a model imported from elsewhere records its
# `source`, a generative language model its `language_model`, a detector or segmenter of scenes its `scene_model`
# (models/scenes); a classifier trained here has none of them.
RunKind = Literal["trained", "imported", "language_model", "scene_model"]
IMPORTED_MARK = "source"
LANGUAGE_MARK = "language_model"
SCENE_MARK = "scene_model"
LM_WEIGHTS = "lm/model.safetensors"  # a language model's converted weights, inside its run folder
# Confusion matrices with more classes than this go to confusion.npy: 1,000 classes as JSON made a 9 MB summary
# that every page and every `xaidash runs` parsed.
CONFUSION_INLINE_MAX = 50


@functools.lru_cache(maxsize=1024)
def _kind_of(path: Path, stamp: int) -> RunKind:
    config = Run(path).config()
    if LANGUAGE_MARK in config:
        return "language_model"
    if SCENE_MARK in config:
        return "scene_model"
    return "imported" if IMPORTED_MARK in config else "trained"


def runs_root() -> Path:
    """$XAIDASH_RUNS, else $XDG_DATA_HOME/xaidash/runs (~/.local/share/xaidash/runs)."""
    env = os.environ.get("XAIDASH_RUNS")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "xaidash" / "runs"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "run"


def info_to_json(info: DatasetInfo) -> dict[str, Any]:
    return asdict(info)


def _column(obj: dict[str, Any]) -> TableColumn:
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in obj.items()}
    return TableColumn(**values)


def info_from_json(obj: dict[str, Any]) -> DatasetInfo:
    """The DatasetInfo a config.json's dataset_info describes, as `Run.config` returns it (its schema,
    schema.DATASET_INFO, requires the DatasetInfo fields that have no default and refuses every other key)."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in obj.items()}  # JSON lists -> tuples
    fields["columns"] = tuple(_column(c) for c in obj.get("columns", ()))
    if obj.get("regression") is not None:
        fields["regression"] = RegressionTarget(**obj["regression"])
    if obj.get("forecast") is not None:
        fields["forecast"] = Forecast(**obj["forecast"])
    if obj.get("graph") is not None:
        fields["graph"] = GraphFacts(**{**obj["graph"], "feature_names": tuple(obj["graph"]["feature_names"])})
    return DatasetInfo(**fields)


@dataclass
class Run:
    """A run folder and the small typed reads and writes the engine and pages need."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def kind(self) -> RunKind:
        """'trained' (a classifier trained here), 'imported' (a classifier trained elsewhere), 'language_model'
        (a generative language model) or 'scene_model' (a detector or segmenter of scenes, models/scenes), from
        config.json, read once per version of it. ModelError when that file is missing or damaged."""
        try:
            stamp = self.file(CONFIG).stat().st_mtime_ns
        except OSError:
            stamp = -1
        return _kind_of(self.path, stamp)

    @property
    def usable(self) -> bool:
        """Whether the run holds a model worth opening now: a language model's converted weights, or a classifier's
        or scene model's weights that are not changing and are finite (`has_usable_weights`). False for an unreadable
        run."""
        try:
            kind = self.kind
        except ModelError:
            return False
        if kind == "language_model":
            return self.file(LM_WEIGHTS).is_file()
        return has_usable_weights(self)

    # ---- creation -------------------------------------------------------------
    @classmethod
    def create(cls, dataset: str, model: str, root: Path | None = None) -> Run:
        root = Path(root) if root else runs_root()
        root.mkdir(parents=True, exist_ok=True)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(dataset)}-{_slug(model)}"
        for n in range(1000):
            path = root / (stem if n == 0 else f"{stem}-{n}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise ModelError(f"Could not create a run folder under {root}.")

    # ---- files ----------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def checkpoint_path(self, epoch: int) -> Path:
        return self.path / CHECKPOINTS / f"epoch_{epoch:03d}.safetensors"

    def checkpoints(self) -> list[tuple[int, Path]]:
        """(epoch, path) of every per-epoch checkpoint, in order."""
        out = []
        for p in sorted((self.path / CHECKPOINTS).glob("epoch_*.safetensors")):
            m = re.match(r"epoch_(\d+)\.safetensors$", p.name)
            if m:
                out.append((int(m.group(1)), p))
        return out

    def _read_json(self, name: str) -> Any:
        """A JSON file of the run; ModelError naming it when it is not UTF-8 JSON (or absurdly nested)."""
        path = self.file(name)
        where = f"{self.id}/{name}"  # as run_schema.check names a file: the same one line for every damage
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as e:
            raise ModelError(f"{where} is damaged: not UTF-8 text ({e.reason} at byte {e.start}).") from None
        except json.JSONDecodeError as e:
            raise ModelError(f"{where} is damaged: not JSON ({e}).") from None
        except RecursionError:
            raise ModelError(f"{where} is damaged: nested too deeply to be a run file.") from None

    def config(self) -> dict[str, Any]:
        """config.json, checked against its schema (models/runs/schema.py): ModelError naming the field."""
        if not self.file(CONFIG).is_file():
            raise ModelError(f"{self.path} is not a run folder (no {CONFIG}).")
        config = self._read_json(CONFIG)
        run_schema.check(config, run_schema.CONFIG, self.file(CONFIG))
        return config

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_json(self.file(CONFIG), config)

    def summary(self) -> dict[str, Any]:
        """summary.json ({} while there is none, or when a torn write left it unreadable); ModelError naming the
        field when it breaks its schema."""
        try:
            summary = self._read_json(SUMMARY)
        except (FileNotFoundError, ModelError):
            return {}
        run_schema.check(summary, run_schema.SUMMARY, self.file(SUMMARY))
        return summary

    def update_summary(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into summary.json. A `confusion` matrix of more than CONFUSION_INLINE_MAX classes is
        written to confusion.npy instead (the summary then names that file); read it back with `confusion()`."""
        if "confusion" in fields:
            fields.update(self._store_confusion(fields.pop("confusion")))
        summary = {**self.summary(), **fields, "updated": time.time()}
        if summary.get("state") != "interrupted":  # a resumed run is no longer interrupted
            summary.pop("interrupted_at", None)
        atomic_write_json(self.file(SUMMARY), summary)
        return summary

    def _store_confusion(self, matrix: Any) -> dict[str, Any]:
        """The summary fields for a confusion matrix: inline when small, else a file beside the summary."""
        if matrix is None or len(matrix) <= CONFUSION_INLINE_MAX:
            if self.file(CONFUSION).exists():
                self.file(CONFUSION).unlink()
            return {
                "confusion": None if matrix is None else [[int(v) for v in row] for row in matrix],
                "confusion_file": None,
            }
        m = np.asarray(matrix)
        m = m.astype(np.int32 if m.size == 0 or int(m.max()) < 2**31 else np.int64)
        buffer = io.BytesIO()
        np.save(buffer, m, allow_pickle=False)
        atomic_write_bytes(self.file(CONFUSION), buffer.getvalue())
        return {"confusion": None, "confusion_file": CONFUSION}

    def confusion(self, summary: dict[str, Any] | None = None) -> np.ndarray | None:
        """The test confusion matrix [true][predicted] (from summary.json or confusion.npy), or None when the run
        has none or its file is damaged or does not match its classes."""
        s = self.summary() if summary is None else summary
        if s.get("confusion"):
            return np.asarray(s["confusion"], dtype=np.int64)
        if s.get("confusion_file") != CONFUSION:
            return None
        try:
            m = np.load(self.file(CONFUSION), allow_pickle=False)
        except (OSError, ValueError):
            return None
        if m.ndim != 2 or m.shape[0] != m.shape[1] or not np.issubdtype(m.dtype, np.integer):
            return None
        return m

    def metrics(self) -> list[dict[str, Any]]:
        """All metric records; a torn or corrupt line is skipped, not fatal."""
        try:
            lines = self.file(METRICS).read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(record, dict):  # a bare number or list is as corrupt as a torn line
                out.append(record)
        return out

    def write_metrics(self, records: list[dict[str, Any]]) -> None:
        atomic_write_bytes(self.file(METRICS), "".join(json.dumps(r) + "\n" for r in records).encode())

    @property
    def info(self) -> DatasetInfo:
        """The data set the run's model was built for (config.json's dataset_info, checked by the schema)."""
        return self.info_in(self.config())

    def info_in(self, config: dict[str, Any]) -> DatasetInfo:
        """The DatasetInfo of this run's `config` (as `config()` read it); ModelError naming the file when it has
        none (listing a run does not need one, loading it does)."""
        if "dataset_info" not in config:
            raise ModelError(f"{self.id}/{CONFIG} is damaged: dataset_info is missing.")
        return info_from_json(config["dataset_info"])

    def tokenizer(self) -> Any:
        """The run's tokenizer: its saved word vocabulary or the model's pretrained tokenizer."""
        loader = _loader(self)
        if loader is not None:  # an imported model: its tokenizer files are in the run folder
            return loader.tokenizer(self)
        spec = get_spec(self.config()["model"])
        if spec.tokenizer is not None:
            return spec.tokenizer()
        if self.file(VOCAB).exists():
            return self.vocab()
        return None

    def vocab(self) -> Any:
        """vocab.json as a WordVocab, checked against its schema: ModelError naming the file and the field."""
        from xaidash.data.tokenizer import WordVocab

        document = self._read_json(VOCAB)
        run_schema.check(document, run_schema.VOCAB, self.file(VOCAB))
        return WordVocab.from_json(document)


def _run_in_root(name: str, root: Path) -> Path:
    """The folder of run `name` inside `root`; ModelError for anything that is not a plain name there."""
    bad = (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or "\x00" in name
    )
    if bad:
        raise ModelError(
            f"{name!r} is not a run id: run ids are folder names inside the runs root {root} "
            "(list them with: xaidash runs)."
        )
    folder = root / name
    if folder.is_symlink() or (folder.exists() and folder.resolve().parent != root.resolve()):
        raise ModelError(f"Run {name!r} is a link that leads out of the runs root {root}: refused.")
    return folder


def resolve_run(run: str | Path, root: Path | None = None) -> Run:
    """A run by id (a folder name inside the runs root), or 'latest' (the newest run with usable weights). A path is accepted only when it is a run
    folder directly inside the runs root: ids never reach outside it (no '..', separators elsewhere, links out)."""
    root = Path(root) if root else runs_root()
    if str(run) == "latest":  # the newest run with usable weights (has_usable_weights)
        runs = list_runs(root)
        if not runs:
            raise ModelError(f"No runs under {root}: train one first (xaidash train).")
        usable = next((r for r in runs if has_usable_weights(r)), None)
        if usable is None:
            raise ModelError(
                f"None of the {len(runs)} runs under {root} has usable weights (all are still training, failed, "
                "interrupted before their first checkpoint or hold NaN weights): name one by its id "
                "(xaidash runs lists them)."
            )
        return usable
    text = str(run)
    path = Path(text)
    if len(path.parts) > 1 or path.is_absolute():  # a path: only a run folder right inside the root
        if path.resolve().parent != root.resolve() or path.is_symlink():
            raise ModelError(
                f"{text!r} is outside the runs root {root}: give a run id (a folder name there; list them with: "
                "xaidash runs), or set XAIDASH_RUNS to the root that holds it."
            )
        text = path.name
    folder = _run_in_root(text, root)
    if (folder / CONFIG).is_file():
        return _settled(Run(folder))
    raise ModelError(f"Run {text!r} not found (looked in {root}). List runs with: xaidash runs")


def list_runs(root: Path | None = None) -> list[Run]:
    """Runs newest first (folders without a config are ignored), each settled first (`_settled`)."""
    root = Path(root) if root else runs_root()
    if not root.is_dir():
        return []
    runs = [_settled(Run(p)) for p in root.iterdir() if _has_config(p)]
    return sorted(runs, key=_mtime, reverse=True)


def _settled(run: Run) -> Run:
    """`run`, its folder cleared up first when its writer died mid-run (models/runs/tidy.py): listed, opened and
    resumed runs never keep a dead writer's temporary files or a `running` summary."""
    settle_run(run.path)
    return run


def _has_config(folder: Path) -> bool:
    """Whether `folder` holds a config.json; a folder that cannot be read (permissions) is no run, not an error."""
    try:
        return (folder / CONFIG).is_file()
    except OSError:
        return False


def _mtime(run: Run) -> float:
    try:
        return run.path.stat().st_mtime
    except OSError:  # deleted while the list was made
        return 0.0


# ---- what a run is, in fact: alive or interrupted, weights usable or not -----------------------------------------
RESUME_HINT = "xaidash train --resume {id}"
SCENE_RESUME_HINT = "xaidash scenes train --resume {id}"  # a detector's or segmenter's run (models/scenes)


def resume_command(run: Run) -> str:
    """The command that goes on training `run` (`xaidash scenes train --resume ID` for a scene model's run)."""
    with contextlib.suppress(ModelError):
        if run.kind == "scene_model":
            return SCENE_RESUME_HINT.format(id=run.id)
    return RESUME_HINT.format(id=run.id)


@dataclass(frozen=True)
class Liveness:
    """A run's state as a fact. `state` is the summary's, except that a `running` run whose writer is gone
    (no lock, its pid dead on this host, its heartbeat stale from another) is `interrupted`."""

    state: str
    owner: dict[str, Any] | None  # the live process writing the run, when there is one
    has_weights: bool
    checkpoint_epoch: int | None  # the last complete epoch with a checkpoint
    kept: str  # what the run holds, in words
    advice: str  # what to do with an interrupted run ('' otherwise)

    @property
    def interrupted(self) -> bool:
        return self.state == "interrupted"

    @property
    def resumable(self) -> bool:
        return self.interrupted and self.has_weights


def run_liveness(run: Run, summary: dict[str, Any] | None = None) -> Liveness:
    """Check a run's recorded state against its lock (see the module's docstring). Never writes.

    A live writer makes the run `running` whatever its summary says (a stopped or finished run being resumed says
    so before its new summary is written); a `running` summary without one is `interrupted`, as is a summary the
    store already marked so (`settle_run`)."""
    s = run.summary() if summary is None else summary
    recorded = str(s.get("state", "?"))
    owner = writer_of(run.path)
    has_weights = run.file(WEIGHTS).exists()
    checkpoints = run.checkpoints()
    epoch = checkpoints[-1][0] if checkpoints else None
    kept = str(s.get("kept") or ("nothing yet" if not has_weights else "weights"))
    if owner is not None:
        return Liveness("running", owner, has_weights, epoch, kept, "")
    if recorded not in ("running", "interrupted"):
        return Liveness(recorded, None, has_weights, epoch, kept, "")
    if has_weights:
        advice = (
            f"Its training process is gone; it has {kept}"
            + (f" (last checkpoint: epoch {epoch})" if epoch else "")
            + f". Resume it: {resume_command(run)}"
        )
    else:
        advice = (
            "Its training process is gone before its first checkpoint: there is nothing to resume. Delete it "
            f"(xaidash runs --delete {run.id}) or train again with its settings."
        )
    return Liveness("interrupted", None, has_weights, epoch, "nothing" if not has_weights else kept, advice)


_scan_lock = threading.Lock()
_scanned: dict[tuple[str, int, int], list[str]] = {}


def _nonfinite(path: Path) -> list[str]:
    """nonfinite_tensors, remembered per file version (path, mtime, size): a weights file is read once."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _scan_lock:
        if key in _scanned:
            return _scanned[key]
    bad = nonfinite_tensors(path)
    with _scan_lock:
        if len(_scanned) > 256:
            _scanned.clear()
        _scanned[key] = bad
    return bad


def weights_problem(run: Run, summary: dict[str, Any] | None = None) -> str | None:
    """Why a run's model must not be explained as if it were fine: its training failed, or its weights hold NaN or
    infinite values. None when neither (or when it has no weights: loading it says so)."""
    s = run.summary() if summary is None else summary
    if s.get("state") == "failed":
        why = str(s.get("error") or "no reason recorded").rstrip(".")
        return f"Run {run.id}'s training failed ({why}): its weights are not those of a trained model."
    if not run.file(WEIGHTS).exists():
        return None
    try:
        bad = _nonfinite(run.file(WEIGHTS))
    except (ModelError, OSError):
        return None  # unreadable: loading the run reports that with its own message
    if bad:
        example = ", ".join(bad[:2]) + (" ..." if len(bad) > 2 else "")
        return (
            f"Run {run.id}'s weights hold NaN or infinite values ({len(bad)} tensors, e.g. {example}): its predictions "
            "and explanations are meaningless."
        )
    return None


USABLE_STATES = ("completed", "stopped", "interrupted", "imported")


def has_usable_weights(run: Run) -> bool:
    """A weights file that is not changing and worth explaining: the run is completed, stopped, interrupted (its
    last checkpoint) or imported, not failed, and its weights are finite. A run still training is not: its
    weights change under an explanation (name it by its id to look anyway)."""
    try:
        summary = run.summary()
        live = run_liveness(run, summary)
    except ModelError:
        return False
    return live.has_weights and live.state in USABLE_STATES and weights_problem(run, summary) is None


def kept_sentence(epochs_done: int, partial_steps: int, steps_per_epoch: int, epochs: int) -> str:
    """Which weights a run holds, in one plain sentence: 'weights after epoch 2 of 5', or after a stop inside an
    epoch 'weights after 3 of 47 steps of epoch 1; no epoch completed'."""
    if partial_steps:
        if epochs_done == 0:
            complete = "no epoch completed"
        elif epochs_done == 1:
            complete = f"epoch 1 of {epochs} complete"
        else:
            complete = f"epochs 1-{epochs_done} of {epochs} complete"
        return f"weights after {partial_steps} of {steps_per_epoch} steps of epoch {epochs_done + 1}; {complete}"
    if epochs_done:
        return f"weights after epoch {epochs_done} of {epochs}"
    return "nothing yet"


def delete_run(run: str | Path, root: Path | None = None) -> None:
    """Remove a run folder inside the runs root: only a run (it has its config.json), never one a live process
    is training (RunLocked). A stale lock (its owner gone: an interrupted run) does not protect the folder."""
    r = resolve_run(run, root)
    owner = writer_of(r.path)
    if owner is not None:
        raise RunLocked(f"Run {r.id} is being trained by process {owner['pid']}: stop it first, then delete it.")
    shutil.rmtree(r.path)


# ---- runs of models imported, not trained here ----------------------------------------------------------------------


@dataclass(frozen=True)
class RunLoader:
    """How the run of a model not trained here comes back: its bundle (`load_bundle`'s arguments) and its tokenizer.
    models/external registers the loader of imported models, so the store, which external writes its runs with,
    needs nothing of external."""

    load: Callable[[Run, str | None, int | None], ModelBundle]
    tokenizer: Callable[[Run], Any]


_LOADERS: dict[RunKind, RunLoader] = {}  # the runs of one kind not trained here -> their loader


def register_loader(kind: RunKind, loader: RunLoader) -> None:
    """Runs of `kind` load through `loader` (models/external/loading.py: "imported")."""
    _LOADERS[kind] = loader


def _loader(run: Run) -> RunLoader | None:
    """The loader of a run not trained here; None for a run trained here."""
    kind = run.kind
    loader = _LOADERS.get(kind)
    # importing xaidash.models registers the imported models' loader: only a package still being imported lacks it
    if loader is None and kind == "imported":
        raise ModelError(f"Run {run.id} is an imported model and its loader (xaidash.models.external) is not loaded.")
    return loader


def load_bundle(run: str | Path | Run, device: str | None = "auto", epoch: int | None = None) -> ModelBundle:
    """Rebuild a run's model from JSON + safetensors (the final weights, or those after `epoch`)."""
    r = run if isinstance(run, Run) else resolve_run(run)
    config = r.config()
    if r.kind == "scene_model":  # boxes or masks, not a class: models/scenes/loading.py opens it
        raise ModelError(
            f"Run {r.id} is a detection/segmentation model: use the Scenes page or `xaidash scenes` "
            f"(xaidash scenes evaluate --run {r.id})."
        )
    loader = _loader(r)
    if loader is not None:  # an imported model: its source rebuilds it (models/external)
        return loader.load(r, device, epoch)
    spec = get_spec(config["model"])
    info = r.info
    tokenizer = r.tokenizer()
    options = dict(config.get("model_options", {}))
    if tokenizer is not None and spec.tokenizer is None:
        options.setdefault("vocab_size", len(tokenizer))
        options.setdefault("pad_id", tokenizer.pad_id)
    model = spec.build(info, **options)
    if epoch is None:
        path = r.file(WEIGHTS)
    else:
        found = dict(r.checkpoints())
        if epoch not in found:
            raise ModelError(f"Run {r.id} has no checkpoint for epoch {epoch} (has {sorted(found) or 'none'}).")
        path = found[epoch]
    load_weights(model, path)
    dev = pick_device(device)
    model.to(dev).eval()
    return ModelBundle(model=model, spec=spec, info=info, device=dev, tokenizer=tokenizer, run_dir=r.path)
