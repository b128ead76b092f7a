"""The training engine on small built-in data: accuracy, events, stop, resume, failures."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from xaidash.models.batches import LoaderData
from xaidash.models.checkpoint import read_tensors
from xaidash.models.engine import (
    TrainConfig,
    TrainEvent,
    TrainingFailed,
    finish_run,
    run_epoch,
    setup_run,
    train,
    write_checkpoint,
)
from xaidash.models.registry import ModelError
from xaidash.models.runstore import list_runs, load_bundle


def quick(**kw) -> TrainConfig:
    base = {"dataset": "digits", "model": "mlp", "epochs": 2, "batch_size": 64, "lr": 3e-3, "device": "cpu"}
    return TrainConfig(**{**base, **kw})


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


def test_stop_is_honoured_within_one_step_and_leaves_a_checkpoint():
    stop = threading.Event()
    steps = []

    def on_event(e: TrainEvent) -> None:
        if e.kind == "step":
            steps.append(e.step)
            stop.set()

    result = train(quick(epochs=3, batch_size=16), callbacks=[on_event], stop=stop)
    assert result.state == "stopped"
    assert result.run.summary()["state"] == "stopped"
    bundle = load_bundle(result.run.id, device="cpu")  # a valid checkpoint is there
    assert bundle.predict_proba(torch.rand(2, 1, 8, 8)).shape == (2, 10)
    epoch_records = [r for r in result.run.metrics() if r["kind"] == "epoch"]
    assert epoch_records[-1]["step"] <= steps[0] + 1


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

    monkeypatch.setitem(registry._REGISTRY, "mlp", replace(registry.get_spec("mlp"), build=OOMOnForward))
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
    assert session.step == 0 and not session.run.file("model.safetensors").exists()


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
    assert read_tensors(run.file("model.safetensors"))[1] == {"epoch": "1", "partial": "False"}
    assert json.loads(read_tensors(run.file("train_state.safetensors"))[1]["extra"]) == {
        "epoch": 1,
        "step": session.steps_per_epoch,
    }
    assert run.metrics()[-1]["kind"] == "epoch" and run.metrics()[-1]["val_acc"] == result.event.val_acc
    assert run.summary()["epochs_done"] == 1 and run.summary()["val_acc"] == result.event.val_acc


def test_checkpoint_of_a_stopped_epoch_is_partial_and_resumes_from_the_epoch_before():
    session = setup_run(quick(epochs=2, batch_size=16))
    stop = threading.Event()
    result = run_epoch(session, 1, stop, lambda e: stop.set() if e.kind == "step" else None)
    assert result is not None and result.stopped and result.event.message == "stopped during this epoch"
    write_checkpoint(session, result)
    assert read_tensors(session.run.file("model.safetensors"))[1]["partial"] == "True"
    assert json.loads(read_tensors(session.run.file("train_state.safetensors"))[1]["extra"])["epoch"] == 0


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
    assert read_tensors(session.run.file("model.safetensors"))[1] == {"epoch": "0", "partial": "True"}
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
