"""Every file of a run folder is checked when read (issue 21): config.json's dataset_info, vocab.json, the training
state's JSON, metrics.jsonl. Each damage is one line naming the file and the field, in `xaidash explain` as in the
store's API, and `xaidash runs` keeps listing the other runs."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from xaidash.dashboard.cli import main
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelError
from xaidash.models.runs import schema
from xaidash.models.runs.store import Run, load_bundle, runs_root
from xaidash.models.runs.table import runs_table
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny image run and one tiny text run (a vocab.json), copied for each damage."""
    root = tmp_path_factory.mktemp("damaged_sources")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        for name, dataset, model in (("image", "digits", "mlp"), ("text", "cues", "text_cnn")):
            cfg = TrainConfig(dataset=dataset, model=model, epochs=1, batch_size=32, max_train_samples=64, device="cpu")
            result = train(cfg)
            assert result.ok, result.error
            out[name] = result.run_dir
    return out


def _copy(source: Path, name: str) -> Run:
    """A copy of a trained run inside this test's runs root, with id `name`."""
    target = runs_root() / name
    runs_root().mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    return Run(target)


def _edit_config(run: Run, edit) -> None:
    config = json.loads(run.file("config.json").read_text())
    edit(config)
    run.file("config.json").write_text(json.dumps(config))


def _refused_in_one_line(
    run: Run, expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, listed_unreadable: bool = True
) -> None:
    """load_bundle names the file and the field; `xaidash explain` says the same in one line (exit 2, no traceback);
    `xaidash runs` still lists the good run beside the damaged one (marked unreadable when config.json is the
    damaged file: the list reads no other)."""
    with pytest.raises(ModelError) as info:
        load_bundle(run.id, device="cpu")
    message = str(info.value)
    assert expected in message and "\n" not in message, message
    argv = ["explain", "--run", run.id, "--input", "dataset:0", "--methods", "saliency", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {message}", err
    rows = {r["run"]: r for r in runs_table()}
    assert rows["good"]["state"] == "completed" and run.id in rows
    assert rows[run.id]["state"].startswith("unreadable: ") == listed_unreadable
    assert main(["runs"]) == 0 and "good" in capsys.readouterr().out


CONFIG_DAMAGE = {
    # TypeError: DatasetInfo.__init__() got an unexpected keyword argument 'colour' before
    "unknown dataset_info key": (
        lambda c: c["dataset_info"].update(colour="red"),
        True,
        "config.json is damaged: dataset_info: Additional properties are not allowed ('colour' was unexpected).",
    ),
    # KeyError: 'dataset_info' before (the list needs no dataset_info: there the run is listed as it is)
    "no dataset_info": (lambda c: c.pop("dataset_info"), False, "config.json is damaged: dataset_info is missing."),
    "a momentum in words": (
        lambda c: c["train"].update(momentum="high"),
        True,
        "config.json is damaged: train.momentum: 'high' is not of type 'number'.",
    ),
}


@pytest.mark.parametrize("case", list(CONFIG_DAMAGE))
def test_damaged_config_is_named(trained, case: str, capsys, tmp_path: Path) -> None:
    edit, unreadable, expected = CONFIG_DAMAGE[case]
    _copy(trained["image"], "good")
    bad = _copy(trained["image"], "bad")
    _edit_config(bad, edit)
    _refused_in_one_line(bad, f"bad/{expected}", capsys, tmp_path, listed_unreadable=unreadable)


def test_a_run_without_its_training_settings_is_listed_and_named_when_resumed(trained) -> None:
    bad = _copy(trained["image"], "bad")
    bad.update_summary(state="stopped")
    _edit_config(bad, lambda c: c.pop("train"))
    assert {r["run"]: r for r in runs_table()}["bad"]["epochs"].endswith("/?")
    with pytest.raises(ModelError, match=r"^bad/config\.json is damaged: train is missing"):
        train(TrainConfig(epochs=3, device="cpu"), resume="bad")


VOCAB_DAMAGE = {
    "not JSON": ("{'itos': [", "bad/vocab.json is damaged: not JSON ("),
    "itos a number": (
        json.dumps({"kind": "word", "itos": 5}),
        "bad/vocab.json is damaged: itos: 5 is not of type 'array'.",
    ),
    "words that are not strings": (
        json.dumps({"kind": "word", "itos": ["<pad>", "<unk>", 3]}),
        "bad/vocab.json is damaged: itos.2: 3 is not of type 'string'.",
    ),
}


@pytest.mark.parametrize("case", list(VOCAB_DAMAGE))
def test_damaged_vocabulary_is_named(trained, case: str, capsys, tmp_path: Path) -> None:
    text, expected = VOCAB_DAMAGE[case]
    _copy(trained["image"], "good")
    bad = _copy(trained["text"], "bad")
    bad.file("vocab.json").write_text(text)
    _refused_in_one_line(bad, expected, capsys, tmp_path, listed_unreadable=False)


def test_a_training_state_that_is_not_json_is_named_when_resuming(trained) -> None:
    from safetensors.torch import save_file

    from xaidash.models.runs.checkpoint import read_tensors

    run = _copy(trained["image"], "bad")
    run.update_summary(state="stopped")
    for key, expected in (("extra", "extra is not JSON"), ("param_groups", "param_groups is not JSON")):
        tensors, meta = read_tensors(run.file("train_state.safetensors"))
        save_file(tensors, str(run.file("train_state.safetensors")), metadata={**meta, key: "{not json"})
        with pytest.raises(ModelError, match=rf"^bad/train_state\.safetensors is damaged: {expected} \("):
            train(TrainConfig(epochs=3, device="cpu"), resume=run.id)
        save_file(tensors, str(run.file("train_state.safetensors")), metadata=meta)
    tensors, meta = read_tensors(run.file("train_state.safetensors"))
    save_file(tensors, str(run.file("train_state.safetensors")), metadata={**meta, "param_groups": "7"})
    with pytest.raises(ModelError, match="param_groups: not a list of parameter groups"):
        train(TrainConfig(epochs=3, device="cpu"), resume=run.id)


def test_metric_records_that_are_not_objects_are_skipped(trained) -> None:
    run = _copy(trained["image"], "bad")
    good = run.metrics()
    run.file("metrics.jsonl").write_text(run.file("metrics.jsonl").read_text() + "5\n[1, 2]\nnull\n")
    assert run.metrics() == good


def test_dataset_info_schema_names_exactly_the_fields_of_dataset_info() -> None:
    """An unknown key is refused (additionalProperties), so every real field must be declared, and no other."""
    assert set(schema.DATASET_INFO["properties"]) == {f.name for f in fields(DatasetInfo)}
    assert schema.DATASET_INFO["additionalProperties"] is False


def test_a_runs_root_with_every_damage_still_lists_each_run(trained, capsys) -> None:
    _copy(trained["image"], "good")
    damaged = {
        "no-model": lambda r: _edit_config(r, lambda c: c.pop("model")),
        "odd-info": lambda r: _edit_config(r, lambda c: c["dataset_info"].update(colour="red")),
        "not-json": lambda r: r.file("config.json").write_text("{"),
        "bad-summary": lambda r: r.file("summary.json").write_text(json.dumps({"epochs_done": "two"})),
    }
    for name, damage in damaged.items():
        damage(_copy(trained["image"], name))
    rows = {r["run"]: r for r in runs_table()}
    assert set(rows) == {"good", *damaged}
    assert rows["good"]["state"] == "completed"
    for name in damaged:
        assert rows[name]["state"].startswith(f"unreadable: {name}/") and "is damaged" in rows[name]["state"], rows[
            name
        ]
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in rows)
