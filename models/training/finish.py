"""Keeping what a run did: the checkpoint after each epoch, and the run's end (test evaluation of the kept weights,
the final summary, the `end` event), also when its files can no longer be written."""

from __future__ import annotations

import errno
from contextlib import suppress
from typing import Any

from xaidash.models.runs.checkpoint import save_training_state, save_weights
from xaidash.models.runs.store import STATE, WEIGHTS
from xaidash.models.task import FORECAST_SCORES
from xaidash.models.training.config import Callback, TrainResult
from xaidash.models.training.evaluation import evaluate
from xaidash.models.training.loop import EpochResult, step_record
from xaidash.models.training.session import TrainingSession


def write_checkpoint(session: TrainingSession, result: EpochResult) -> None:
    """After an epoch: its record in metrics.jsonl, its weights (latest, and per epoch when the epoch is
    complete), the training state to resume from, and the summary saying what was kept.

    A stopped epoch's weights are marked partial, get no per-epoch checkpoint (there is no epoch to file them
    under), and resuming runs the rest of that epoch. With several processes only rank 0 writes (the weights of
    the model itself, not of its DistributedDataParallel wrapper: the run loads like a one-process run)."""
    run, event = session.run, result.event
    epoch, stopped = event.epoch, result.stopped
    done, partial = (epoch - 1, result.steps) if stopped else (epoch, 0)
    record = step_record(event, ("run_id",))
    if stopped:  # validation of a partial epoch's weights; a resumed run replaces it with the whole epoch's
        record["partial_steps"] = partial
    session.records.append(record)
    if not session.dist.main:
        return
    run.write_metrics(session.records)
    meta = {"epoch": str(epoch), "partial": str(stopped), "steps": str(result.steps)}
    if not stopped:
        save_weights(session.model, run.checkpoint_path(epoch), meta)
    save_weights(session.model, run.file(WEIGHTS), meta)
    save_training_state(
        run.file(STATE), session.optimizer, {"epoch": done, "step": session.step, "partial_steps": partial}
    )
    run.update_summary(
        epochs_done=done,
        partial_steps=partial,
        steps_per_epoch=session.steps_per_epoch,
        kept=session.kept(done, partial),
        val_acc=event.val_acc,
        val_loss=event.val_loss,
        **({"val_r2": event.val_r2} if event.val_r2 is not None else {}),
    )


def finish_run(session: TrainingSession, state: str, error: str | None, epoch: int, emit: Callback) -> TrainResult:
    """End the run: weights even when it failed before its first checkpoint, the test evaluation of the kept
    weights (none when it failed or nothing was kept), the test record, the final summary and the `end` event.

    With several processes every rank evaluates its share of the test data (the sums reduced) and rank 0 writes;
    a failed run reaches here on rank 0 only (other ranks raise), so nothing collective happens then."""
    run, dist = session.run, session.dist
    if not dist.main:
        rank_test = _test(session) if dist.from_main(None) else {}
        return TrainResult(
            run=run,
            state=state,
            error=error,
            test_acc=rank_test.get("acc"),
            test_loss=rank_test.get("loss"),
            epochs_done=session.start_epoch,
            kept="",
        )
    summary = run.summary()
    if state == "failed" and not run.file(WEIGHTS).exists():
        # For a look at what went wrong; the summary says they are the weights at the failure.
        save_weights(session.model, run.file(WEIGHTS), {"epoch": str(epoch), "partial": "True", "failed": "True"})
        partial = session.step - max(epoch - 1, 0) * session.steps_per_epoch
        summary["kept"] = (
            f"the last weights before the failure, after {partial} of {session.steps_per_epoch} steps of epoch "
            f"{max(epoch, 1)}; no epoch completed"
        )
    if state == "stopped" and not run.file(WEIGHTS).exists():
        summary["kept"] = "nothing: stopped before the first training step"
    test: dict[str, Any] = {}
    has_weights = state != "failed" and run.file(WEIGHTS).exists()
    if state != "failed":
        dist.from_main(has_weights)  # the other ranks wait for this answer in finish_run
    if has_weights:
        test = _test(session)
    elapsed = session.elapsed()
    run.write_metrics(
        session.records + ([{"kind": "test", "test_loss": test["loss"], **_test_scores(test)}] if test else [])
    )
    summary = run.update_summary(
        state=state,
        error=error,
        kept=summary.get("kept"),
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        **{k: v for k, v in _test_scores(test).items() if k != "test_acc"},
        confusion=test.get("confusion"),
        train_seconds=round(elapsed, 2),
        samples_per_s=session.samples_seen / elapsed if elapsed else None,
        **({"compiled": session.compiled.describe()} if session.compiled is not None else {}),
    )
    emit(
        session.event(
            "end", epoch=epoch, step=session.step, state=state, message=error or summary["kept"], elapsed_s=elapsed
        )
    )
    return TrainResult(
        run=run,
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        epochs_done=summary.get("epochs_done", 0),
        partial_steps=summary.get("partial_steps", 0),
        kept=summary["kept"],
    )


def _test(session: TrainingSession) -> dict[str, Any]:
    data = session.data
    regression = data.info.regression
    return evaluate(
        session.model,
        data.test,
        session.device,
        session.cfg.amp,
        num_classes=None if regression is not None else data.info.num_classes,
        dist=session.dist,
        target=regression,
        forecast=data.info if data.info.forecast is not None else None,
    )


def _test_scores(test: dict[str, Any]) -> dict[str, Any]:
    """The test record's scores: the accuracy, or R², RMSE and MAE for a number to predict; a forecast's also the
    naive and seasonal-naive forecasts' and its own per step ahead."""
    if test.get("r2") is None:
        return {"test_acc": test.get("acc")}
    scores = {"test_acc": None, "test_r2": test["r2"], "test_rmse": test["rmse"], "test_mae": test["mae"]}
    return scores | {f"test_{key}": test[key] for key in FORECAST_SCORES if key in test}


def save_failed(e: OSError) -> str:
    """The run's error when writing its files failed (the disk full, the folder gone)."""
    reason = "the disk is full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
    where = f" ({e.filename})" if e.filename else ""
    return f"Saving the run failed: {reason}{where}. The last checkpoint written before it is kept."


def finish_unsaved(session: TrainingSession, epoch: int, error: str, emit: Callback) -> TrainResult:
    """The run's end when its files cannot be written: a best-effort 'failed' summary and the end event."""
    with suppress(OSError):
        session.run.update_summary(state="failed", error=error)
    emit(session.event("end", epoch=epoch, step=session.step, state="failed", message=error))
    summary: dict[str, Any] = {}
    with suppress(Exception):
        summary = session.run.summary()
    return TrainResult(
        run=session.run,
        state="failed",
        error=error,
        test_acc=None,
        test_loss=None,
        epochs_done=summary.get("epochs_done", 0),
        partial_steps=summary.get("partial_steps", 0),
        kept=summary.get("kept", ""),
    )
