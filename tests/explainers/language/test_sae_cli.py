"""`xaidash sae` end to end on the real SmolLM2: train with progress lines and the held-out metrics, Ctrl-C stops
with a resumable state that --resume finishes, list and eval read back what train wrote, bad settings get one
line."""

from __future__ import annotations

import signal

import pytest
from smollm2_run import smollm2_run

from xaidash.dashboard.cli import main
from xaidash.explainers.language import sae_cli
from xaidash.models.language.sae import store

SMALL = ["--layer", "1", "--width", "32", "--k", "4", "--corpus", "cues", "--tokens", "1024", "--batch-tokens", "128"]
SMALL += ["--heldout-tokens", "256", "--context", "32", "--device", "cpu"]


@pytest.fixture
def run(tmp_path_factory, monkeypatch):
    r = smollm2_run(tmp_path_factory)
    monkeypatch.setenv("XAIDASH_RUNS", str(r.path.parent))
    return r


def test_train_list_and_eval(run, capsys):
    assert main(["sae", "train", "--run", run.id, *SMALL]) == 0
    out = capsys.readouterr().out
    assert "expected about" in out and "harvest" in out and "step 8/8" in out
    assert "explained variance" in out and "loss recovered" in out
    sae_id = out.split("done in ")[1].split("SAE ")[1].split(" ")[0]
    record = store.read_record(run, sae_id)
    assert record.status == "finished" and record.config.width == 32
    assert f"{record.metrics['explained_variance']:.3f}" in out

    assert main(["sae", "list", "--run", run.id]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(sae_id))
    assert "finished" in line and f"{record.metrics['loss_recovered']:.3f}" in line

    assert main(["sae", "eval", "--run", run.id, "--sae", sae_id, "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"{record.metrics['explained_variance']:.3f}" in out  # the same held-out tokens, the same number


def test_ctrl_c_stops_resumably_and_resume_finishes(run, capsys, monkeypatch):
    class Interrupting(sae_cli.Progress):
        def __call__(self, e):
            super().__call__(e)
            if e.phase == "train" and e.step == 3:
                signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends

    monkeypatch.setattr(sae_cli, "Progress", Interrupting)
    assert main(["sae", "train", "--run", run.id, *SMALL]) == 0
    out = capsys.readouterr().out
    assert "stopping after this step" in out and "--resume" in out
    sae_id = out.split("--resume ")[-1].split()[0]
    assert store.read_record(run, sae_id).status == "stopped"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is given back

    monkeypatch.setattr(sae_cli, "Progress", sae_cli.Progress)
    assert main(["sae", "train", "--run", run.id, "--resume", sae_id, "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"resuming {sae_id}" in out and "step 8/8" in out and "step 2/8" not in out
    assert store.read_record(run, sae_id).status == "finished"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--width", "0"], "Width 0"),
        (["--layer", "30"], "Layer 30 is out of range"),
        (["--k", "64"], "k 64"),
    ],
)
def test_bad_settings_get_one_line_and_leave_nothing(run, capsys, args, message):
    before = {r.id for r in store.list_saes(run)}
    assert main(["sae", "train", "--run", run.id, *SMALL, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert {r.id for r in store.list_saes(run)} == before


def test_unknown_sae_gets_one_line(run, capsys):
    assert main(["sae", "eval", "--run", run.id, "--sae", "nope"]) == 2
    assert "has no SAE 'nope'" in capsys.readouterr().err
