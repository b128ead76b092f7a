"""A run's calibration: the logits it fits a temperature on and reports with, the saved `<run>/calibration.json`, and
whether that file still belongs to the run's weights.

The temperature is fitted on the validation split the run held out while training (rebuilt with the engine's own
`split_indices`), with the data set's own labels, and measured on the test split. A run without a validation split
(val_fraction 0, an imported model, or fewer than MIN_FIT held-out samples) fits on one half of the test split
(a seeded shuffle) and reports on the other half, and says so. The file records the weights' size, mtime and SHA-256:
after a resume or a retraining the fit is stale, refused for display and refitted on request.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xaidash.data.atomic import atomic_write_json
from xaidash.data.errors import DatasetError, plain_message
from xaidash.data.registry import Split, get_source
from xaidash.models.bundle import ModelBundle
from xaidash.models.calibration import N_BINS, CalibrationScores, calibration_scores, fit_temperature
from xaidash.models.registry import ModelError
from xaidash.models.runs.scores import run_target
from xaidash.models.runs.store import WEIGHTS, Run, load_bundle, resolve_run, run_liveness, weights_problem
from xaidash.models.training.data import split_indices

CALIBRATION = "calibration.json"
VERSION = 1
MIN_FIT = 100  # fewer held-out samples than this fit a temperature too loosely: half the test split is used instead
MAX_FIT = 5000  # the fit uses at most this many samples (a seeded subset): Guo et al. fitted on 5,000
MIN_REPORT = 20
CHUNK = 512  # raw samples turned into logits at a time (image folders are read lazily)
HALF_SEED = 0  # the shuffle that halves a test split


@dataclass(frozen=True)
class Calibration:
    """A run's fitted temperature and its scores before and after scaling, as saved in calibration.json."""

    temperature: float
    before: CalibrationScores  # on the report split, plain softmax
    after: CalibrationScores  # on the report split, softmax(logits / T)
    fit_split: str  # "validation" or "test, first half"
    report_split: str  # "test" or "test, second half"
    n_fit: int
    n_report: int
    note: str  # the plain sentence on where T was fitted and measured
    weights: dict[str, Any]  # the weights file it was fitted for: name, size, mtime_ns, sha256
    created: str  # ISO 8601 UTC
    n_bins: int = N_BINS
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "temperature": self.temperature,
            "n_bins": self.n_bins,
            "fit_split": self.fit_split,
            "report_split": self.report_split,
            "n_fit": self.n_fit,
            "n_report": self.n_report,
            "note": self.note,
            "weights": self.weights,
            "created": self.created,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Calibration:
        t = float(obj["temperature"])
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"temperature {t}")
        return cls(
            temperature=t,
            before=CalibrationScores.from_json(obj["before"]),
            after=CalibrationScores.from_json(obj["after"]),
            fit_split=str(obj["fit_split"]),
            report_split=str(obj["report_split"]),
            n_fit=int(obj["n_fit"]),
            n_report=int(obj["n_report"]),
            note=str(obj["note"]),
            weights=dict(obj["weights"]),
            created=str(obj["created"]),
            n_bins=int(obj.get("n_bins", N_BINS)),
            version=int(obj.get("version", VERSION)),
        )


@dataclass(frozen=True)
class SplitLogits:
    """The logits and labels a temperature is fitted on and those it is measured on, with where they come from."""

    fit: tuple[torch.Tensor, torch.Tensor]
    report: tuple[torch.Tensor, torch.Tensor]
    fit_split: str
    report_split: str
    note: str


def _run(run: Run | str | Path) -> Run:
    return run if isinstance(run, Run) else resolve_run(run)


