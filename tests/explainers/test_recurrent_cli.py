"""`xaidash recurrent` end to end on tiny runs trained by the engine: the files it writes hold torch's own hidden
states, the PCA is scikit-learn's on them, and a model without a recurrent layer gets one line and no folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from train_configs import tiny_run

from xaidash.dashboard.cli import main
from xaidash.data.registry import load_split
from xaidash.models.runs.store import load_bundle, resolve_run


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recurrent_runs")


@pytest.fixture(autouse=True)
def _runs_here(_isolated_roots: None, runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(runs_root))
    torch.set_num_threads(1)


@pytest.mark.parametrize("model", ["series_gru", "series_lstm"])
def test_recurrent_writes_torchs_hidden_states_and_the_pca(runs_root, tmp_path, capsys, model):
    run_dir = tiny_run(runs_root, "series_shapes", model)
    out = tmp_path / "inside"
    assert main(["recurrent", "--run", str(run_dir), "--input", "dataset:5", "--out", str(out), "--per-class"]) == 0
    summary = json.loads((out / "recurrent.json").read_text())
    bundle = load_bundle(resolve_run(str(run_dir)), device="cpu")
    split = load_split("series_shapes", "test")
    x = bundle.prepare(split.series[5:6])
    with torch.no_grad():
        own, _ = bundle.model.rnn(x.transpose(1, 2))
    hidden = np.load(out / "arrays" / f"hidden_l{summary['layers']}.npy")
    np.testing.assert_allclose(hidden, own[0].numpy(), atol=1e-5)
    assert summary["max_abs_difference_from_torch"] <= 1e-5
    assert summary["true_class"] == bundle.info.classes[int(split.labels[5])]
    gates = ("input", "forget", "cell_candidate", "output") if model == "series_lstm" else ("reset", "update", "new")
    for g in gates:
        assert np.load(out / "arrays" / f"{g}_l1.npy").shape == hidden.shape
    names = [s["name"] for s in summary["pca"]["series"]]
    assert len(names) == 1 + len(bundle.info.classes)  # the picked series and the first of every class
    assert all((out / c).is_file() for c in summary["charts"])
    first = np.stack([np.asarray(s["points"]) for s in summary["pca"]["series"][:1]])[0]
    assert first.shape == (hidden.shape[0], 2)
    # the PCA is fitted on every step of every series shown: its first series' points are scikit-learn's
    stacked = [hidden] + [_hidden(bundle, split, int(n.split("#")[1].split(" ")[0])) for n in names[1:]]
    pca = PCA(2).fit(np.concatenate(stacked).astype(np.float64))
    np.testing.assert_allclose(summary["pca"]["explained_variance_ratio"], pca.explained_variance_ratio_, rtol=1e-4)
    np.testing.assert_allclose(np.abs(first), np.abs(pca.transform(hidden.astype(np.float64))), atol=1e-4)
    assert "written to" in capsys.readouterr().out


def _hidden(bundle, split, i: int) -> np.ndarray:
    with torch.no_grad():
        own, _ = bundle.model.rnn(bundle.prepare(split.series[i : i + 1]).transpose(1, 2))
    return own[0].numpy()


def test_a_model_without_recurrent_layer_gets_one_line(runs_root, tmp_path, capsys):
    run_dir = tiny_run(runs_root, "series_shapes", "series_cnn")
    out = tmp_path / "inside"
    assert main(["recurrent", "--run", str(run_dir), "--input", "dataset:0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no recurrent layer" in err and "Traceback" not in err
    assert not out.exists()


def test_a_layer_beyond_the_model_is_refused(runs_root, tmp_path, capsys):
    run_dir = tiny_run(runs_root, "series_shapes", "series_gru")
    out = tmp_path / "inside"
    assert main(["recurrent", "--run", str(run_dir), "--input", "dataset:0", "--out", str(out), "--layer", "2"]) == 2
    assert "has 1 layer(s): give 1 to 1" in capsys.readouterr().err and not out.exists()
