"""Confidence calibration of a classifier: temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural
Networks") and the scores that measure it (expected and maximum calibration error over equal-width confidence bins,
negative log-likelihood, Brier score), with the reliability diagram's bins.

What is written here by hand, and why: torchmetrics (which has a binned ECE) is not a dependency, and scikit-learn's
`calibration_curve` gives the per-bin accuracy and mean confidence of the non-empty bins only (no counts, no ECE, no
MCE). So the bins are computed here with exactly its binning rule (edges `linspace(0, 1, n_bins + 1)`, a confidence
on an edge goes to the lower bin: `searchsorted`), and tests/models/test_calibration.py checks them equal to
`calibration_curve`, the NLL equal to `sklearn.metrics.log_loss` and the Brier score equal to
`sklearn.metrics.brier_score_loss`. The temperature is fitted with torch's LBFGS on log T, as in the paper.
The run-level part (which logits, the saved file, staleness) is in `calibration_run.py`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xaidash.models.registry import ModelError

N_BINS = 15
# A fitted temperature is kept within these bounds: when every fitting sample is classified correctly the
# likelihood keeps rising as T falls to 0 (and keeps rising as T grows when all are wrong), so the fit has no optimum.
MIN_T, MAX_T = 0.05, 20.0


@dataclass(frozen=True)
class ReliabilityBin:
    """One confidence bin (lower, upper]: the mean top-class probability of its samples, their accuracy, how many."""

    lower: float
    upper: float
    confidence: float | None  # None: an empty bin
    accuracy: float | None
    count: int


@dataclass(frozen=True)
class CalibrationScores:
    """How well one set of probabilities is calibrated on n labelled samples."""

    ece: float  # expected calibration error: sum over bins of count/n * |accuracy - confidence|
    mce: float  # maximum calibration error: the largest |accuracy - confidence| of a non-empty bin
    nll: float  # mean negative log-likelihood of the true class (nats)
    brier: float  # mean over samples of sum over classes of (p - one-hot)^2, in [0, 2]
    accuracy: float
    n: int
    bins: tuple[ReliabilityBin, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CalibrationScores:
        bins = tuple(ReliabilityBin(**b) for b in obj["bins"])
        return cls(**{**obj, "bins": bins})


def scaled_probabilities(logits: torch.Tensor, temperature: float | None = None) -> torch.Tensor:
    """softmax(logits / T): the calibrated class probabilities (plain softmax when T is None). Dividing every logit by
    one positive number never changes which class is largest, so predictions and accuracy stay the same."""
    if temperature is None:
        return torch.softmax(logits, dim=1)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ModelError(f"A temperature must be a positive number, not {temperature}.")
    return torch.softmax(logits / temperature, dim=1)


def bin_ids(confidence: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """The bin of each confidence: equal-width bins over [0, 1], each (lower, upper] (the first includes 0), the rule
    of sklearn.calibration.calibration_curve(strategy="uniform")."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.searchsorted(edges[1:-1], confidence)


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> tuple[ReliabilityBin, ...]:
    """The reliability diagram's data: per bin, the mean confidence, the accuracy and the count."""
    conf = np.asarray(confidence, dtype=np.float64)
    hit = np.asarray(correct, dtype=np.float64)
    ids = bin_ids(conf, n_bins)
    counts = np.bincount(ids, minlength=n_bins)
    conf_sums = np.bincount(ids, weights=conf, minlength=n_bins)
    hit_sums = np.bincount(ids, weights=hit, minlength=n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return tuple(
        ReliabilityBin(
            lower=float(edges[b]),
            upper=float(edges[b + 1]),
            confidence=float(conf_sums[b] / counts[b]) if counts[b] else None,
            accuracy=float(hit_sums[b] / counts[b]) if counts[b] else None,
            count=int(counts[b]),
        )
        for b in range(n_bins)
    )


def _check(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.as_tensor(logits).detach().to("cpu", torch.float64)
    y = torch.as_tensor(labels).detach().to("cpu", torch.long)
    if z.dim() != 2 or len(z) != len(y):
        raise ModelError(f"Calibration needs logits (N, classes) and N labels, got {tuple(z.shape)} and {len(y)}.")
    if len(y) == 0:
        raise ModelError("Calibration needs at least one labelled sample.")
    if not torch.isfinite(z).all():
        raise ModelError("The model's logits hold NaN or infinite values: its probabilities cannot be calibrated.")
    if int(y.min()) < 0 or int(y.max()) >= z.shape[1]:
        raise ModelError(f"Labels must be class indices in [0, {z.shape[1]}).")
    return z, y


def calibration_scores(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float | None = None, n_bins: int = N_BINS
) -> CalibrationScores:
    """ECE, MCE, NLL, Brier, accuracy and the bins of softmax(logits / T) against the labels."""
    z, y = _check(logits, labels)
    scaled = z if temperature is None else z / temperature
    probs = torch.softmax(scaled, dim=1)
    conf, pred = probs.max(dim=1)
    correct = (pred == y).numpy()
    bins = reliability_bins(conf.numpy(), correct, n_bins)
    n = len(y)
    filled = [(b.count, b.accuracy, b.confidence) for b in bins if b.accuracy is not None and b.confidence is not None]
    gaps = [abs(acc - conf) for _, acc, conf in filled]
    ece = sum(count / n * gap for (count, _, _), gap in zip(filled, gaps, strict=True))
    onehot = F.one_hot(y, z.shape[1]).to(probs.dtype)
    return CalibrationScores(
        ece=float(ece),
        mce=float(max(gaps, default=0.0)),
        nll=float(F.cross_entropy(scaled, y)),
        brier=float(((probs - onehot) ** 2).sum(dim=1).mean()),
        accuracy=float(correct.mean()),
        n=n,
        bins=bins,
    )


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, max_iter: int = 200) -> float:
    """The temperature T > 0 that minimises the negative log-likelihood of softmax(logits / T) on these labelled
    samples (LBFGS on log T, so T stays positive), kept within [MIN_T, MAX_T]."""
    z, y = _check(logits, labels)
    log_t = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [log_t], lr=1.0, max_iter=max_iter, tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    t = float(log_t.detach().exp())
    if not math.isfinite(t):
        t = MAX_T if float(log_t.detach()) > 0 else MIN_T
    return min(MAX_T, max(MIN_T, t))
