"""Background training jobs: one worker at a time, shared by every dashboard session.

Plain Python (a thread, a lock, stop events), no Streamlit: a worker thread cannot write a
browser session's state (Streamlit drops writes made outside a script run), so the worker
updates `Job` objects that every page reads through `snapshot()`.

A start queues one or more training configs (the quick start queues three); one worker thread
trains them one after another. While it works, another start is refused; a stop ends the
current run after its step and cancels the ones still waiting.

A queue's progress counts steps: before the first run trains, the worker asks `plan_fn` how many steps each
run will take, and each run weighs its share of that total (a run's own progress, step / its steps, times
its weight), so the bar moves at the pace of the work, never backwards, and reaches 100% when the last run
ends. The remaining time is the current run's own estimate plus each queued run priced by its own model: its
planned steps times its probe's seconds per step (`training.probe`, measured before the queue trains), scaled by
what the running (or last) job measured against its own probe (the machine's load, validation), plus the start-up
and test evaluation a run took here and the loading of its own data set. Without probes, queued runs are priced at
the current run's time per step.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from xaidash.data.errors import DatasetError, error_text
from xaidash.data.registry import get_source
from xaidash.models.device import pick_device
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runs.scores import summary_r2
from xaidash.models.runs.store import resolve_run
from xaidash.models.training.config import TrainConfig, TrainEvent, TrainResult
from xaidash.models.training.engine import train
from xaidash.models.training.probe import RunPlan
from xaidash.models.training.process import TrainingProcessDied

log = logging.getLogger(__name__)

ACTIVE_STATES = ("starting", "running")
DONE_STATES = ("completed", "stopped", "failed", "cancelled")  # cancelled: queued, never started (a stop came first)
TrainFn = Callable[..., TrainResult]
PlanFn = Callable[[TrainConfig], "int | RunPlan"]  # the steps alone, or the steps and a probe's seconds per step
MIN_PROGRESS_FOR_ETA = 0.02  # a queue's remaining time is extrapolated once this share of its steps is done
# A job's pace is measured over its last step records (about 20 an epoch): on a shared machine the load changes
# within minutes (a run's average since its start priced the next runs at a load long gone, by 2x and more).
RECENT_RECORDS = 20


class JobBusy(ModelError):
    """A training job is already running; the message names it and says what to do."""


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job's state for readers (pages never see a half-updated job)."""

    id: int
    config: dict[str, Any]
    state: str  # queued | starting | running | completed | stopped | failed | cancelled
    run_id: str | None
    epoch: int
    epochs: int | None  # None until the engine has resolved a config that left it to the recipe
    step: int
    total_steps: int
    eta_s: float | None
    samples_per_s: float | None
    elapsed_s: float
    history: tuple[dict[str, Any], ...]  # one record per logged step and per epoch
    error: str | None
    test_acc: float | None
    test_loss: float | None
    started: float | None  # None while queued
    finished: float | None
    stop_requested: bool
    queue_id: int = 0
    queue_position: int = 1  # 1-based place in its queue
    queue_size: int = 1
    planned_steps: int | None = None  # the steps it will take, known before it starts (None: not planned yet)
    probe_step_s: float | None = None  # one step of its model on a probe batch, measured before the queue trained
    load_s: float = 0.0  # loading its data set took this long in the planning process (its trainer loads it again)
    began: float | None = None  # when the trainer got it (after the queue's planning)
    startup_s: float | None = None  # from then to its first training event (process, data, model)
    train_elapsed_s: float | None = None  # the trainer's own clock at its last event (training and validation)
    test_r2: float | None = None  # a number to predict: its test R² (it has no accuracy)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def queued(self) -> bool:
        return self.state == "queued"

    @property
    def progress(self) -> float:
        if self.state == "completed":
            return 1.0
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def label(self) -> str:
        return f"{self.config.get('model', '?')} on {self.config.get('dataset', '?')}"

    @property
    def measured_step_s(self) -> float | None:
        """Seconds per step as this job measured them: over its last RECENT_RECORDS step records (the trainer's
        clock, validation included), else its own estimate while it trains, else its clock over all its steps."""
        clock = [(r["step"], r["elapsed_s"]) for r in self.history if r.get("elapsed_s") and r.get("step")]
        if len(clock) >= 2:
            (s0, t0), (s1, t1) = clock[-min(len(clock), RECENT_RECORDS)], clock[-1]
            if s1 > s0 and t1 > t0:
                return (t1 - t0) / (s1 - s0)
        if self.active and self.eta_s is not None and self.total_steps > self.step:
            return self.eta_s / (self.total_steps - self.step)
        if self.train_elapsed_s and self.step:
            return self.train_elapsed_s / self.step
        return None

    @property
    def overhead_s(self) -> float | None:
        """The seconds a run spends outside its training steps: start-up and, once it ended, its test evaluation
        and files (its time since its start-up ended, less its trainer's clock); while it trains, its start-up."""
        if self.state in DONE_STATES and self.finished and self.began and self.train_elapsed_s is not None:
            return max(0.0, self.finished - self.began - self.train_elapsed_s)
        return self.startup_s


