"""Damaged run folders (issue 12): each damage gets one message naming the file and the field, the other
runs are still listed, and nothing allocates before sizes are checked."""

from __future__ import annotations

import json

import pytest

from xaidash.dashboard.cli import main
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import load_bundle, resolve_run
from xaidash.models.runs.table import runs_table
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

pytestmark = pytest.mark.faults
SMALL = {"dataset": "digits", "model": "mlp", "epochs": 1, "max_train_samples": 200, "device": "cpu"}


@pytest.fixture(scope="module")
def trained_config() -> dict:
    return resolve_run(train(TrainConfig(**SMALL)).run.id).config()


def damage(config: dict, edit) -> dict:
    copy = json.loads(json.dumps(config))
    edit(copy)
    return copy


CASES = {
    "a list": (lambda c: [c], "the whole file: [{"),
    "a string for dataset_info": (lambda c: c.update(dataset_info="shapes"), "dataset_info: 'shapes' is not of type"),
    "no model": (lambda c: c.pop("model"), "model is missing"),
    "dropout 7": (lambda c: c["model_options"].update(dropout=7), "model_options.dropout: 7 is greater than"),
    "a vocabulary of 1e9": (
        lambda c: c["model_options"].update(vocab_size=10**9),
        "model_options.vocab_size: 1000000000 is greater than the maximum of 5000000",
    ),
    "an input of 1e6 pixels per side": (
        lambda c: c["dataset_info"].update(input_shape=[1, 10**6, 10**6]),
        "1000000 is greater than the maximum of 4096",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_damage_is_named_and_the_other_runs_still_list(trained_config: dict, case: str, capsys) -> None:
    edit, expected = CASES[case]
    good = train(TrainConfig(**SMALL)).run
    bad = train(TrainConfig(**SMALL)).run
    document = edit(trained_config) if case == "a list" else damage(trained_config, edit)
    bad.file("config.json").write_text(json.dumps(document))
    with pytest.raises(ModelError) as info:
        load_bundle(bad.id, device="cpu")
    message = str(info.value)
    assert message.startswith(f"{bad.id}/config.json is damaged: ") and expected in message, message
    rows = {r["run"]: r for r in runs_table()}
    assert rows[good.id]["state"] == "completed" and rows[bad.id]["state"].startswith("unreadable: ")
    assert main(["runs"]) == 0 and good.id in capsys.readouterr().out


def test_non_utf8_and_deeply_nested_files_are_named(trained_config: dict) -> None:
    run = train(TrainConfig(**SMALL)).run
    run.file("config.json").write_bytes(b'{"model": "\xff\xfe"}')
    with pytest.raises(ModelError, match=r"config\.json is damaged: not UTF-8"):
        run.config()
    run.file("config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelError, match="nested too deeply"):
        run.config()


def test_an_absurd_epoch_in_the_training_state_is_refused_before_resuming() -> None:
    from safetensors.torch import save_file

    from xaidash.models.runs.checkpoint import read_tensors

    run = train(TrainConfig(**SMALL)).run
    tensors, meta = read_tensors(run.file("train_state.safetensors"))
    extra = json.loads(meta["extra"])
    meta["extra"] = json.dumps({**extra, "epoch": -1})
    save_file(tensors, str(run.file("train_state.safetensors")), metadata=meta)
    with pytest.raises(ModelError, match=r"train_state\.safetensors is damaged: epoch: -1 is less than the minimum"):
        train(TrainConfig(epochs=3, device="cpu"), resume=run.id)
    assert not list(run.path.glob("checkpoints/epoch_-*"))