def refusal(run: Run) -> str | None:
    """Why this run cannot be calibrated (one sentence), or None."""
    config = run.config()
    if run.kind == "language_model":
        return (
            f"Run {run.id} is a generative language model: calibration by temperature scaling applies to classifiers "
            "(a fixed set of classes with a labelled test split), not to next-token generation."
        )
    if not config.get("dataset"):
        return (
            f"Run {run.id} is an imported model with no data set linked: calibration needs labelled samples. Import "
            "it again with --dataset NAME to link one."
        )
    target = run_target(config)
    if target is not None:
        return f"Calibration applies to classifiers; this run predicts a number ({target.name})."
    summary = run.summary()
    live = run_liveness(run, summary)
    if live.state == "running":
        return f"Run {run.id} is still training: its weights change. Calibrate it when it has finished."
    problem = weights_problem(run, summary)
    if problem:
        return problem
    if not run.file(WEIGHTS).is_file():
        return f"Run {run.id} has no weights ({WEIGHTS}) to calibrate."
    return None


def weights_fingerprint(run: Run, with_hash: bool = True) -> dict[str, Any]:
    """The weights file's name, size, mtime and (with_hash) SHA-256: what a saved fit belongs to."""
    path = run.file(WEIGHTS)
    st = path.stat()
    out: dict[str, Any] = {"file": WEIGHTS, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if with_hash:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out["sha256"] = h.hexdigest()
    return out


def _load(run: Run, split: str) -> Split:
    name = run.config()["dataset"]
    try:
        return get_source(name).load(split, download=False)  # type: ignore[arg-type]
    except DatasetError as e:
        raise ModelError(
            f"Calibration of run {run.id} needs the {split} split of {name}, which is unavailable: {e}"
        ) from None


def split_logits_of(bundle: ModelBundle, data: Split, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's logits (CPU, float) and the data set's labels of `indices` of a split, CHUNK samples at a time."""
    bundle.model.eval()
    out = []
    for i in range(0, len(indices), CHUNK):
        part = indices[i : i + CHUNK]
        out.append(bundle.logits(bundle.prepare(bundle.adapter.items(data, part))).cpu())
    logits = torch.cat(out) if out else torch.empty(0, bundle.info.num_classes)
    return logits, torch.as_tensor(data.labels)[indices].long()


def _subset(idx: torch.Tensor, cap: int) -> list[int]:
    if len(idx) <= cap:
        return idx.tolist()
    keep = torch.randperm(len(idx), generator=torch.Generator().manual_seed(HALF_SEED))[:cap]
    return idx[keep.sort().values].tolist()


def run_logits(run: Run, bundle: ModelBundle) -> SplitLogits:
    """The fit and report logits of a run (see the module's docstring for which split is which)."""
    config = run.config()
    test = _load(run, "test")
    train_cfg = config.get("train") or {}
    val_idx = torch.empty(0, dtype=torch.long)
    if run.kind == "trained" and float(train_cfg.get("val_fraction") or 0) > 0:
        train = _load(run, "train")
        seed, cap = int(train_cfg.get("seed", 0)), int(train_cfg.get("max_train_samples") or 0)
        _, val_idx = split_indices(len(train), seed, cap, float(train_cfg["val_fraction"]))
    if len(val_idx) >= MIN_FIT:
        fit = split_logits_of(bundle, train, _subset(val_idx, MAX_FIT))
        report = split_logits_of(bundle, test, list(range(len(test))))
        capped = f", a random {MAX_FIT:,} of its {len(val_idx):,}" if len(val_idx) > MAX_FIT else ""
        note = (
            f"T fitted on the validation split held out in training ({len(fit[1]):,} samples{capped}), "
            f"measured on the test split ({len(report[1]):,} samples)."
        )
        return SplitLogits(fit, report, "validation", "test", note)
    if len(test) < 2 * MIN_REPORT:
        raise ModelError(
            f"Run {run.id}'s test split has {len(test)} samples: too few to calibrate (needs {2 * MIN_REPORT})."
        )
    why = (
        "an imported model has no validation split"
        if run.kind == "imported"
        else "the run held out no validation split (val_fraction 0)"
        if not len(val_idx)
        else f"its validation split has only {len(val_idx)} samples"
    )
    order = torch.randperm(len(test), generator=torch.Generator().manual_seed(HALF_SEED))
    half = len(test) // 2
    fit = split_logits_of(bundle, test, _subset(order[:half].sort().values, MAX_FIT))
    report = split_logits_of(bundle, test, order[half:].sort().values.tolist())
    note = (
        f"{why[0].upper()}{why[1:]}, so T was fitted on one half of the test split ({len(fit[1]):,} samples, chosen "
        f"at random) and measured on the other half ({len(report[1]):,} samples): the numbers are not those of the "
        "whole test split."
    )
    return SplitLogits(fit, report, "test, first half", "test, second half", note)


def calibrate(run: Run | str | Path, bundle: ModelBundle | None = None, device: str | None = "cpu") -> Calibration:
    """Fit the run's temperature, measure ECE/MCE/NLL/Brier before and after on the report split, save
    calibration.json (atomically) and return it. `bundle`: the run's loaded model (loaded here when None)."""
    r = _run(run)
    why = refusal(r)
    if why:
        raise ModelError(why)
    weights = weights_fingerprint(r)
    bundle = bundle if bundle is not None else load_bundle(r, device=device)
    logits = run_logits(r, bundle)
    t = fit_temperature(*logits.fit)
    cal = Calibration(
        temperature=t,
        before=calibration_scores(*logits.report),
        after=calibration_scores(*logits.report, temperature=t),
        fit_split=logits.fit_split,
        report_split=logits.report_split,
        n_fit=len(logits.fit[1]),
        n_report=len(logits.report[1]),
        note=logits.note,
        weights=weights,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    try:
        atomic_write_json(r.file(CALIBRATION), cal.to_json())
    except OSError as e:
        raise ModelError(f"Could not save {r.id}/{CALIBRATION}: {e}") from None
    return cal


def load_calibration(run: Run | str | Path) -> Calibration | None:
    """The saved calibration of a run (None when there is none); ModelError naming the file when it is damaged."""
    r = _run(run)
    path = r.file(CALIBRATION)
    if not path.is_file():
        return None
    try:
        return Calibration.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelError(f"{r.id}/{CALIBRATION} is damaged ({plain_message(e)}); measure calibration again.") from None


_fresh: dict[tuple[str, int, int, str], bool] = {}  # (weights path, size, mtime_ns, saved hash) -> hashes equal


def stale_reason(run: Run, cal: Calibration) -> str | None:
    """Why a saved fit no longer belongs to the run's weights (resumed or retrained since), or None. Equal size and
    mtime count as the same weights; otherwise the SHA-256 decides (a copied run folder keeps its fit)."""
    try:
        now = weights_fingerprint(run, with_hash=False)
    except OSError:
        return f"Run {run.id} has no weights file any more."
    saved = cal.weights
    if saved.get("size") == now["size"] and saved.get("mtime_ns") == now["mtime_ns"]:
        return None
    key = (str(run.file(WEIGHTS)), now["size"], now["mtime_ns"], str(saved.get("sha256")))
    if key not in _fresh:
        _fresh[key] = weights_fingerprint(run)["sha256"] == saved.get("sha256")
    if _fresh[key]:
        return None
    return (
        f"The saved temperature was fitted on {cal.created} for other weights: run {run.id} has been resumed or "
        "retrained since. Measure calibration again."
    )


def calibration_for(
    run: Run | str | Path,
    bundle: ModelBundle | None = None,
    device: str | None = "cpu",
    refit: bool = False,
    progress: Callable[[str], None] | None = None,
) -> tuple[Calibration, bool]:
    """The run's calibration, (saved one when present and fresh, else fitted and saved now; whether it was fitted
    now). `refit` fits again regardless; `progress` hears one line before a fit."""
    r = _run(run)
    try:
        saved = None if refit else load_calibration(r)
    except ModelError:
        saved = None  # damaged: fitted again below
    if saved is not None and stale_reason(r, saved) is None:
        return saved, False
    if progress is not None:
        progress("stale: fitting again" if saved is not None else "fitting the temperature")
    return calibrate(r, bundle, device), True


def saved_temperature(run: Run | str | Path | None) -> float | None:
    """The temperature saved with a run when it still belongs to its weights, else None (no file, damaged, stale, no
    run): what pages offer as "calibrated probabilities"."""
    if run is None:
        return None
    try:
        r = _run(run)
        cal = load_calibration(r)
        if cal is None or stale_reason(r, cal) is not None:
            return None
        return cal.temperature
    except (ModelError, OSError):
        return None
