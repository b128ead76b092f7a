"""The training engine on small built-in data: accuracy, events, stop, resume, failures."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest
import torch
from train_configs import quick

from xaidash.data.registry import load_split
from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import read_tensors
from xaidash.models.runs.store import list_runs, load_bundle
from xaidash.models.runs.table import runs_table
from xaidash.models.training.batches import LoaderData
from xaidash.models.training.config import TrainConfig, TrainEvent, TrainingFailed
from xaidash.models.training.engine import train
from xaidash.models.training.finish import finish_run, write_checkpoint
from xaidash.models.training.loop import run_epoch
from xaidash.models.training.session import setup_run


@pytest.mark.slow  # the shared fixture trains resnet_small on shapes for two epochs
def test_shapes_model_reaches_95_percent(trained_shapes_run):
    # two epochs of resnet_small on shapes (the shared fixture in conftest.py)
    assert trained_shapes_run.state == "completed", trained_shapes_run.error
    assert trained_shapes_run.test_acc >= 0.95, trained_shapes_run.test_acc
    assert trained_shapes_run.epochs_done == 2


def test_events_files_and_reload():
    events: list[TrainEvent] = []
    result = train(quick(), callbacks=[events.append])
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("epoch") == 2 and "step" in kinds
    steps = [e for e in events if e.kind == "step"]
    assert all(0 < e.progress <= 1 and e.samples_per_s > 0 and e.eta_s is not None for e in steps)
    assert steps[-1].step == steps[-1].total_steps
    run = result.run
    for name in ("config.json", "metrics.jsonl", "summary.json", "model.safetensors", "train_state.safetensors"):
        assert run.file(name).is_file(), name
    assert [e for e, _ in run.checkpoints()] == [1, 2]
    config = json.loads(run.file("config.json").read_text())
    assert config["model"] == "mlp" and config["dataset"] == "digits" and len(config["classes"]) == 10
    assert config["dataset_info"]["mean"] and "torch" in config["versions"] and config["device"] == "cpu"
    summary = run.summary()
    assert summary["state"] == "completed" and summary["test_acc"] == pytest.approx(result.test_acc)
    assert sum(map(sum, summary["confusion"])) == config["test_samples"]
    epochs = [r for r in run.metrics() if r["kind"] == "epoch"]
    assert len(epochs) == 2 and all("val_acc" in r for r in epochs)
    assert result.test_acc > 0.8
    # reload gives the same predictions as the model that was trained
    bundle = load_bundle(run.id, device="cpu")
    x = torch.rand(5, 1, 8, 8)
    assert torch.allclose(bundle.predict_proba(x).sum(1), torch.ones(5), atol=1e-5)
    assert list_runs()[0].id == run.id


def test_same_seed_same_weights():
    a = train(quick(epochs=1)).bundle.model.state_dict()
    b = train(quick(epochs=1)).bundle.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def stop_at_first_step_record(stop: threading.Event, steps: list[int]) -> Callable[[TrainEvent], None]:
    def on_event(e: TrainEvent) -> None:
        if e.kind == "step":
            steps.append(e.step)
            stop.set()

    return on_event


def test_stop_in_the_first_epoch_says_exactly_what_was_kept():
    stop, steps = threading.Event(), []
    result = train(quick(epochs=3, batch_size=16), callbacks=[stop_at_first_step_record(stop, steps)], stop=stop)
    assert result.state == "stopped"
    per_epoch = -(-int(len(load_split("digits", "train")) * 0.9) // 16)
    summary = result.run.summary()
    assert summary["state"] == "stopped" and summary["steps_per_epoch"] == per_epoch
    # stopped within one step of the request, and no epoch is counted for a part of one
    assert summary["epochs_done"] == result.epochs_done == 0
    assert summary["partial_steps"] == result.partial_steps == steps[0]
    assert (
        summary["kept"]
        == result.kept
        == f"weights after {steps[0]} of {per_epoch} steps of epoch 1; no epoch completed"
    )
    assert result.run.checkpoints() == []  # no epoch to file the partial weights under
    assert read_tensors(result.run.file("model.safetensors"))[1]["partial"] == "True"
    bundle = load_bundle(result.run.id, device="cpu")  # a valid set of weights is there, and it was tested
    assert bundle.predict_proba(torch.rand(2, 1, 8, 8)).shape == (2, 10)
    assert summary["test_acc"] is not None
    epoch_records = [r for r in result.run.metrics() if r["kind"] == "epoch"]
    assert epoch_records[-1]["step"] == steps[0] and epoch_records[-1]["partial_steps"] == steps[0]
    assert runs_table()[0]["epochs"] == f"0/3 (+{steps[0]}/{per_epoch} steps)"


def test_resume_after_a_stop_in_the_first_epoch_takes_the_rest_of_it():
    stop, steps = threading.Event(), []
    first = train(quick(epochs=2, batch_size=16), callbacks=[stop_at_first_step_record(stop, steps)], stop=stop)
    per_epoch = first.run.summary()["steps_per_epoch"]
    events: list[TrainEvent] = []
    resumed = train(quick(epochs=2), resume=first.run.id, callbacks=[events.append])  # the run's batch size wins
    assert resumed.state == "completed" and resumed.epochs_done == 2 and resumed.partial_steps == 0
    assert resumed.kept == "weights after epoch 2 of 2"
    assert events[0].kind == "start" and events[0].step == steps[0]  # picks up at the step it stopped after
    assert [e.step for e in events if e.kind == "epoch"] == [per_epoch, 2 * per_epoch]
    assert [e for e, _ in resumed.run.checkpoints()] == [1, 2]
    records = resumed.run.metrics()
    assert [r["epoch"] for r in records if r["kind"] == "epoch"] == [1, 2]  # the partial epoch's record gave way
    assert sum(r["interval_steps"] for r in records if r["kind"] == "step") == 2 * per_epoch


def test_step_records_average_over_their_interval_across_epoch_boundaries():
    # 1293 training digits at batch 16: 81 steps per epoch, a record every 4 steps; 81 is not a multiple of 4
    result = train(quick(epochs=2, batch_size=16))
    steps = [r for r in result.run.metrics() if r["kind"] == "step"]
    assert steps[0]["step"] == 4 and all(r["interval_steps"] >= 1 for r in steps)
    assert sum(r["interval_steps"] for r in steps) == steps[-1]["step"] == 162
    across = next(r for r in steps if r["step"] == 84)  # steps 81 (epoch 1) to 84 (epoch 2)
    assert across["epoch"] == 2 and across["interval_steps"] == 4


def test_step_records_are_the_means_of_their_own_steps_not_a_running_mean():
    # batch 512: 3 steps per epoch, one record per step, so each record is exactly one batch
    events: list[TrainEvent] = []
    result = train(quick(epochs=2, batch_size=512), callbacks=[events.append])
    for epoch in (1, 2):
        steps = [e for e in events if e.kind == "step" and e.epoch == epoch]
        (end,) = [e for e in events if e.kind == "epoch" and e.epoch == epoch]
        sizes = [512, 512, result.run.config()["train_samples"] - 1024]
        assert [e.interval_steps for e in steps] == [1, 1, 1]
        weighted = sum(e.train_loss * n for e, n in zip(steps, sizes, strict=True)) / sum(sizes)
        assert end.train_loss == pytest.approx(weighted, rel=1e-5)  # the epoch record keeps the epoch mean
    first_two = [e.train_loss for e in events if e.kind == "step"][:2]
    assert first_two[0] != pytest.approx(first_two[1])  # each record is its own batch, not a mean restarted per epoch


def test_resume_continues_to_more_epochs():
    first = train(quick(epochs=1))
    resumed = train(quick(epochs=3), resume=first.run.id)
    assert resumed.run.id == first.run.id
    assert resumed.state == "completed" and resumed.epochs_done == 3
    assert [e for e, _ in resumed.run.checkpoints()] == [1, 2, 3]
    assert [r["epoch"] for r in resumed.run.metrics() if r["kind"] == "epoch"] == [1, 2, 3]
    with pytest.raises(ModelError, match="already has 3 epochs"):
        train(quick(epochs=3), resume=first.run.id)


def test_nan_loss_fails_with_a_clear_error_recorded_in_the_run():
    result = train(quick(lr=5.0, optimizer="sgd", momentum=0.0, epochs=2))  # diverges within a few steps
    assert result.state == "failed", result.state
    assert "learning rate" in result.error and "lower" in result.error
    assert result.run.summary()["error"] == result.error
    assert result.run.file("model.safetensors").exists()


@pytest.mark.slow
def test_text_model_trains_on_cues_with_a_saved_vocabulary():
    result = train(
        TrainConfig(
            dataset="cues", model="text_cnn", epochs=2, batch_size=64, lr=3e-3, device="cpu", max_train_samples=2000
        )
    )
    assert result.state == "completed" and result.test_acc > 0.8, result.test_acc
    assert result.run.file("vocab.json").exists()
    bundle = load_bundle(result.run.id, device="cpu")
    probs = bundle.predict_proba(["a truly wonderful film", "a dull and awful plot"])
    assert probs.shape == (2, 2)


def test_bad_settings_are_refused_before_a_run_is_written():
    with pytest.raises(ModelError, match="epochs must be at least 1"):
        train(quick(epochs=0))
    with pytest.raises(ModelError, match="needs 1x28x28"):
        train(quick(model="simple_cnn"))
    assert list_runs() == []


def test_augmentation_runs_on_images():
    result = train(quick(epochs=1, augment="shift+flip"))
    assert result.state == "completed"


def test_out_of_memory_fails_with_a_clear_error_recorded_in_the_run(monkeypatch):
    """A CUDA OOM inside a step ends the run as failed, with advice, instead of crashing the caller."""
    from dataclasses import replace

    from xaidash.models import registry

    class OOMOnForward(torch.nn.Module):
        def __init__(self, info, **kw):
            super().__init__()
            self.linear = torch.nn.Linear(64, info.num_classes)

        def forward(self, x):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setitem(registry.MODELS._entries, "mlp", replace(registry.get_spec("mlp"), build=OOMOnForward))
    result = train(quick(batch_size=4096))
    assert result.state == "failed"
    assert "Out of memory" in result.error and "batch size" in result.error
    assert result.run.summary()["error"] == result.error


# --- the steps of a run, one at a time -----------------------------------------------------------------------------


class Raises(torch.nn.Module):
    """A model whose forward pass raises `error` (an allocator failing mid-step)."""

    def __init__(self, error: Exception):
        super().__init__()
        self.error = error
        self.linear = torch.nn.Linear(64, 10)

    def forward(self, x):
        raise self.error


def events_of(kind: str, events: list[TrainEvent]) -> list[TrainEvent]:
    return [e for e in events if e.kind == kind]


def test_setup_writes_config_and_a_running_summary_but_no_weights():
    session = setup_run(quick(epochs=3, batch_size=64))
    assert session.start_epoch == 0 and session.step == 0 and not session.resumed
    assert session.total_steps == 3 * session.steps_per_epoch == 3 * -(-len(session.data.train) // 64)
    assert session.run.config()["train"]["epochs"] == 3
    assert session.run.summary()["state"] == "running" and session.run.summary()["epochs_done"] == 0
    assert not session.run.file("model.safetensors").exists()


def test_epoch_returns_its_metrics_and_emits_steps():
    session = setup_run(quick(epochs=1))
    events: list[TrainEvent] = []
    result = run_epoch(session, 1, threading.Event(), events.append)
    assert result is not None and not result.stopped
    e = result.event
    assert e.kind == "epoch" and e.epoch == 1 and e.step == session.step == session.steps_per_epoch
    assert 0 <= e.train_acc <= 1 and e.train_loss > 0 and 0 <= e.val_acc <= 1 and e.val_loss > 0
    steps = events_of("step", events)
    assert steps and steps[-1].step == session.steps_per_epoch and events_of("epoch", events) == []
    assert [r["kind"] for r in session.records] == ["step"] * len(steps)  # the epoch record is the checkpoint's


def test_epoch_with_a_non_finite_loss_raises_training_failed_with_advice():
    session = setup_run(quick(lr=0.5))
    with torch.no_grad():
        next(session.model.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingFailed, match=r"Loss became nan at epoch 1, step 1: .*\(0\.5\).*--lr 0\.05"):
        run_epoch(session, 1, threading.Event(), lambda e: None)
    # nothing finite was ever checked: the run is back at the weights it started from
    assert session.step == 0 and not session.run.file("model.safetensors").exists()


class NaNFromCall(torch.nn.Module):
    """A model whose training forward passes return NaN logits from call `bad` on."""

    def __init__(self, inner: torch.nn.Module, bad: int):
        super().__init__()
        self.inner = inner
        self.bad, self.calls = bad, 0

    def forward(self, x):
        out = self.inner(x)
        if self.training:
            self.calls += 1
            if self.calls >= self.bad:
                return out * float("nan")
        return out


def test_a_loss_turning_nan_mid_epoch_is_reported_at_its_step_and_the_last_finite_weights_are_kept():
    session = setup_run(quick(epochs=1, batch_size=16))
    log_every = max(1, session.steps_per_epoch // 20)
    bad_step = 3 * log_every + 2  # between two step records: found at the next one
    model = NaNFromCall(session.model, bad_step)
    session.model = session.train_model = model  # the same parameters: the session's optimizer trains them
    kept: dict[int, dict[str, torch.Tensor]] = {}

    def remember(e: TrainEvent) -> None:
        kept[e.step] = {k: v.clone() for k, v in model.state_dict().items()}

    with pytest.raises(
        TrainingFailed, match=rf"Loss became nan at epoch 1, step {bad_step}: .*after step {3 * log_every}"
    ):
        run_epoch(session, 1, threading.Event(), remember)
    assert session.step == 3 * log_every
    after = model.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert all(torch.equal(after[k], kept[3 * log_every][k]) for k in after)  # the last step record's weights
    assert sorted(kept) == [log_every, 2 * log_every, 3 * log_every]  # no record of a NaN interval


class HostReads(torch.Tensor):
    """A tensor that counts how often the host reads a value computed from it (bool, item, float, int,
    tolist): every tensor the training step derives from the model's output is one too."""

    reads = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("__bool__", "item", "__float__", "__int__", "tolist", "__index__"):
            HostReads.reads += 1
        return super().__torch_function__(func, types, args, kwargs or {})


