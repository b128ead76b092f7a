"""What `explain`, `train` and `serve` refuse before doing anything (issue 15): a run whose training failed or whose
weights hold NaN (with --force to look anyway), numeric settings out of range, texts over the length limit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from xaidash.dashboard.cli import main
from xaidash.explainers import explain
from xaidash.explainers.params import MAX_TEXT_CHARS, ExplainError
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.store import WEIGHTS, Run, list_runs, load_bundle, resolve_run, runs_root
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("refusal_runs")


@pytest.fixture(autouse=True)
def _runs_in_root(_isolated_roots: None, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(root))


def _train(root: Path, dataset: str, model: str) -> Run:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        result = train(
            TrainConfig(dataset=dataset, model=model, epochs=1, batch_size=32, max_train_samples=64, device="cpu")
        )
    assert result.ok, result.error
    return result.run


@pytest.fixture(scope="module")
def good_run(root: Path) -> Run:
    return _train(root, "shapes", "resnet_small")


@pytest.fixture(scope="module")
def nan_run(root: Path, good_run: Run) -> Run:
    """A run whose weights were poisoned with NaN after training (what a diverged training leaves)."""
    run = Run(root / f"{good_run.id}-diverged")
    shutil.copytree(good_run.path, run.path)
    model = load_bundle(run, device="cpu").model
    with torch.no_grad():
        next(p for p in model.parameters() if p.dim() > 1).fill_(float("nan"))
    save_weights(model, run.file(WEIGHTS))
    return run


def test_a_nan_run_is_refused_and_force_explains_it_with_a_warning(nan_run, good_run, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["explain", "--run", nan_run.id, "--input", "dataset:0", "--methods", "saliency", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "NaN or infinite" in err and "--force" in err and not out.exists()
    assert main([*argv, "--force"]) == 0
    assert "warning:" in capsys.readouterr().err and (out / "report.json").is_file()
    assert resolve_run("latest").id == good_run.id  # latest never picks the poisoned run, though it is newer


def test_a_failed_run_is_refused(good_run, tmp_path, capsys):
    good_run.update_summary(state="failed", error="the loss became NaN at step 3")
    try:
        code = main(["explain", "--run", good_run.id, "--input", "dataset:0", "--out", str(tmp_path / "o")])
        assert code == 2 and "training failed (the loss became NaN at step 3)" in capsys.readouterr().err
    finally:
        good_run.update_summary(state="completed", error=None)


@pytest.mark.parametrize(
    "option",
    [
        ["--batch-size", "0"],
        ["--batch-size", "-1"],
        ["--batch-size", "10000000"],
        ["--steps", "1"],
        ["--top-k", "0"],
        ["--background", "-2"],
        ["--seed", "-3"],
        ["--batch-size", "many"],
    ],
)
def test_explain_numbers_are_checked_while_parsing(option, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main(["explain", "--run", "latest", "--input", "dataset:0", "--out", str(out), *option])
    assert stop.value.code == 2 and option[0] in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--max-train-samples", "-5"], "training-sample cap must be at least 0"),
        (["--batch-size", "0"], "batch size must be at least 1"),
        (["--epochs", "200000"], "epochs must be at most 100000"),
        (["--weight-decay", "nan"], "weight decay"),
        (["--lr", "inf"], "learning rate"),
        (["--label-smoothing", "1"], "label smoothing"),
        (["--val-fraction", "-0.1"], "validation fraction"),
        (["--momentum", "1.5"], "momentum"),
        (["--workers", "-1"], "workers"),
        (["--seed", "-1"], "seed"),
    ],
)
def test_train_numbers_are_checked_before_a_run_folder_is_written(option, says, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "fresh"))
    assert main(["train", "--dataset", "digits", "--model", "mlp", "--device", "cpu", *option]) == 2
    assert says in capsys.readouterr().err
    assert not runs_root().exists() or not list_runs()


def test_serve_port_is_checked(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--port", "0"])
    assert stop.value.code == 2 and "--port" in capsys.readouterr().err


def test_api_explains_long_texts_on_the_words_read_and_refuses_impossible_batch_sizes(root, good_run, monkeypatch):
    """Issue 36 changed the first half: a text over 20,000 characters was refused; every method now explains the
    words the model reads (its tokenizer's max_length), and only a model that reads more than 20,000 characters is
    refused."""
    text_run = _train(root, "cues", "text_cnn")
    bundle = load_bundle(text_run, device="cpu")
    e = explain(bundle, "word " * 4000 + "x", method="saliency")
    assert e.tokens == [["word"] * bundle.tokenizer.max_length]
    assert explain(bundle, "a short text", method="saliency").attributions  # within the limit: explained
    # a model that reads 5,000 words: the part it reads has 24,999 characters
    monkeypatch.setattr(bundle.tokenizer, "max_length", 5000)
    with pytest.raises(ExplainError, match=r"24,999 characters; at most 20,000"):
        explain(bundle, "word " * 5000 + "x", method="saliency")
    image_bundle = load_bundle(good_run, device="cpu")
    with pytest.raises(ExplainError, match="batch_size=0"):
        explain(image_bundle, torch.rand(1, *image_bundle.info.input_shape), method="saliency", batch_size=0)
    assert MAX_TEXT_CHARS == 20_000


def test_a_5mb_text_file_is_explained_by_every_method_on_the_words_the_model_reads(root, tmp_path, capsys):
    """Issue 36: `xaidash explain` on a 5 MB text refused it (`lime: failed: … at most 20,000 characters`, exit 1).
    Now LIME, like saliency and KernelSHAP, explains the model's first 64 words, the note says so, exit 0."""
    import json

    from xaidash.data.tokenizer import split_words

    text_run = _train(root, "cues", "text_cnn")
    words = ["the", "film", "was", "wonderful", "dreadful", "and", "cast", "seemed", ",", "plot"]
    text = " ".join(words[(i * 7) % len(words)] for i in range(900_000))
    assert len(text) > 4_500_000
    path = tmp_path / "long.txt"
    path.write_text(text)
    out = tmp_path / "out"
    argv = ["explain", "--run", text_run.id, "--input", str(path), "--methods", "lime,saliency,shap_kernel"]
    assert main([*argv, "--param", "samples=300", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: The model reads only the first 64 of 900,000 words" in err and "failed" not in err, err
    report = json.loads((out / "report.json").read_text())
    assert any("first 64 of 900,000 words" in n for n in report["notes"])
    read = split_words(text)[:64]
    for e in report["explanations"]:
        assert e["error"] is None and e["figure"]["words"] == read, e["method"]
        assert len(e["figure"]["scores"]) == 64
    lime = next(e for e in report["explanations"] if e["method"] == "lime")
    assert lime["params"]["samples"] == 300 and (out / lime["files"]["map"]).is_file()


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--device", "bogus"], "Unknown device 'bogus': use auto, cpu, cuda, cuda:N (N a GPU index), mps"),
        (["--device", "cuda:x"], "Unknown device 'cuda:x'"),
    ],
)
def test_explain_device_is_checked_while_parsing(option, says, tmp_path, capsys):
    """A RuntimeError traceback from torch.device before (issue 21)."""
    with pytest.raises(SystemExit) as stop:
        main(["explain", "--run", "latest", "--input", "dataset:0", "--out", str(tmp_path / "o"), *option])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and says in err and "Traceback" not in err


def test_explain_out_that_cannot_be_a_folder_is_one_line(tmp_path, capsys):
    """--out naming a file or a place under a file: a FileExistsError traceback before; now one line, exit 2, said
    before any model is loaded (no run is needed to be refused)."""
    existing = tmp_path / "report.txt"
    existing.write_text("not a folder")
    for out, says in (
        (existing, f"--out {existing} is a file: give a folder"),
        (existing / "sub", f"--out {existing / 'sub'}: {existing} is a file"),
    ):
        argv = ["explain", "--run", "latest", "--input", "dataset:0", "--methods", "saliency", "--out", str(out)]
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and says in err and "\n" not in err, err


def test_explain_into_proc_after_loading_the_run_is_one_line(good_run, capsys):
    """/proc: a FileNotFoundError traceback before. As root it passes the early check (root may write to any folder)
    and fails when made; as anyone else the early check refuses it: one line either way."""
    argv = ["explain", "--run", good_run.id, "--input", "dataset:0", "--methods", "saliency"]
    assert main([*argv, "--out", "/proc/xaidash-test/out"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out /proc/xaidash-test/out") and "\n" not in err, err


@pytest.mark.parametrize("host", ["bad host", "", "host_name", "a" * 300, "x..example"])
def test_serve_host_is_checked(host, capsys):
    """A typo in --host started Streamlit, which then failed with its own traceback; now refused while parsing."""
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--host", host])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--host" in err and "is not an IP address or a host name" in err


def test_serve_host_accepts_addresses_and_names():
    from xaidash.dashboard.cli import serve_parser

    for given, kept in (
        ("0.0.0.0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("localhost", "localhost"),
        ("a.example.org", "a.example.org"),
    ):
        assert serve_parser().parse_args(["serve", "--host", given]).host == kept
