"""A method that fails is reported in one line without Python's class name (issue 36, item 3): our own error
(`ExplainError`) by its message alone, was `lime: failed: ExplainError: ...`; anything else in plain words under the
method's label, while the other methods go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from train_configs import tiny_run

import xaidash.explainers.session as session
from xaidash.dashboard.cli import main
from xaidash.data.errors import ExplainError
from xaidash.explainers.session import run_session


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wording_runs")


@pytest.fixture(autouse=True)
def _runs_in_root(_isolated_roots: None, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(root))


def test_a_session_reports_our_error_by_its_message_and_others_in_plain_words() -> None:
    def compute(method: str) -> int:
        if method == "lime":
            raise ExplainError("LIME needs at least 2 words; give a longer text.")
        if method == "shap_kernel":
            raise IndexError("index 7 is out of bounds for dimension 0 with size 3")
        return 1

    outcomes = run_session(["lime", "shap_kernel", "saliency"], compute, label={"shap_kernel": "SHAP"}.get)
    assert [o.error for o in outcomes] == [
        "LIME needs at least 2 words; give a longer text.",
        "an unexpected error in SHAP: index 7 is out of bounds for dimension 0 with size 3; the other methods "
        "went on; try other parameters for it",
        None,
    ]
    assert isinstance(outcomes[1].exception, IndexError)  # the exception itself is kept for a log or a page


def test_the_explain_command_prints_failed_methods_without_a_class_name(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tiny_run(root, "cues", "text_cnn")
    real = session.explain_and_score

    def failing(bundle, raw, method, *args, **kwargs):
        if method == "lime":
            raise ExplainError("LIME cannot explain this text (a test's refusal): give another.")
        if method == "shap_kernel":
            raise ValueError("shapes (1,4) and (1,5) differ")
        return real(bundle, raw, method, *args, **kwargs)

    monkeypatch.setattr(session, "explain_and_score", failing)
    args = ["explain", "--run", str(run), "--input", "a clever cast", "--out", str(tmp_path / "out")]
    assert main([*args, "--methods", "lime,shap_kernel,saliency", "--device", "cpu"]) == 0  # saliency was written
    err = capsys.readouterr().err
    assert "lime: failed: LIME cannot explain this text (a test's refusal): give another." in err.splitlines(), err
    assert (
        "shap_kernel: failed: an unexpected error in SHAP: shapes (1,4) and (1,5) differ; the other methods went "
        "on; try other parameters for it"
    ) in err.splitlines(), err
    assert "Error" not in err and "Traceback" not in err and ".py" not in err, err