class CountsReads(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        out = self.inner(x)
        return out.as_subclass(HostReads) if self.training else out


def test_training_steps_read_nothing_back_to_the_host_between_step_records():
    """On a GPU a host read waits for every queued kernel: the step loop reads its loss and metrics only at the
    step records (about 20 per epoch), never per step."""
    session = setup_run(quick(epochs=1, batch_size=8))
    session.model = CountsReads(session.model)
    session.train_model = session.model
    HostReads.reads = 0
    events: list[TrainEvent] = []
    run_epoch(session, 1, threading.Event(), events.append)
    records = len(events_of("step", events))
    assert session.steps_per_epoch >= 100 and records <= 21
    assert HostReads.reads <= 4 * records + 4, (HostReads.reads, session.steps_per_epoch)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "Out of memory on cpu at batch size 64",
        ),
        (RuntimeError("[enforce fail] DefaultCPUAllocator: out of memory"), "Out of memory at batch size 64: lower"),
    ],
)
def test_epoch_out_of_memory_raises_training_failed_with_advice(error, message):
    session = setup_run(quick())
    session.model = Raises(error)
    with pytest.raises(TrainingFailed, match=message) as failed:
        run_epoch(session, 1, threading.Event(), lambda e: None)
    assert "batch size" in str(failed.value) and failed.value.__cause__ is error


