"""`xaidash generate` (explainers/language/cli.py) on a tiny random language-model run: the answer and its step
table, each method's attributions per prompt feature, the files of --out and --report, and every bad input refused
with one line and exit code 2. One slow test on the real SmolLM2: " France" produces " Paris"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_lm import save_tiny_folder

from xaidash.dashboard.cli import main
from xaidash.explainers.language import registry
from xaidash.explainers.language.cli import find_text, parse_span
from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec
from xaidash.explainers.params import ExplainError, Param
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.generate import Generation, Step, generate
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt
from xaidash.models.runs.store import Run

PROMPT = "what is the capital of france ?"


@torch.no_grad()
def _occlusion(lm: LanguageModel, task: PromptQuery, params: dict) -> PromptResult:
    """Each feature replaced by the baseline token: the explained output's drop (computed here the plain way, one row
    per feature, so the CLI's numbers can be checked against it)."""
    n = len(task.prompt.ids)
    ids = list(task.prompt.ids) + list(task.target_ids[:-1])
    rows = [ids] + [[task.baseline_id if p in g else t for p, t in enumerate(ids)] for g in task.features]
    logp = torch.log_softmax(lm.logits(torch.tensor(rows)), dim=-1)
    steps = torch.stack([logp[:, n - 1 + j, t] for j, t in enumerate(task.target_ids)], dim=1)
    start, stop = task.span
    out = steps[:, start:stop].sum(1)
    if task.contrast is not None:
        out = out - logp[:, n - 1 + start, task.contrast]
    per_step = (steps[:1] - steps[1:]).T.numpy()
    return PromptResult((out[0] - out[1:]).numpy() * params["gain"], per_step, rows=len(rows), batch=len(rows))


FAKE = PromptMethodSpec(
    "fake_occlusion",
    "Fake occlusion",
    _occlusion,
    lambda p, f, t, s: f + 1,
    output="log_probability",
    family="perturbation",
    params=(Param("gain", "float", 1.0, min=0.0),),
    per_step=True,
)