@dataclass(frozen=True)
class QueueSnapshot:
    """A queue of jobs trained one after another, as readers see it."""

    id: int
    name: str
    jobs: tuple[JobSnapshot, ...]
    finished: bool  # the worker has ended (every job done or cancelled)

    @property
    def size(self) -> int:
        return len(self.jobs)

    @property
    def active(self) -> bool:
        return not self.finished

    @property
    def current(self) -> JobSnapshot | None:
        """The job being trained (None between jobs or when the queue is done)."""
        return next((j for j in self.jobs if j.active), None)

    @property
    def position(self) -> int:
        """1-based place of the job being trained, or of the last job that started."""
        started = [i for i, j in enumerate(self.jobs, 1) if not j.queued and j.state != "cancelled"]
        return started[-1] if started else 1

    @property
    def weights(self) -> list[float]:
        """Each job's share of the work: its planned steps (a job whose plan failed weighs the mean of the others;
        equal shares until the plans are known, when no job has trained a step yet)."""
        planned = [j.planned_steps for j in self.jobs]
        known = [float(p) for p in planned if p]
        fill = sum(known) / len(known) if known else 1.0
        return [float(p) if p else fill for p in planned]

    @property
    def total_steps(self) -> int:
        """The steps of every job of the queue, as planned (0 until planned)."""
        return sum(j.planned_steps or 0 for j in self.jobs)

    @property
    def steps_done(self) -> int:
        """Steps trained so far across the queue, in planned steps (a job that ended counts in full)."""
        return round(self.progress * self.total_steps)

    @property
    def progress(self) -> float:
        """Share of the queue's steps done: each job's own progress (step / its steps; 1 once it ended: completed,
        stopped, failed or cancelled) weighted by its planned steps. Never decreases while the queue works."""
        if not self.jobs:
            return 1.0
        weights = self.weights
        done = sum(w * (1.0 if j.state in DONE_STATES else j.progress) for j, w in zip(self.jobs, weights, strict=True))
        return min(1.0, done / sum(weights))

    @property
    def started(self) -> float | None:
        return min((j.started for j in self.jobs if j.started is not None), default=None)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the queue's first job started (to its last job's end once finished)."""
        if self.started is None:
            return 0.0
        ends = [j.finished for j in self.jobs if j.finished is not None]
        end = max(ends) if self.finished and ends else time.time()
        return max(0.0, end - self.started)

    @property
    def scale(self) -> float | None:
        """Measured seconds per probe second: the latest job that has both a probe and a measured pace (the load
        on the machine, validation passes and the trainer's threads are what it corrects the probes for)."""
        for job in reversed([j for j in self.jobs if j.started is not None]):
            measured = job.measured_step_s
            if measured and job.probe_step_s:
                return measured / job.probe_step_s
        return None

    @property
    def overhead_s(self) -> float:
        """A run's seconds outside its steps and its data's loading, as measured here: the mean over the jobs that
        ended (start-up and test evaluation), else the current job's start-up, else 0."""
        ended = [
            max(0.0, o - j.load_s)
            for j in self.jobs
            if j.state in ("completed", "stopped") and (o := j.overhead_s) is not None
        ]
        if ended:
            return sum(ended) / len(ended)
        current = self.current
        return max(0.0, (current.startup_s or 0.0) - current.load_s) if current is not None else 0.0

    @property
    def finish_s(self) -> float:
        """A run's seconds after its last step (test evaluation, files, the process's exit): the mean over the
        jobs that ended, else 0."""
        ends = [
            max(0.0, o - j.startup_s)
            for j in self.jobs
            if j.state in ("completed", "stopped") and (o := j.overhead_s) is not None and j.startup_s is not None
        ]
        return sum(ends) / len(ends) if ends else 0.0

    def price_s(self, job: JobSnapshot) -> float | None:
        """The seconds a job that has not started its steps will take: its planned steps at its own model's pace
        (its probe, scaled), plus a run's overhead and its data's loading; at the current run's pace when either has
        no probe. None when nothing is measured yet."""
        if job.planned_steps is None:
            return None
        scale = self.scale
        if scale is not None and job.probe_step_s:
            per_step: float | None = job.probe_step_s * scale
        else:
            current = self.current
            per_step = current.measured_step_s if current is not None else None
        return job.planned_steps * per_step + self.overhead_s + job.load_s if per_step else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the current run's own estimate plus each queued run priced by its own model (`price_s`);
        before anything is measured, or for a run with no plan, the queue's pace so far (start-ups included), once
        a little is done."""
        if self.finished:
            return None
        left = 0.0
        for job in self.jobs:
            if job.state in DONE_STATES:
                continue
            if job.active and job.eta_s is not None and job.total_steps > job.step:
                left += ((job.total_steps - job.step) * (job.measured_step_s or 0.0) or job.eta_s) + self.finish_s
                continue
            price = self.price_s(job)
            if price is None:
                return self._pace_eta()
            left += max(0.0, price - job.elapsed_s) if job.active else price  # a starting job: part is behind it
        return left

    def _pace_eta(self) -> float | None:
        p = self.progress
        if p < MIN_PROGRESS_FOR_ETA or p >= 1.0:
            return None
        return self.elapsed_s * (1.0 - p) / p


class Job:
    """One training run; `on_event` is the engine callback, `run` the body the worker calls."""

    def __init__(
        self,
        job_id: int,
        cfg: TrainConfig,
        queue_id: int = 0,
        position: int = 1,
        size: int = 1,
        resume: str | None = None,
    ):
        self.id = job_id
        self.cfg = cfg
        self.resume = resume  # the id of an interrupted run this job continues
        self.queue_id, self.position, self.size = queue_id, position, size
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._state = "queued"
        self._run_id: str | None = None
        self._last: TrainEvent | None = None
        self._history: list[dict[str, Any]] = []
        self._error: str | None = None
        self._test: tuple[float | None, float | None, float | None] = (None, None, None)  # acc, loss, R²
        self._started: float | None = None
        self._finished: float | None = None
        self._planned: int | None = None
        self._probe_s: float | None = None
        self._load_s = 0.0
        self._began: float | None = None  # when the worker handed it to the trainer (after the queue's planning)
        self._first_event: float | None = None  # when its first training event came (its start-up's end)
        self._train_elapsed: float | None = None

    def plan(self, plan_fn: PlanFn) -> RunPlan | None:
        """The steps this job will take, with its probe's seconds per step when `plan_fn` measures them (None when
        the plan fails: the engine will say why; a resumed run has steps behind it and is not planned)."""
        if self.resume is not None:
            return None
        try:
            planned = plan_fn(self.cfg)
        except Exception:  # noqa: BLE001 - planning is a best guess; training reports real errors
            return None
        plan = planned if isinstance(planned, RunPlan) else RunPlan(int(planned))
        return plan if plan.steps > 0 else None

    def set_plan(self, plan: RunPlan | int | None) -> None:
        plan = RunPlan(plan) if isinstance(plan, int) else plan
        with self._lock:
            self._planned = plan.steps if plan is not None else None
            self._probe_s = plan.step_s if plan is not None else None
            self._load_s = plan.load_s if plan is not None else 0.0

    def mark_starting(self) -> bool:
        """Claim the job for training: False when it was cancelled (it must not run)."""
        with self._lock:
            if self._state == "queued":
                self._state = "starting"
                self._started = time.time()
            return self._state == "starting"

    def cancel(self) -> bool:
        """A queued job that will never run; False when it already started."""
        with self._lock:
            if self._state != "queued":
                return False
            self._state = "cancelled"
            self._finished = time.time()
            return True

    def on_event(self, event: TrainEvent) -> None:
        with self._lock:
            self._run_id = event.run_id
            if event.kind in ("start", "step", "epoch"):
                self._state = "running"
                self._last = event
                if self._first_event is None:
                    self._first_event = time.time()
            if event.kind in ("step", "epoch"):  # the end event's clock includes the test evaluation
                self._train_elapsed = event.elapsed_s
            if event.kind in ("step", "epoch"):
                # The message stays: an epoch record says when a stop cut the epoch short.
                record = {
                    k: v for k, v in asdict(event).items() if v not in (None, "") and k not in ("run_id", "state")
                }
                self._history.append(record)

    def _finish(self, state: str, error: str | None, result: TrainResult | None = None) -> None:
        with self._lock:
            self._state = state
            self._error = error
            if result is not None:
                self._run_id = result.run.id
                self._test = (result.test_acc, result.test_loss, summary_r2(result.run))
            self._finished = time.time()

    def run(self, train_fn: TrainFn) -> None:
        """Train, then record how it ended. Never raises; does nothing for a cancelled job."""
        if not self.mark_starting():
            return
        with self._lock:
            self._began = time.time()
        try:
            more = {"resume": self.resume} if self.resume else {}
            result = train_fn(self.cfg, callbacks=[self.on_event], stop=self.stop_event, **more)
        except TrainingProcessDied as e:
            # Nothing in the run is wrong: its lock's owner is gone, so readers show it `interrupted`, resumable
            # from its last checkpoint (marking it failed would hide good weights behind --force).
            self._finish("failed", str(e))
        except (ModelError, DatasetError) as e:
            self._mark_run_failed(str(e))
            self._finish("failed", str(e))
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            log.error("training job %s crashed:\n%s", self.id, traceback.format_exc())
            message = error_text(e, "training")
            self._mark_run_failed(message)
            self._finish("failed", message)
        else:
            self._finish(result.state, result.error, result)

    def _mark_run_failed(self, message: str) -> None:
        """A crash after the run folder was written: say so in its summary instead of leaving it 'running'."""
        if self._run_id is None:
            return
        with contextlib.suppress(Exception):  # the folder may be gone; the job still reports the error
            resolve_run(self._run_id).update_summary(state="failed", error=message)

    def snapshot(self) -> JobSnapshot:
        with self._lock:
            e = self._last
            now = self._finished or time.time()
            return JobSnapshot(
                id=self.id,
                config=asdict(self.cfg),
                state=self._state,
                run_id=self._run_id,
                epoch=e.epoch if e else 0,
                epochs=e.epochs if e else self.cfg.epochs,
                step=e.step if e else 0,
                total_steps=e.total_steps if e else 0,
                eta_s=e.eta_s if e and self._state == "running" else None,
                samples_per_s=e.samples_per_s if e else None,
                elapsed_s=now - self._started if self._started is not None else 0.0,
                history=tuple(self._history),
                error=self._error,
                test_acc=self._test[0],
                test_loss=self._test[1],
                test_r2=self._test[2],
                started=self._started,
                finished=self._finished,
                stop_requested=self.stop_event.is_set(),
                queue_id=self.queue_id,
                queue_position=self.position,
                queue_size=self.size,
                planned_steps=self._planned,
                probe_step_s=self._probe_s,
                load_s=self._load_s,
                began=self._began,
                startup_s=self._first_event - self._began
                if self._first_event is not None and self._began is not None
                else None,
                train_elapsed_s=self._train_elapsed,
            )


class JobQueue:
    """Jobs trained one after another by one worker thread."""

    def __init__(self, queue_id: int, name: str, jobs: list[Job]):
        self.id, self.name, self.jobs = queue_id, name, jobs
        self.thread: threading.Thread | None = None
        self._finished = threading.Event()

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def work(self, train_fn: TrainFn, plan_fn: PlanFn | None = None) -> None:
        """The worker body: plan every job's steps (so progress counts the whole queue's work from the start),
        then train each job not cancelled, in order; a failed job does not stop the next."""
        try:
            if plan_fn is not None:
                plans = [job.plan(plan_fn) for job in self.jobs]  # all first: readers never see a partial total
                for job, steps in zip(self.jobs, plans, strict=True):
                    job.set_plan(steps)
            for job in self.jobs:
                job.run(train_fn)  # a cancelled job returns at once
        finally:
            self._finished.set()

    def cancel(self) -> bool:
        """Stop the running job after its step and cancel those waiting; False when nothing was left to stop."""
        acted = False
        for job in self.jobs:
            if job.cancel():
                acted = True
            elif job.snapshot().active:
                job.stop_event.set()
                acted = True
        return acted

    def snapshot(self) -> QueueSnapshot:
        return QueueSnapshot(
            id=self.id, name=self.name, jobs=tuple(j.snapshot() for j in self.jobs), finished=self.finished
        )


def check_config(cfg: TrainConfig) -> None:
    """Refuse settings the engine would refuse, before a thread or a run folder exists."""
    cfg.validate()
    spec = get_spec(cfg.model)
    spec.check_fits(get_source(cfg.dataset).info)
    pick_device(cfg.device)


@dataclass
class JobManager:
    """Runs at most one queue of training jobs at a time; keeps the last `keep` jobs for display."""

    train_fn: TrainFn = train
    keep: int = 20
    _jobs: list[Job] = field(default_factory=list)
    _queues: list[JobQueue] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1
    _next_queue_id: int = 1

    def start(self, cfg: TrainConfig, resume: str | None = None) -> JobSnapshot:
        """Launch `cfg` in the background (`resume`: continue that run, with its own settings); JobBusy while
        another job runs, ModelError/DatasetError for bad settings."""
        return self.start_queue([cfg], resume=resume).jobs[0]

    def start_queue(
        self, cfgs: Sequence[TrainConfig], name: str = "", resume: str | None = None, plan_fn: PlanFn | None = None
    ) -> QueueSnapshot:
        """Train `cfgs` one after another in one background worker. Every config is checked first, so a bad
        one refuses the whole queue before anything runs; JobBusy while another queue works. `plan_fn` (e.g.
        `training.demo.planned_steps`) gives each config's steps before any trains, so the queue's progress
        counts steps; without it each job weighs the same."""
        if not cfgs:
            raise ModelError("Nothing to train: the queue is empty.")
        for cfg in cfgs:
            check_config(cfg)
        with self._lock:
            busy = self._active_queue()
            if busy is not None:
                raise JobBusy(self._busy_message(busy.snapshot()))
            queue_id = self._next_queue_id
            self._next_queue_id += 1
            jobs = [
                Job(self._next_id + i, cfg, queue_id, i + 1, len(cfgs), resume if i == 0 else None)
                for i, cfg in enumerate(cfgs)
            ]
            self._next_id += len(cfgs)
            jobs[0].mark_starting()  # it starts now: readers never see an idle gap before the thread runs
            queue = JobQueue(queue_id, name, jobs)
            self._jobs.extend(jobs)
            del self._jobs[: -max(self.keep, len(jobs))]
            self._queues.append(queue)
            del self._queues[: -self.keep]
            queue.thread = threading.Thread(
                target=queue.work, args=(self.train_fn, plan_fn), name=f"xaidash-train-{queue_id}", daemon=True
            )
            queue.thread.start()
            return queue.snapshot()

    @staticmethod
    def _busy_message(q: QueueSnapshot) -> str:
        job = q.current or q.jobs[q.position - 1]
        where = f"run {q.position} of {q.size} of {q.name or 'a queue'}: " if q.size > 1 else ""
        return (
            f"A training job is already running ({where}{job.label}, {100 * job.progress:.0f}% done"
            + (f", run {job.run_id}" if job.run_id else "")
            + "). Wait for it to finish or stop it, then start again."
        )

    def _active_queue(self) -> JobQueue | None:
        return next((q for q in self._queues if not q.finished), None)

    def busy(self) -> bool:
        with self._lock:
            return self._active_queue() is not None

    def stop(self) -> bool:
        """Stop the running job after its current step (it keeps what it trained) and cancel the jobs still
        queued. False when nothing runs."""
        with self._lock:
            queue = self._active_queue()
        return queue.cancel() if queue is not None else False

    def current(self) -> JobSnapshot | None:
        """The job being trained; else the last one that started; else None."""
        with self._lock:
            snaps = [j.snapshot() for j in self._jobs]
        active = [s for s in snaps if s.active]
        if active:
            return active[-1]
        started = [s for s in snaps if s.started is not None]
        return started[-1] if started else None

    def queue(self) -> QueueSnapshot | None:
        """The most recent queue (working or done), or None."""
        with self._lock:
            return self._queues[-1].snapshot() if self._queues else None

    def find_queue(self, queue_id: int) -> QueueSnapshot | None:
        with self._lock:
            return next((q.snapshot() for q in self._queues if q.id == queue_id), None)

    def jobs(self) -> list[JobSnapshot]:
        with self._lock:
            return [j.snapshot() for j in self._jobs]

    def wait(self, timeout: float | None = None) -> JobSnapshot | None:
        """Block until the most recent queue's worker ends (or `timeout` seconds pass); the current job's snapshot."""
        with self._lock:
            queue = self._queues[-1] if self._queues else None
        if queue is None:
            return None
        if queue.thread is not None:
            queue.thread.join(timeout)
        return self.current()
