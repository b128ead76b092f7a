"""Which states of a run the influence methods read, and with what weight: its epoch checkpoints and the learning
rate of each epoch (TracIn), or its final weights (similar examples); and why a run has none to offer."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from xaidash.explainers.influence.registry import Snapshot
from xaidash.models.runs.store import WEIGHTS, Run


def epoch_rates(run: Run) -> tuple[dict[int, float], str]:
    """({epoch: learning rate}, where they came from): the mean of the epoch's step records' learning rates
    (a schedule changes it inside an epoch), else the epoch record's, else the configured one."""
    steps: dict[int, list[float]] = defaultdict(list)
    ends: dict[int, float] = {}
    for record in run.metrics():
        lr, epoch = record.get("lr"), record.get("epoch")
        if not isinstance(lr, int | float) or not isinstance(epoch, int):
            continue
        if record.get("kind") == "step":
            steps[epoch].append(float(lr))
        elif record.get("kind") == "epoch":
            ends[epoch] = float(lr)
    if steps:
        return {e: sum(v) / len(v) for e, v in steps.items()}, "the mean learning rate of each epoch's step records"
    if ends:
        return ends, "each epoch's learning rate as metrics.jsonl recorded it"
    config: dict[str, Any] = run.config()
    lr = (config.get("train") or {}).get("lr") or config.get("lr") or 1.0
    return defaultdict(lambda: float(lr)), f"the configured learning rate {float(lr):g} for every epoch"


def checkpoint_snapshots(run: Run) -> tuple[list[Snapshot], list[str]]:
    """The run's epoch checkpoints weighted by their epoch's learning rate, and a note saying so."""
    rates, source = epoch_rates(run)
    found = run.checkpoints()
    snaps = [Snapshot(f"epoch_{e:03d}", e, path, rates.get(e, 1.0)) for e, path in found]
    lrs = ", ".join(f"epoch {s.epoch}: {s.weight:.3g}" for s in snaps)
    return snaps, [f"learning rates ({source}): {lrs}"]


def final_snapshot(run: Run) -> Snapshot:
    return Snapshot("final", None, run.file(WEIGHTS), 1.0)


def tracin_problem(run: Run, least: int) -> str | None:
    """Why TracIn over checkpoints does not apply to `run` (None: it does): imported, or too few checkpoints."""
    if run.kind == "imported":  # a model imported from elsewhere: its training data and checkpoints are unknown
        return (
            "TracIn needs the run's training checkpoints and training labels; an imported model has neither: "
            "use similar examples (nearest training samples of its linked data set)."
        )
    if not run.config().get("dataset"):
        return "TracIn needs the training data set, and this run has none."
    n = len(run.checkpoints())
    if n < least:
        has = "no epoch checkpoint" if n == 0 else f"{n} epoch checkpoint"
        return (
            f"TracIn sums over the training checkpoints and needs at least {least}; this run has {has} "
            f"(train for {least} or more epochs), so use TracIn (final layer) or similar examples."
        )
    return None


def similar_problem(run: Run) -> str | None:
    """Why similar examples do not apply to `run`: no weights, or no training data set to search."""
    config = run.config()
    if not config.get("dataset"):
        return "Similar examples search the training data set, and this imported model has none linked."
    if not run.file(WEIGHTS).exists() and not run.checkpoints():
        return "The run has no weights yet."
    return None
