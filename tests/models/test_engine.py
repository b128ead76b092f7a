"""The training engine on small built-in data: accuracy, events, stop, resume, failures."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from xaidash.models.engine import TrainConfig, TrainEvent, train
from xaidash.models.registry import ModelError
from xaidash.models.runstore import list_runs, load_bundle


def quick(**kw) -> TrainConfig:
    base = dict(dataset="digits", model="mlp", epochs=2, batch_size=64, lr=3e-3, device="cpu")
    return TrainConfig(**{**base, **kw})


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
