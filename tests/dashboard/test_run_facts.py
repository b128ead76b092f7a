"""What the pages say about a run and how they draw its curves, without Streamlit: the epochs cell and the
'kept' sentence after a stop (new and old summaries), the settings table, TensorBoard's smoothing."""

from __future__ import annotations

import numpy as np
import pytest

from xaidash.dashboard.components.compare_runs import differing, settings_side_by_side, short_labels
from xaidash.dashboard.components.curves import VALIDATION, curve_frame, epoch_ends, smooth, with_smoothing
from xaidash.dashboard.run_facts import epochs_text, kept_sentence, run_row, settings_rows
from xaidash.models.runs.store import Run


def test_a_stop_after_three_steps_is_never_called_an_epoch():
    config = {"train": {"epochs": 5}}
    summary = {"state": "stopped", "epochs_done": 0, "partial_steps": 3, "steps_per_epoch": 47}
    assert epochs_text(config, summary) == "0/5 (+3/47 steps)"
    assert kept_sentence(summary) == "weights after 3 of 47 steps of epoch 1; no epoch completed"
    # The engine's own sentence wins when the summary has one.
    assert kept_sentence({**summary, "kept": "weights after 3 of 47 steps of epoch 1"}) == (
        "weights after 3 of 47 steps of epoch 1"
    )
    later = {"state": "stopped", "epochs_done": 2, "partial_steps": 5, "steps_per_epoch": 47}
    assert kept_sentence(later) == "weights after 5 of 47 steps of epoch 3; 2 epochs complete"
    assert epochs_text(config, later) == "2/5 (+5/47 steps)"


def test_older_summaries_without_the_new_fields_read_plainly():
    assert epochs_text({"train": {"epochs": 3}}, {"epochs_done": 3}) == "3/3"
    assert kept_sentence({"epochs_done": 2}) == "weights after epoch 2"
    assert kept_sentence({}) == "nothing yet"
    assert epochs_text({"train": {"epochs": None}}, {"epochs_done": 1, "epochs": 4}) == "1/4"


def written_run(root, model: str = "mlp", dataset: str = "shapes", **summary) -> Run:
    run = Run.create(dataset, model, root)
    run.write_config(
        {
            "model": model,
            "dataset": dataset,
            "classes": ["circle", "square", "triangle", "cross"],
            "train": {"epochs": 5, "batch_size": 64, "optimizer": "adamw", "schedule": "onecycle", "augment": "shift"}
            | {"weight_decay": 0.05, "seed": 0, "val_fraction": 0.1, "lr": 0.003},
            "recipe": {"key": dataset, "expected_acc": 0.986},
            "lr": 0.003,
            "device": "cpu",
            "parameters": 12345,
            "train_samples": 900,
            "val_samples": 100,
            "test_samples": 500,
            "created": 1_700_000_000,
        }
    )
    run.update_summary(**summary)
    return run


def test_settings_rows_are_readable_and_complete(tmp_path):
    run = written_run(
        tmp_path,
        state="stopped",
        epochs_done=0,
        partial_steps=3,
        steps_per_epoch=47,
        kept="weights after 3 of 47 steps of epoch 1; no epoch completed",
        train_seconds=4.25,
        samples_per_s=1234.5,
    )
    rows = dict(settings_rows(run))
    assert rows["model"] == "mlp" and rows["data set"] == "shapes"
    assert rows["learning rate"] == "0.003" and rows["weight decay"] == "0.05"
    assert rows["optimizer"] == "adamw" and rows["schedule"] == "onecycle" and rows["augmentation"] == "shift"
    assert rows["recipe"] == "shapes (tested: 98.6%)"
    assert rows["parameters"] == "12,345" and rows["samples (train / val / test)"] == "900 / 100 / 500"
    assert rows["epochs done"] == "0/5 (+3/47 steps)"
    assert rows["kept"] == "weights after 3 of 47 steps of epoch 1; no epoch completed"
    assert rows["training time"] == "4.2 s" and rows["samples/s"] == "1,234"
    assert "steps" not in rows and "memory layout" not in rows  # plain eager steps: nothing to say


def test_settings_rows_say_how_the_steps_ran_when_compiled(tmp_path):
    run = written_run(tmp_path, state="completed", compiled="eager: torch.compile failed (RuntimeError: no compiler)")
    config = run.config()
    config["train"] |= {"compile": "graphs", "channels_last": True}
    run.write_config(config | {"memory_format": "channels_last"})
    rows = dict(settings_rows(run))
    assert rows["steps"] == "eager: torch.compile failed (RuntimeError: no compiler)"
    assert rows["memory layout"] == "channels last (NHWC)"
    run.write_config(config | {"memory_format": "contiguous"})  # asked for, on a model without convolutions
    assert dict(settings_rows(run))["memory layout"] == "standard (channels last needs 2-D convolutions)"


