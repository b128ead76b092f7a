"""The step loop: one epoch of training steps (forward, backward, optimizer and schedule steps), its step records,
the checks for non-finite losses and out-of-memory errors, a stop request honoured within one step, and the
epoch's validation."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from xaidash.data.modalities import modality_of
from xaidash.models.device import autocast, device_name
from xaidash.models.task import correct_count, loss_function
from xaidash.models.training.batches import augment_images
from xaidash.models.training.config import Callback, TrainEvent, TrainingFailed
from xaidash.models.training.evaluation import evaluate
from xaidash.models.training.finite_guard import FiniteGuard
from xaidash.models.training.session import TrainingSession


@dataclass
class EpochResult:
    """One epoch's outcome: its `epoch` event (training and validation metrics) and whether a stop cut it short."""

    event: TrainEvent
    stopped: bool
    steps: int = 0  # steps of this epoch taken (those of an earlier session included)


@contextmanager
def _out_of_memory_fails(session: TrainingSession) -> Iterator[None]:
    """Turn an out-of-memory error into TrainingFailed with advice; every other error passes unchanged."""
    batch_size = session.cfg.batch_size
    try:
        yield
    except torch.cuda.OutOfMemoryError as e:
        raise TrainingFailed(
            f"Out of memory on {device_name(session.device)} at batch size {batch_size}: lower the batch size "
            "(--batch-size) or train on another device."
        ) from e
    except RuntimeError as e:  # CPU and MPS allocators say so in a plain RuntimeError
        if "out of memory" not in str(e).lower():
            raise
        raise TrainingFailed(f"Out of memory at batch size {batch_size}: lower the batch size. ({e})") from e


def step_record(event: TrainEvent, drop: tuple[str, ...]) -> dict[str, Any]:
    """`event` as a metrics.jsonl record: its set fields less those in `drop`."""
    return {k: v for k, v in asdict(event).items() if v is not None and k not in drop}


def _log_step(session: TrainingSession, epoch: int, emit: Callback) -> None:
    """A step record and event: the training loss and accuracy averaged over the steps since the last one."""
    loss, acc, steps = session.interval.means(session.dist, session.device)
    elapsed = session.elapsed()
    rate = session.rate(elapsed)
    event = session.event(
        "step",
        epoch=epoch,
        step=session.step,
        train_loss=loss,
        train_acc=None if session.data.info.regression is not None else acc,
        interval_steps=steps,
        lr=session.optimizer.param_groups[0]["lr"],
        samples_per_s=rate,
        elapsed_s=elapsed,
        eta_s=session.eta(rate),
    )
    session.records.append(step_record(event, ("run_id", "message")))
    emit(event)