def test_epoch_lets_other_runtime_errors_through():
    session = setup_run(quick())
    session.model = Raises(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        run_epoch(session, 1, threading.Event(), lambda e: None)


def test_epoch_stopped_before_its_first_step_did_not_happen():
    session = setup_run(quick())
    stop = threading.Event()
    stop.set()
    assert run_epoch(session, 1, stop, lambda e: None) is None
    assert session.step == 0


def test_checkpoint_writes_weights_state_record_and_summary():
    session = setup_run(quick(epochs=2))
    result = run_epoch(session, 1, threading.Event(), lambda e: None)
    write_checkpoint(session, result)
    run = session.run
    assert [e for e, _ in run.checkpoints()] == [1]
    assert read_tensors(run.file("model.safetensors"))[1] == {
        "epoch": "1",
        "partial": "False",
        "steps": str(session.steps_per_epoch),
    }
    assert json.loads(read_tensors(run.file("train_state.safetensors"))[1]["extra"]) == {
        "epoch": 1,
        "step": session.steps_per_epoch,
        "partial_steps": 0,
    }
    assert run.metrics()[-1]["kind"] == "epoch" and run.metrics()[-1]["val_acc"] == result.event.val_acc
    assert run.summary()["epochs_done"] == 1 and run.summary()["val_acc"] == result.event.val_acc
    assert run.summary()["partial_steps"] == 0 and run.summary()["kept"] == "weights after epoch 1 of 2"


def test_checkpoint_of_a_stopped_epoch_is_partial_and_resumes_inside_that_epoch():
    session = setup_run(quick(epochs=2, batch_size=16))
    stop = threading.Event()
    result = run_epoch(session, 1, stop, lambda e: stop.set() if e.kind == "step" else None)
    assert result is not None and result.stopped and result.steps == session.step == 4
    assert result.event.message == f"stopped after 4 of {session.steps_per_epoch} steps of this epoch"
    write_checkpoint(session, result)
    assert read_tensors(session.run.file("model.safetensors"))[1]["partial"] == "True"
    extra = json.loads(read_tensors(session.run.file("train_state.safetensors"))[1]["extra"])
    assert extra == {"epoch": 0, "step": 4, "partial_steps": 4}
    summary = session.run.summary()
    assert (summary["epochs_done"], summary["partial_steps"]) == (0, 4)

    again = setup_run(quick(epochs=2), resume=session.run.id)
    assert (again.start_epoch, again.skip_steps, again.step) == (0, 4, 4)
    assert again.schedule.last_epoch == 4
    rest = run_epoch(again, 1, threading.Event(), lambda e: None)
    assert rest is not None and not rest.stopped and again.step == rest.steps == again.steps_per_epoch


def test_restore_continues_from_the_checkpoint():
    first = setup_run(quick(epochs=1, schedule="onecycle"))
    write_checkpoint(first, run_epoch(first, 1, threading.Event(), lambda e: None))
    saved = {k: v.clone() for k, v in first.model.state_dict().items()}

    session = setup_run(quick(epochs=3), resume=first.run.id)
    assert session.resumed and session.run.id == first.run.id and session.cfg.schedule == "onecycle"
    assert session.start_epoch == 1 and session.step == first.steps_per_epoch
    assert session.schedule.last_epoch == first.steps_per_epoch  # fast-forwarded, not restarted
    assert all(torch.equal(session.model.state_dict()[k], v) for k, v in saved.items())
    assert session.optimizer.state_dict()["state"]  # Adam's moments came back
    assert session.generator.initial_seed() == session.cfg.seed + 1
    assert [r["kind"] for r in session.records] == [r["kind"] for r in first.run.metrics()]
    assert session.run.summary()["state"] == "running" and session.run.summary()["epochs"] == 3


def test_restore_refuses_a_run_with_no_epoch_left():
    first = setup_run(quick(epochs=1))
    write_checkpoint(first, run_epoch(first, 1, threading.Event(), lambda e: None))
    with pytest.raises(ModelError, match="already has 1 epochs"):
        setup_run(quick(epochs=1), resume=first.run.id)


def test_finish_after_a_failure_keeps_weights_and_skips_the_test_split():
    session = setup_run(quick())
    events: list[TrainEvent] = []
    result = finish_run(session, "failed", "it broke", 1, events.append)
    assert result.state == "failed" and result.error == "it broke" and result.test_acc is None
    assert read_tensors(session.run.file("model.safetensors"))[1] == {"epoch": "1", "partial": "True", "failed": "True"}
    assert session.run.summary()["kept"] == (
        f"the last weights before the failure, after 0 of {session.steps_per_epoch} steps of epoch 1; no epoch completed"
    )
    assert session.run.summary()["state"] == "failed" and session.run.metrics() == []
    (end,) = events
    assert end.kind == "end" and end.state == "failed" and end.message == "it broke" and end.epoch == 1


def test_finish_evaluates_the_test_split():
    session = setup_run(quick(epochs=1))
    write_checkpoint(session, run_epoch(session, 1, threading.Event(), lambda e: None))
    result = finish_run(session, "completed", None, 1, lambda e: None)
    assert result.test_acc is not None and result.epochs_done == 1
    assert session.run.metrics()[-1] == {"kind": "test", "test_loss": result.test_loss, "test_acc": result.test_acc}
    summary = session.run.summary()
    assert summary["state"] == "completed" and sum(map(sum, summary["confusion"])) == len(session.data.test)


def test_an_image_folder_streams_through_a_data_loader(tmp_path):
    from PIL import Image

    for name, colour in {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (20, 40, 210)}.items():
        (tmp_path / "colours" / name).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (10 + i, 12), colour).save(tmp_path / "colours" / name / f"{i}.png")
    session = setup_run(quick(dataset=f"imagefolder:{tmp_path / 'colours'}?size=16", epochs=1, batch_size=4))
    assert isinstance(session.data.train, LoaderData) and isinstance(session.data.test, LoaderData)
    result = run_epoch(session, 1, threading.Event(), lambda e: None)
    assert result is not None and session.step == session.steps_per_epoch == -(-len(session.data.train) // 4)
    write_checkpoint(session, result)
    assert finish_run(session, "completed", None, 1, lambda e: None).test_acc is not None