def test_run_rows_flag_poor_runs_and_survive_damage(tmp_path):
    good = written_run(tmp_path, state="completed", epochs_done=5, test_acc=0.99, val_acc=0.98)
    poor = written_run(tmp_path, state="completed", epochs_done=5, test_acc=0.26)
    damaged = Run.create("shapes", "mlp", tmp_path)
    damaged.file("config.json").write_text("{ torn")
    assert run_row(good)["quality"] == "✓ good" and run_row(good)["test acc"] == pytest.approx(99.0)
    assert run_row(poor)["quality"] == "⚠ poor"
    assert run_row(damaged)["state"].startswith("unreadable")


def test_compare_labels_are_unique_and_differing_settings_are_found(tmp_path):
    a = written_run(tmp_path, state="completed")
    b = written_run(tmp_path, model="resnet_small", state="completed")
    c = written_run(tmp_path, state="completed")  # same model, data and minute as `a`
    labels = short_labels([a, b, c])
    assert len(set(labels.values())) == 3
    table = settings_side_by_side([a, b], labels)
    assert list(table.columns) == [labels[a.id], labels[b.id]]
    assert differing(table) == ["model"]


def test_smoothing_is_tensorboards_debiased_ema():
    values = [1.0, 0.0, 1.0, 0.0]
    assert smooth(values, 0.0).tolist() == values
    w = 0.6
    expected, last = [], 0.0
    for n, v in enumerate(values, 1):
        last = last * w + (1 - w) * v
        expected.append(last / (1 - w**n))
    assert np.allclose(smooth(values, w), expected)
    assert smooth([5.0], 0.9)[0] == pytest.approx(5.0)  # debiased: the first point is not pulled to zero


def test_curve_frame_says_what_a_train_point_is_and_marks_epoch_ends():
    new = [
        {"kind": "step", "step": 5, "epoch": 1, "train_loss": 1.2, "train_acc": 0.4, "interval_steps": 5},
        {"kind": "step", "step": 10, "epoch": 1, "train_loss": 0.8, "train_acc": 0.6, "interval_steps": 5},
        {"kind": "epoch", "step": 10, "epoch": 1, "val_loss": 0.7, "val_acc": 0.7},
    ]
    df = curve_frame(new, run="a")
    assert set(df["series"]) == {"train (mean per logging interval)", VALIDATION}
    assert len(df) == 6 and set(df["run"]) == {"a"}
    old = [{"kind": "step", "step": 5, "epoch": 1, "train_loss": 1.2, "train_acc": 0.4}]
    assert set(curve_frame(old)["series"]) == {"train (running mean within each epoch)"}
    assert epoch_ends(new).to_dict("records") == [{"epoch": 1, "step": 10, "label": "epoch 1"}]
    cut = [*new, {"kind": "epoch", "step": 13, "epoch": 2, "val_acc": 0.7, "message": "stopped after 3 of 10 steps"}]
    assert epoch_ends(cut)["label"].to_list() == ["epoch 1", "stopped"]  # a stop is not an epoch's end
    smoothed = with_smoothing(df, 0.5)
    val = smoothed[smoothed.series == VALIDATION]
    assert (val["smoothed"] == val["value"]).all()  # validation points are drawn as measured


def test_many_short_epochs_mark_every_kth_end_and_a_stop():
    from xaidash.dashboard.components.curves import MAX_EPOCH_MARKS, marked_ends

    history: list[dict] = [{"kind": "epoch", "epoch": e, "step": 8 * e} for e in range(1, 81)]
    history[-1]["message"] = "stopped by the user"
    ends = epoch_ends(history)
    marked = marked_ends(ends)
    assert len(ends) == 80 and 1 < len(marked) <= MAX_EPOCH_MARKS + 1
    assert marked["label"].iloc[-1] == "stopped" and (marked["epoch"].diff().dropna() > 1).all()
    few = ends.head(MAX_EPOCH_MARKS)
    assert marked_ends(few).equals(few)


def test_five_hundred_full_batch_epochs_are_marked_at_round_epochs():
    from xaidash.dashboard.components.curves import MAX_EPOCH_MARKS, marked_ends

    ends = epoch_ends([{"kind": "epoch", "epoch": e, "step": e} for e in range(1, 501)])
    marked = marked_ends(ends)["epoch"].to_list()
    assert marked == [100, 200, 300, 400, 500] and len(marked) <= MAX_EPOCH_MARKS
