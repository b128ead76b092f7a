"""`xaidash import` of generative language models (smollm2, gguf:FILE, hf:FOLDER of a causal LM): routed to
models/language/convert.py, the run id printed last with the model's facts, classifier options refused with nothing
written, and `xaidash runs` listing the run as imported with no data set."""

from __future__ import annotations

from pathlib import Path

import pytest
from smollm2_run import smollm2_run
from tiny_gguf import write_gguf
from tiny_lm import save_tiny_folder

from xaidash.dashboard.cli import main
from xaidash.models.external import ImportOptions, import_model
from xaidash.models.external import runs as external_runs
from xaidash.models.external.runs import describe
from xaidash.models.language.loading import is_language_run
from xaidash.models.runs.store import list_runs, resolve_run, runs_root


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def facts(err: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in err.splitlines() if ": " in line)}


def test_a_causal_lm_folder_becomes_a_language_model_run(tmp_path: Path, capsys) -> None:
    folder = save_tiny_folder(tmp_path / "tiny")
    code, out, err = run_cli(capsys, "import", f"hf:{folder}", "--name", "tiny chat")
    assert code == 0, err
    run = resolve_run(out.strip().splitlines()[-1])  # the run id is the last line
    assert is_language_run(run) and run.config()["model"] == "tiny chat"
    said = facts(err)
    assert said["layers"] == "2" and said["heads"] == "4" and said["chat template"] == "yes"
    assert said["architecture"] == "llama" and said["context"] == "512 tokens"
    assert said["parameters"].replace(",", "").isdigit() and said["converted in"].endswith(" s")
    assert f"xaidash generate --run {run.id}" in err
    code, out, _ = run_cli(capsys, "runs")
    row = next(line for line in out.splitlines() if line.startswith(run.id)).split()
    assert code == 0 and row[1:5] == ["tiny", "chat", "(none)", "imported"]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--classes", "a,b"], "--classes does not apply to a generative language model"),
        (["--dataset", "sst2"], "--dataset does not apply"),
        (["--input-shape", "3x8x8", "--mean", "0.5"], "--input-shape, --mean do not apply"),
        (["--option", "x=1"], "--option does not apply"),
    ],
)
def test_classifier_options_are_refused_with_nothing_written(tmp_path: Path, capsys, flags, said) -> None:
    folder = save_tiny_folder(tmp_path / "tiny")
    code, out, err = run_cli(capsys, "import", f"hf:{folder}", *flags)
    assert code == 2 and said in err and "Traceback" not in err and out == ""
    assert list_runs() == [] and (not runs_root().exists() or not any(runs_root().iterdir()))


def test_smollm2_and_gguf_sources_go_to_the_language_importer(tmp_path: Path, monkeypatch) -> None:
    folder = save_tiny_folder(tmp_path / "tiny")
    real = external_runs.import_language_model
    asked: list[tuple[str, str]] = []

    def convert(source: str, *, name: str = "", root: Path | None = None):
        asked.append((source, name))
        return real(f"hf:{folder}", name=name, root=root)

    monkeypatch.setattr(external_runs, "import_language_model", convert)
    for source in ("smollm2", f"gguf:{tmp_path / 'model.gguf'}", f"hf:{tmp_path / 'model.gguf'}"):
        imported = import_model(source, ImportOptions(name="n"))
        assert is_language_run(imported.run)
    assert asked == [("smollm2", "n"), (f"gguf:{tmp_path / 'model.gguf'}", "n"), (f"hf:{tmp_path / 'model.gguf'}", "n")]


def test_import_gguf_prints_its_facts_and_the_run_id_last(tmp_path: Path, capsys) -> None:
    path = write_gguf(tmp_path / "tiny.gguf")
    code, out, err = run_cli(capsys, "import", f"gguf:{path}")
    assert code == 0, err
    run = resolve_run(out.strip().splitlines()[-1])
    said = facts(err)
    assert said["model"] == "tiny" and said["layers"] == "1" and said["heads"] == "2" and said["chat template"] == "yes"
    assert is_language_run(run)


@pytest.mark.slow
def test_smollm2_is_described_by_its_facts(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What `xaidash import smollm2` prints after importing (the session's shared import, made by the same function)."""
    said = dict(describe(smollm2_run(tmp_path_factory)))
    assert said["model"] == "SmolLM2-135M-Instruct" and said["layers"] == "30" and said["heads"] == "9"
    assert said["parameters"] == "134,515,008 (134.5M)" and said["chat template"] == "yes"