@pytest.fixture(autouse=True)
def fake() -> Iterator[None]:
    registry.PROMPT_METHODS.register(FAKE)
    yield
    registry.PROMPT_METHODS.unregister(FAKE)


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs root holding one tiny language-model run (imported as `xaidash import hf:FOLDER` does)."""
    base = tmp_path_factory.mktemp("tiny_lm")
    root = base / "runs"
    import_language_model("hf:" + str(save_tiny_folder(base / "folder", seed=1)), name="tiny", root=root)
    return root


@pytest.fixture
def runs(tiny_root: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("XAIDASH_RUNS", str(tiny_root))
    return Run(next(p for p in tiny_root.iterdir() if (p / "config.json").is_file()))


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["generate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_answer_and_its_steps_are_printed(runs: Run, capsys) -> None:
    code, out, _ = run_cli(capsys, "--prompt", PROMPT, "--max-new-tokens", "4")
    assert code == 0
    lm = load_language_model(runs, device="cpu")
    expected = generate(lm, build_prompt(lm, PROMPT), max_new_tokens=4)
    lines = out.splitlines()
    assert lines[0] == expected.text
    table = lines[lines.index(next(line for line in lines if line.lstrip().startswith("step"))) + 1 :]
    assert len(table) == len(expected.steps)
    for k, (line, step) in enumerate(zip(table, expected.steps, strict=True)):
        assert line.split()[0] == str(k) and f"'{step.token}'" in line and f"{step.prob:.1%}" in line


def test_a_prompt_file_reads_like_the_prompt_and_raw_skips_the_template(runs: Run, capsys, tmp_path: Path) -> None:
    file = tmp_path / "prompt.txt"
    file.write_text(PROMPT + "\n", encoding="utf-8")
    argv = ["--max-new-tokens", "3", "--explain", "fake_occlusion", "--include-template"]
    reports = {}
    for name, given in (("text", ["--prompt", PROMPT + "\n"]), ("file", ["--prompt-file", str(file)])):
        for raw in ([], ["--raw"]):
            code, _, err = run_cli(capsys, *given, *argv, *raw, "--out", str(tmp_path / f"{name}{raw}"))
            assert code == 0, err
            reports[name, bool(raw)] = json.loads((tmp_path / f"{name}{raw}" / "report.json").read_text())
    for raw in (False, True):
        text, read = reports["text", raw], reports["file", raw]
        assert text["prompt"] == read["prompt"] and text["generation"]["text"] == read["generation"]["text"]
        assert (
            text["methods"]["fake_occlusion"]["figure"]["scores"]
            == read["methods"]["fake_occlusion"]["figure"]["scores"]
        )
    chat, raw = reports["file", False]["prompt"], reports["file", True]["prompt"]
    assert chat["chat"] and "<|im_start|>" in chat["tokens"] and not raw["chat"] and "<|im_start|>" not in raw["tokens"]


def test_explaining_prints_each_feature_and_writes_the_files(runs: Run, capsys, tmp_path: Path) -> None:
    out_dir, page = tmp_path / "out", tmp_path / "pages" / "report.html"
    argv = ["--run", runs.id, "--prompt", PROMPT, "--max-new-tokens", "3", "--explain", "fake_occlusion"]
    argv += ["--target-step", "1", "--param", "fake_occlusion.gain=2", "--out", str(out_dir), "--report", str(page)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "fake_occlusion 8" in err  # the rows each method will run, said before it runs (7 features + 1)
    report = json.loads((out_dir / "report.json").read_text())
    assert report["schema"] == "xaidash.generate" and report["schema_version"] == 1  # the result documents' envelope
    asked = report["request"]
    assert asked["run"] == runs.id and asked["inputs"]["prompt"] == PROMPT
    assert asked["parameters"]["max_new_tokens"] == 3 and asked["parameters"]["target_step"] == 1
    method = report["methods"]["fake_occlusion"]
    values = np.load(out_dir / "attributions" / "fake_occlusion.npy")
    lm = load_language_model(runs, device="cpu")
    prompt = build_prompt(lm, PROMPT)
    answer = generate(lm, prompt, max_new_tokens=3)
    from xaidash.explainers.language.query import make_query

    task = make_query(lm, prompt, answer.ids, span=(1, 2))
    assert np.allclose(values, 2 * _occlusion(lm, task, {"gain": 1.0}).attributions, atol=1e-5)
    assert method["figure"]["scores"] == pytest.approx(values.tolist(), abs=1e-6) and method["params"] == {"gain": 2.0}
    assert report["target"]["span"] == [1, 2] and report["features"]["labels"] == prompt.feature_tokens()
    # Every feature's value printed beside it, then the strongest first.
    for label, v in zip(prompt.feature_tokens(), values, strict=True):
        assert any(line.strip().startswith(f"'{label}'") and f"{v:+10.4f}".strip() in line for line in out.splitlines())
    best = prompt.feature_tokens()[int(np.argmax(values))]
    assert f"strongest: '{best}'" in out and "Δ log-probability per token" in out
    matrix = np.load(out_dir / "matrix" / "fake_occlusion.npy")
    assert matrix.shape == (2, len(values))
    assert json.loads((out_dir / "matrix" / "fake_occlusion.vl.json").read_text())["mark"] == "rect"
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "Fake occlusion" in html


def test_every_registered_method_runs_through_the_command(runs: Run, capsys, tmp_path: Path) -> None:
    """`--explain all`: each method of the registry (the fake here and whatever methods are installed), its values
    written and printed in the units its declared facts give, with no code of its own in the command."""
    from xaidash.explainers.language import figures as F

    argv = ["--prompt", PROMPT, "--max-new-tokens", "3", "--target-step", "1", "--explain", "all"]
    code, out, err = run_cli(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    specs = registry.list_prompt_methods()
    assert list(report["methods"]) == [s.id for s in specs] and len(specs) > 1
    planned = err.split("model rows per method: ")[1].splitlines()[0]
    for spec in specs:
        values = np.load(tmp_path / "o" / "attributions" / f"{spec.id}.npy")
        assert values.shape == (7,) and np.isfinite(values).all(), spec.id
        units = F.prompt_legend(spec, "token").units
        assert report["methods"][spec.id]["figure"]["legend"]["units"] == units
        assert f"{spec.id} · {spec.label} · {units}" in out and f"{spec.id} " in planned


def test_metrics_score_each_order_beside_random_ones(runs: Run, capsys, tmp_path: Path) -> None:
    argv = ["--prompt", PROMPT, "--max-new-tokens", "3", "--explain", "fake_occlusion", "--metrics"]
    code, out, err = run_cli(capsys, *argv, "--out", str(tmp_path / "o"), "--report", str(tmp_path / "r.html"))
    assert code == 0, err
    faith = json.loads((tmp_path / "o" / "report.json").read_text())["faithfulness"]
    assert set(faith) == {"fake_occlusion", "random"} and faith["random"]["seeds"] > 1
    for name, score in faith.items():
        block = out.split("faithfulness: deletion AUC")[1].splitlines()
        line = next(x for x in block if x.strip().startswith(name + " "))
        assert f"{score['deletion_auc']:+9.3f}".strip() in line and f"{score['insertion_auc']:+9.3f}".strip() in line
    assert "<h3>Faithfulness</h3>" in (tmp_path / "r.html").read_text()


def test_a_contrast_target_text_and_words(runs: Run, capsys, tmp_path: Path) -> None:
    lm = load_language_model(runs, device="cpu")
    answer = generate(lm, build_prompt(lm, PROMPT), max_new_tokens=3)
    first = answer.steps[0].token
    other = next(w for w in ("london", "berlin", "paris") if w != first.strip())
    argv = ["--prompt", PROMPT, "--max-new-tokens", "3", "--explain", "fake_occlusion", "--target-text", first]
    code, out, err = run_cli(capsys, *argv, "--contrast", other, "--unit", "word", "--out", str(tmp_path / "o"))
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["target"]["span"] == [0, 1] and report["target"]["contrast"]["text"] == other
    assert report["target"]["label"] == f"log p('{first}') − log p('{other}')" and report["features"]["unit"] == "word"
    assert "Δ log-probability per word" in out


def test_the_template_can_be_counted(runs: Run, capsys, tmp_path: Path) -> None:
    argv = ["--prompt", PROMPT, "--max-new-tokens", "2", "--explain", "fake_occlusion", "--include-template"]
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert len(report["features"]["labels"]) == len(report["prompt"]["ids"]) > len(report["prompt"]["features"])


def _classifier_run(root: Path) -> None:
    folder = root / "20990101-000000-simple_cnn-shapes"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model": "simple_cnn", "dataset": "shapes", "modality": "image"}))


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--prompt", "   "], "The prompt is empty"),
        (["--prompt-file", "/nonexistent/prompt.txt"], "--prompt-file /nonexistent/prompt.txt: cannot read it"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion,nope"], "Unknown prompt method 'nope'. Known: "),
        (["--prompt", PROMPT, "--explain", " , "], "--explain is empty"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--target-text", " zebra"], "is not a token or run of"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--target-step", "99"], "--target-step 99: the answer"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--span", "2:1"], "--span '2:1': write START:STOP"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--contrast", "red blue"], "is 2 tokens"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--param", "fake_occlusion.gain=-1"], "outside"),
        (["--prompt", PROMPT, "--explain", "fake_occlusion", "--param", "fake_occlusion.nope=1"], "has no parameter"),
        (["--prompt", PROMPT, "--target-step", "1"], "--target-step picks what to explain: add --explain"),
        (["--prompt", PROMPT, "--run", "no-such-run"], "Run 'no-such-run' not found"),
        (["--prompt", PROMPT, "--out", "/proc/answer"], "--out writes the explanations: add --explain"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(runs: Run, capsys, argv: list[str], fragment: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert "Traceback" not in err
    if "Known: " in fragment:
        assert "fake_occlusion" in lines[0]


def test_an_unwritable_out_is_refused_before_the_model_loads(runs: Run, capsys, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker, blocker / "under"):
        code, out_text, err = run_cli(capsys, "--prompt", PROMPT, "--explain", "fake_occlusion", "--out", str(out))
        assert code == 2 and err.startswith("error: --out") and "loading" not in err and out_text == ""


def test_a_classifier_run_or_none_at_all_gets_a_clear_message(tmp_path: Path, monkeypatch, capsys, tiny_root) -> None:
    root = tmp_path / "classifiers"
    _classifier_run(root)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    code, _, err = run_cli(capsys, "--prompt", PROMPT)
    assert code == 2 and "No language-model run under" in err and "xaidash import smollm2" in err
    code, _, err = run_cli(capsys, "--prompt", PROMPT, "--run", "20990101-000000-simple_cnn-shapes")
    assert code == 2 and "holds a simple_cnn classifier, not a generative language model" in err


def test_latest_lm_skips_newer_classifier_runs(runs: Run, capsys, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    (root / runs.id).symlink_to(runs.path, target_is_directory=True)
    _classifier_run(root)  # newer than the language model
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    code, out, err = run_cli(capsys, "--run", "latest-lm", "--prompt", PROMPT, "--max-new-tokens", "2")
    assert code == 0 and f"loading {runs.id}" in err and out


def _generation(*tokens: str) -> Generation:
    steps = tuple(Step(i, t, 0.5, ()) for i, t in enumerate(tokens))
    return Generation(None, steps, "max new tokens", 0.0, False, None, 1.0)  # type: ignore[arg-type]


def test_target_text_finds_tokens_exactly_then_without_spaces() -> None:
    g = _generation("The", " capital", " is", " Par", "is", ".")
    assert find_text(g, " capital") == (1, 2)
    assert find_text(g, "capital") == (1, 2)  # the leading space may be left out
    assert find_text(g, " Paris") == (3, 5)  # a word of several tokens
    assert find_text(g, " is Paris.") == (2, 6)
    with pytest.raises(ExplainError, match="is not a token"):
        find_text(g, "London")
    assert parse_span("2:5") == (2, 5)
    for bad in ("5", "a:b", "3:3", "-1:2"):
        with pytest.raises(ExplainError):
            parse_span(bad)


@pytest.mark.slow
def test_smollm2_says_which_prompt_tokens_produced_the_answer(tmp_path_factory, monkeypatch, capsys, tmp_path) -> None:
    """The brief's command on " Paris", then on the answer's " France": the prompt's " France" produced it. (For
    " Paris" it is not the top token: the teacher-forced answer "The capital of France is" already names France, so
    hiding the prompt's copy moves log p(' Paris') by only about 0.13, less than hiding 'What' or ' of'.)"""
    from smollm2_run import smollm2_run

    run = smollm2_run(tmp_path_factory)
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    argv = ["--prompt", "What is the capital of France?", "--explain", "feature_ablation", "--max-new-tokens", "8"]
    reports = {}
    for target in (" Paris", " France"):
        out_dir = tmp_path / target.strip()
        code, out, err = run_cli(capsys, *argv, "--target-text", target, "--device", "cpu", "--out", str(out_dir))
        assert code == 0, err
        assert out.splitlines()[0].startswith("The capital of France is Paris")
        reports[target] = json.loads((out_dir / "report.json").read_text())
        assert reports[target]["target"]["text"] == target
        assert reports[target]["features"]["labels"] == ["What", " is", " the", " capital", " of", " France", "?"]
    paris = reports[" Paris"]["methods"]["feature_ablation"]["figure"]["scores"]
    assert all(np.isfinite(paris)) and min(paris) > 0  # every word of the question supports the answer
    france = reports[" France"]["methods"]["feature_ablation"]
    assert france["top"][0]["label"] == " France" and france["top"][0]["value"] > 1.0
    assert "strongest: ' France'" in out