def _forward_backward(
    model: Callable[..., torch.Tensor],
    session: TrainingSession,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: nn.Module,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step's gradients (reset first), its logits and its loss; the optimizer step is the caller's."""
    session.optimizer.zero_grad(set_to_none=True)
    with autocast(session.device, session.cfg.amp):
        logits = model(x)
        loss = loss_fn(logits.float(), y)
    loss.backward()
    return logits, loss


def _check_finite(session: TrainingSession) -> None:
    """Raise TrainingFailed, the weights put back to the last good check, when a loss since the last check was
    not finite (FiniteGuard: one host read here instead of one per step)."""
    guard, dist, device = session.guard, session.dist, session.device
    if guard is None or guard.good_step == session.step:
        return
    found = guard.check(session.step, lambda bad: dist.any(bad, device))
    if found is None:
        return
    session.step = found.restored_step  # the weights the run holds now are those after this step
    where = (
        f"at epoch {(found.step - 1) // session.steps_per_epoch + 1}, step {found.step}"
        if found.step > 0
        else "in another training process"
    )
    value = f"{found.loss}" if found.step > 0 else "not finite"
    kept = f"those after step {found.restored_step}" if found.restored_step else "those the run started from"
    raise TrainingFailed(
        f"Loss became {value} {where}: the learning rate ({session.lr:g}) is probably too high; try a lower one "
        f"(e.g. --lr {session.lr / 10:g}). The weights kept are the last finite ones checked, {kept}."
    )


def run_epoch(session: TrainingSession, epoch: int, stop: threading.Event, emit: Callback) -> EpochResult | None:
    """Train epoch `epoch` (emitting step events), then validate; its result, or None when a stop came
    before its first step (the epoch did not happen). A resumed run whose last session stopped inside this
    epoch takes only the epoch's remaining steps.

    Step records come every ~1/20 epoch (counted in steps since the run began, so they run on across epoch
    boundaries), each with the mean training loss and accuracy since the previous one. A stop request is
    honoured within one step. Raises TrainingFailed for a non-finite loss (found at the next step record, the
    weights put back to the last good one: `_check_finite`) or out of memory.

    With several processes each takes its shard of the epoch (`session.shard`) in batches of its share of the batch
    size, through the DistributedDataParallel wrapper; the metrics are summed over all ranks, and the stop
    request is agreed on (any rank's, reduced) at the epoch's first step and at each step record: every rank stops
    after the same step, with no host synchronisation in between.
    """
    cfg, s, data, device, dist = session.cfg, session.settings, session.data, session.device, session.dist
    model = session.train_model or session.model
    log_every = max(1, session.steps_per_epoch // 20)
    augment = _augmentation(session)
    loss_fn = loss_function(data.info, s.label_smoothing)
    skip, session.skip_steps = (session.skip_steps, 0) if epoch == session.start_epoch + 1 else (0, 0)
    if session.guard is None or session.guard.model is not session.model:
        session.guard = FiniteGuard(session.model, device, session.step)
    guard = session.guard
    with _out_of_memory_fails(session):
        model.train()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        seen = 0
        stopped = False
        shard = session.shard(epoch)
        batches = itertools.islice(
            data.train.batches(session.rank_batch, shuffle=True, generator=session.generator, shard=shard), skip, None
        )
        for x, y in batches:
            if not dist.active:
                stopped = stop.is_set()
            elif seen == 0 or session.step % log_every == 0:  # the same steps on every rank
                stopped = dist.any(stop.is_set(), device)
            if stopped:
                break
            batch_loss, batch_correct = _train_step(session, model, guard, (x, y), loss_fn, augment)
            seen += len(y)
            loss_sum += batch_loss
            correct += batch_correct
            if session.step % log_every == 0 or session.step == session.total_steps:
                _check_finite(session)
                _log_step(session, epoch, emit)
        if not dist.active:  # several processes: only the agreed decision counts
            stopped = stop.is_set()
        _check_finite(session)  # the epoch's last steps, before its weights are validated and kept
        if stopped and session.interval.steps:  # the curve reaches the weights that are kept
            _log_step(session, epoch, emit)
        if seen == 0 and stopped:
            session.skip_steps = skip  # nothing happened: a later resume still starts where the last one stopped
            return None
        val = (
            evaluate(session.model, data.val, device, cfg.amp, dist=dist, target=data.info.regression)
            if data.val is not None
            else {}
        )
        epoch_loss, epoch_correct, epoch_seen = dist.sum([loss_sum, correct, seen], device)
    return _epoch_result(
        session, epoch, stopped, val, epoch_loss / max(epoch_seen, 1), epoch_correct / max(epoch_seen, 1)
    )


def _augmentation(session: TrainingSession) -> tuple[int, bool]:
    """(shift in pixels, flip) of the run's augmentation; neither when the data's kind of input has no augmentation
    (its adapter declares only "none")."""
    if not set(modality_of(session.data.info.modality).augmentations) - {"none"}:
        return 0, False
    augment = session.settings.augment
    return (2 if "shift" in augment else 0), "flip" in augment


def _train_step(
    session: TrainingSession,
    model: Callable[..., torch.Tensor],
    guard: FiniteGuard,
    batch: tuple[torch.Tensor, torch.Tensor],
    loss_fn: nn.Module,
    augment: tuple[int, bool],
) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step on a batch (moved to the device, augmented, laid out); its summed loss and its count of
    correct predictions, both left on the device: nothing is read back to the host here."""
    device = session.device
    x, y = batch[0].to(device, non_blocking=True), batch[1].to(device, non_blocking=True)
    shift, flip = augment
    if shift or flip:
        x = augment_images(x, shift, flip, session.augment_generator or session.generator)
    if session.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if session.compiled is not None:
        logits, loss = session.compiled.step(_forward_backward, session, x, y, loss_fn)
    else:
        logits, loss = _forward_backward(model, session, x, y, loss_fn)
    guard.watch(loss, session.step + 1)  # read at the step records: no host synchronisation per step
    session.optimizer.step()
    session.schedule.step()
    session.step += 1
    session.samples_seen += len(y) * session.dist.world_size  # equal shares: the same on every rank
    batch_loss, batch_correct = loss.detach() * len(y), correct_count(session.data.info, logits, y)
    session.interval.add(batch_loss, batch_correct, len(y))
    return batch_loss, batch_correct


def _epoch_result(
    session: TrainingSession, epoch: int, stopped: bool, val: dict[str, Any], train_loss: Any, train_acc: Any
) -> EpochResult:
    """The epoch's event: its training means over all ranks, its validation, and how far a stop let it go."""
    elapsed = session.elapsed()
    rate = session.rate(elapsed)
    epoch_steps = session.step - (epoch - 1) * session.steps_per_epoch  # this epoch's steps, earlier sessions' too
    event = session.event(
        "epoch",
        epoch=epoch,
        step=session.step,
        train_loss=train_loss,
        train_acc=None if session.data.info.regression is not None else train_acc,
        val_loss=val.get("loss"),
        val_acc=val.get("acc"),
        val_r2=val.get("r2"),
        lr=session.optimizer.param_groups[0]["lr"],
        samples_per_s=rate,
        elapsed_s=elapsed,
        eta_s=session.eta(rate),
        message=f"stopped after {epoch_steps} of {session.steps_per_epoch} steps of this epoch" if stopped else "",
    )
    return EpochResult(event=event, stopped=stopped, steps=epoch_steps)
