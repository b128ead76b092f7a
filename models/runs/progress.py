"""Where a run stands and whether training can go on, read from its folder alone (never from a page's memory).

`run_progress(run)` answers what a Resume or "train N more epochs" button needs:

- `state`: the run's state as a fact (`run_liveness`): running (a live process holds its lock: `owner_pid`,
  `owner_host`), interrupted (its writer is gone), stopped, completed, failed, imported, or '?' (no summary);
- `epochs_done` complete epochs (and `partial_steps` of the next after a stop inside it) out of `epochs_planned`,
  as the engine resumes them: from the training state file (train_state.safetensors), the summary when it has none;
- `can_resume`: `xaidash train --resume ID` continues to the planned epochs (an epoch is left to train);
- `can_extend`: `xaidash train --resume ID --epochs N` trains on to any N >= `min_epochs` (epochs_done + 1),
  also for a completed run;
- `why_not`: one sentence when it cannot be resumed ('' when it can), saying what can be done instead.

The rules are those of `models/training/session.py` (`setup_run`, `restore_checkpoint`): a run is continued from
its `model.safetensors` and training state with its own settings in config.json (`train`), by a process that takes
its lock; a failed run's weights are those at the failure, and a model imported or a language model was not
trained here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from xaidash.models.registry import ModelError
from xaidash.models.runs.store import RESUME_HINT, STATE, Run, resume_command, run_liveness


@dataclass(frozen=True)
class RunProgress:
    """A run's resumable state (see the module's docstring)."""

    run_id: str
    state: str  # running | interrupted | stopped | completed | failed | imported | ?
    owner_pid: int | None  # the live process that trains it (state 'running'), else None
    owner_host: str | None
    epochs_done: int  # complete epochs kept
    partial_steps: int  # steps of epoch epochs_done + 1 kept after a stop inside it (resuming runs the rest)
    steps_per_epoch: int | None
    epochs_planned: int | None  # the run's epoch total (None: not recorded)
    has_weights: bool  # model.safetensors: what resuming continues from
    kept: str  # what the run holds, in words
    can_resume: bool  # train on to epochs_planned: xaidash train --resume ID
    can_extend: bool  # train on to a larger total: xaidash train --resume ID --epochs N (N >= min_epochs)
    why_not: str  # why it cannot be resumed, and what can be done instead ('' when can_resume)
    advice: str = ""  # what to do with an interrupted run, as `run_liveness` words it ('' otherwise)
    resume: str = ""  # the command that continues it (`resume_command`: a scene model's differs); '' -> RESUME_HINT

    @property
    def running_elsewhere(self) -> bool:
        """A live process (this one's child, another terminal, another host) holds the run's lock."""
        return self.state == "running"

    @property
    def min_epochs(self) -> int:
        """The smallest epoch total that trains more: one epoch beyond those complete."""
        return self.epochs_done + 1

    def total_after(self, more: int) -> int:
        """The epoch total of "train `more` more epochs": the rest of a partial epoch counts as one of them."""
        return self.epochs_done + max(1, int(more))

    def command(self, epochs: int | None = None) -> str:
        """The CLI command that continues the run (to `epochs` in all, else to its planned total)."""
        base = self.resume or RESUME_HINT.format(id=self.run_id)
        return base if epochs is None else f"{base} --epochs {epochs}"


def _trained_so_far(run: Run, summary: dict[str, Any]) -> tuple[int, int]:
    """(complete epochs, steps of the next) as resuming reads them: the training state's own record, which is
    written before the summary (a writer killed between the two leaves the summary an epoch behind)."""
    from safetensors import safe_open

    try:
        with safe_open(str(run.file(STATE)), framework="pt") as f:
            extra = json.loads((f.metadata() or {}).get("extra", "{}"))
        return int(extra.get("epoch", 0)), int(extra.get("partial_steps", 0))
    except Exception:  # noqa: BLE001 - absent or damaged: resuming reports that itself; the summary's word here
        done, partial = summary.get("epochs_done", 0), summary.get("partial_steps", 0)
        return (done if isinstance(done, int) else 0), (partial if isinstance(partial, int) else 0)


def _planned(config: dict[str, Any], summary: dict[str, Any]) -> int | None:
    planned = summary.get("epochs") or (config.get("train") or {}).get("epochs")
    return planned if isinstance(planned, int) and planned > 0 else None


def run_progress(run: Run) -> RunProgress:
    """Where `run` stands, from its folder (see the module's docstring). ModelError when its config.json is missing
    or damaged (its summary.json damaged likewise)."""
    config = run.config()
    summary = run.summary()
    live = run_liveness(run, summary)
    done, partial = _trained_so_far(run, summary) if live.has_weights else (0, 0)
    planned = _planned(config, summary)
    steps = summary.get("steps_per_epoch")
    blocker = _blocker(run, config, summary, live.state, live.owner, live.has_weights)
    resumable = not blocker and planned is not None and done < planned
    resume = resume_command(run)
    if blocker or resumable:
        why = blocker
    elif planned is None:
        why = f"Run {run.id} does not record its planned epochs: say how many in all with {resume} --epochs N."
    else:
        why = f"All {planned} planned epochs are done: train more with {resume} --epochs {done + 1} (or more)."
    return RunProgress(
        run_id=run.id,
        state=live.state,
        owner_pid=int(live.owner["pid"]) if live.owner else None,
        owner_host=str(live.owner["host"]) if live.owner else None,
        epochs_done=done,
        partial_steps=partial,
        steps_per_epoch=steps if isinstance(steps, int) and steps > 0 else None,
        epochs_planned=planned,
        has_weights=live.has_weights,
        kept=live.kept,
        can_resume=resumable,
        can_extend=not blocker,
        why_not=why,
        advice=live.advice,
        resume=resume,
    )


def _blocker(
    run: Run,
    config: dict[str, Any],
    summary: dict[str, Any],
    state: str,
    owner: dict[str, Any] | None,
    has_weights: bool,
) -> str:
    """Why the run cannot be trained on at all ('' when it can)."""
    try:
        kind = run.kind
    except ModelError as e:
        return str(e)
    if kind not in ("trained", "scene_model"):
        return f"Run {run.id} is a model imported from elsewhere, not trained here: there is nothing to resume."
    if state == "running":
        where = f"process {owner['pid']} on {owner['host']}" if owner else "another process"
        return f"Run {run.id} is being trained by {where}: wait for it to end or stop it."
    if state == "failed":
        error = str(summary.get("error") or "no reason recorded").rstrip(".")
        return (
            f"Run {run.id}'s training failed ({error}): its weights are those at the failure. Train again with its "
            "settings."
        )
    settings = "scene_model" if kind == "scene_model" else "train"  # where its training settings are kept
    if settings not in config:
        return f"{run.id}/config.json lacks its training settings ({settings}): it cannot be resumed."
    if not has_weights:
        return (
            f"Run {run.id} ended before its first checkpoint: there is nothing to resume. Train again with its "
            f"settings, or delete it (xaidash runs --delete {run.id})."
        )
    return ""
