"""`import_language_model("hf:FOLDER")` of small random Llama and GPT-2 models: the run folder it writes, its listing,
and loading it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_lm import save_tiny_folder, tiny_lm

from xaidash.dashboard.cli import main
from xaidash.models.language.convert import (
    SMOLLM2_CONVERT_S,
    convert_time_text,
    import_language_model,
    is_language_source,
)
from xaidash.models.language.loading import LM_FOLDER, MARK, MODALITY, is_language_run, load_language_model
from xaidash.models.registry import ModelError
from xaidash.models.runs import schema as run_schema
from xaidash.models.runs.store import list_runs, load_bundle, resolve_run
from xaidash.models.runs.table import runs_table

KINDS = ("llama", "gpt2")


@pytest.fixture(params=KINDS)
def imported(request, tmp_path):
    kind = request.param
    folder = save_tiny_folder(tmp_path / f"tiny-{kind}", kind, seed=3)
    return kind, folder, import_language_model(f"hf:{folder}")


def test_config_is_schema_valid_and_describes_the_model(imported):
    kind, folder, run = imported
    assert is_language_source(f"hf:{folder}") and is_language_run(run)
    config = json.loads(run.file("config.json").read_text())
    run_schema.check(config, run_schema.CONFIG, run.file("config.json"))  # raises on a schema violation
    assert config == run.config()
    reference = tiny_lm(kind, seed=3)
    facts = config[MARK]
    assert config["modality"] == MODALITY and config["dataset"] is None and config["model"] == folder.name
    assert facts["kind"] == "hf" and facts["architecture"] == reference.config.model_type
    assert (facts["layers"], facts["heads"]) == (reference.num_layers, reference.num_heads)
    assert facts["parameters"] == sum(p.numel() for p in reference.model.parameters())
    assert facts["chat_template"] is True and facts["context"] == reference.context
    assert run.summary()["state"] == "imported"
    assert (run.path / LM_FOLDER / "model.safetensors").is_file()
    assert not (run.path.parent / ".importing").exists()  # the staging area is gone


def test_listed_by_xaidash_runs(imported, capsys):
    _, folder, run = imported
    rows = {row["run"]: row for row in runs_table()}
    assert rows[run.id]["model"] == folder.name and rows[run.id]["state"] == "imported"
    assert all(isinstance(value, str) for value in rows[run.id].values())  # the table's cells are text
    assert [r.id for r in list_runs()] == [run.id]
    assert main(["runs"]) == 0
    table = capsys.readouterr().out
    assert run.id in table and "imported" in table


def test_loads_back_with_the_same_logits_and_tokenizer(imported):
    kind, _, run = imported
    reference = tiny_lm(kind, seed=3)
    lm = load_language_model(resolve_run(run.id), device="cpu")
    ids = torch.tensor([[2, 4, 7, 8, 9, 10, 11, 12], [5, 5, 6, 13, 14, 15, 16, 3]])
    torch.testing.assert_close(lm.logits(ids), reference.logits(ids), rtol=0, atol=1e-6)
    text = "what is the capital of france ?"
    assert lm.tokenizer(text)["input_ids"] == reference.tokenizer(text)["input_ids"]
    assert lm.tokenizer.chat_template == reference.tokenizer.chat_template
    assert (lm.num_layers, lm.num_heads, lm.parts) == (reference.num_layers, reference.num_heads, reference.parts)
    assert lm.run_dir == run.path


def test_load_bundle_points_to_the_generate_page(imported):
    _, _, run = imported
    with pytest.raises(ModelError, match="Generate page") as info:
        load_bundle(run.id, device="cpu")
    assert run.id in str(info.value) and "xaidash generate" in str(info.value)


def test_a_name_given_names_the_run(tmp_path):
    folder = save_tiny_folder(tmp_path / "folder", "llama")
    run = import_language_model(f"hf:{folder}", name="My tiny model")
    assert run.config()["model"] == "My tiny model" and run.id.endswith("imported-My-tiny-model")
    again = import_language_model(f"hf:{folder}", name="My tiny model")  # a second import: a second run
    assert again.id != run.id and len(list_runs()) == 2


def test_a_classifier_run_is_not_a_language_model(tmp_path):
    from inspect_runs import make_run

    run = make_run(tmp_path / "runs", "shapes", "simple_cnn", epochs=1)
    assert not is_language_run(run)
    with pytest.raises(ModelError, match="not a generative language model"):
        load_language_model(run)


def test_the_conversion_time_said_is_one_measured_figure() -> None:
    """Home's button, the Generate page and the manual state SmolLM2's conversion time from one constant (measured:
    43 s lightly loaded, 109 s with six other jobs on 2 cores; the issue saw 105 s against "about 30 s")."""
    assert SMOLLM2_CONVERT_S == 60.0
    said = convert_time_text()
    assert said == "about 1 minute on 2 CPU cores, up to 2 minutes while other work runs"
    manual = " ".join((Path(__file__).parents[3] / "docs" / "language-models.md").read_text().split())
    assert said in manual
