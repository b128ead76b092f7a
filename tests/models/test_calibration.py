"""Calibration: ECE/MCE/NLL/Brier against scikit-learn on fixed numbers, the temperature recovered from logits made
with a known one, scaling never changing the predicted class, the saved calibration.json (stale after retraining,
kept for a copied folder, refitted when damaged), the half-test fallback, refusals, and `xaidash runs --calibration`.

The shared trained shapes run is only read: every test that writes calibration.json works on a copy."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import torch
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss

from xaidash.dashboard.cli import main
from xaidash.models.calibration import (
    N_BINS,
    calibration_scores,
    fit_temperature,
    reliability_bins,
    scaled_probabilities,
)
from xaidash.models.calibration_run import (
    CALIBRATION,
    calibration_for,
    load_calibration,
    refusal,
    saved_temperature,
    stale_reason,
)
from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.store import CONFIG, WEIGHTS, Run, load_bundle


def _binary_logits(p: list[float]) -> torch.Tensor:
    """Two-class logits whose softmax gives class 0 probability p."""
    q = torch.tensor(p, dtype=torch.float64)
    return torch.stack([q.log(), (1 - q).log()], dim=1)


def test_ece_mce_by_hand_on_fixed_numbers():
    # 4 samples at confidence 0.9 (3 right), 2 at 0.7 (1 right): ECE = 4/6*|0.75-0.9| + 2/6*|0.5-0.7|, MCE = 0.2.
    logits = _binary_logits([0.9, 0.9, 0.9, 0.9, 0.7, 0.7])
    labels = torch.tensor([0, 0, 0, 1, 0, 1])
    s = calibration_scores(logits, labels)
    assert s.ece == pytest.approx(4 / 6 * 0.15 + 2 / 6 * 0.2)
    assert s.mce == pytest.approx(0.2)
    assert s.accuracy == pytest.approx(4 / 6) and s.n == 6
    assert len(s.bins) == N_BINS and sum(b.count for b in s.bins) == 6


def test_bins_nll_brier_equal_sklearn():
    rng = np.random.default_rng(3)
    logits = torch.as_tensor(rng.normal(size=(800, 5)) * 3)
    labels = torch.as_tensor(rng.integers(0, 5, size=800))
    logits[labels == 2, 2] += 4  # some signal, so every kind of bin is filled
    for t in (None, 1.7):
        s = calibration_scores(logits, labels, temperature=t)
        probs = scaled_probabilities(logits, t).numpy()
        conf, correct = probs.max(1), probs.argmax(1) == labels.numpy()
        acc, mean_conf = calibration_curve(correct, conf, n_bins=N_BINS, strategy="uniform")
        filled = [b for b in s.bins if b.count]
        assert np.allclose([b.accuracy for b in filled], acc) and np.allclose([b.confidence for b in filled], mean_conf)
        # ECE from the library's bins, weighted by the counts of the same bins
        counts = np.array([b.count for b in filled])
        assert s.ece == pytest.approx(float((counts / counts.sum() * np.abs(acc - mean_conf)).sum()))
        assert s.nll == pytest.approx(log_loss(labels.numpy(), probs, labels=range(5)))
        assert s.brier == pytest.approx(brier_score_loss(labels.numpy(), probs, labels=range(5), scale_by_half=False))
    # a confidence on a bin edge goes to the lower bin, as in calibration_curve
    edge = reliability_bins(np.array([2 / N_BINS]), np.array([1]))
    assert edge[1].count == 1 and edge[2].count == 0


@pytest.mark.parametrize("t_true", [0.5, 1.83, 3.0])
def test_temperature_recovered_within_5_percent(t_true):
    g = torch.Generator().manual_seed(7)
    true_logits = torch.randn(6000, 10, generator=g, dtype=torch.float64) * 2
    labels = torch.multinomial(torch.softmax(true_logits, 1), 1, generator=g).squeeze(1)
    t = fit_temperature(true_logits * t_true, labels)  # a model t_true times too confident (or too shy)
    assert abs(t - t_true) / t_true < 0.05
    assert (
        calibration_scores(true_logits * t_true, labels, t).nll <= calibration_scores(true_logits * t_true, labels).nll
    )


def test_scaling_never_changes_the_predicted_class(trained_shapes):
    logits = torch.randn(500, 7, generator=torch.Generator().manual_seed(0)) * 5
    for t in (0.05, 0.3, 1.0, 2.5, 20.0):
        assert torch.equal(scaled_probabilities(logits, t).argmax(1), logits.argmax(1))
    images = torch.rand(8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    plain = trained_shapes.predict_proba(images)
    for t in (0.2, 3.0):
        scaled = trained_shapes.predict_proba(images, temperature=t)
        assert torch.equal(scaled.argmax(1), plain.argmax(1))
        assert torch.allclose(scaled.sum(1), torch.ones(8), atol=1e-5)
    with pytest.raises(ModelError, match="positive"):
        trained_shapes.predict_proba(images, temperature=0.0)


@pytest.fixture
def shapes_copy(trained_shapes_run, tmp_path, monkeypatch) -> Run:
    """A copy of the shared trained shapes run in this test's runs root (the shared one is only read)."""
    root = tmp_path / "runs"
    root.mkdir(exist_ok=True)
    src = trained_shapes_run.run.path
    dst = root / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock", CALIBRATION))
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    return Run(dst)


def test_fit_save_reuse_and_stale(shapes_copy):
    run = shapes_copy
    assert load_calibration(run) is None and saved_temperature(run) is None
    cal, fitted = calibration_for(run)
    assert fitted and run.file(CALIBRATION).is_file()
    saved = json.loads(run.file(CALIBRATION).read_text())
    assert {"temperature", "before", "after", "n_fit", "n_report", "weights", "created", "note"} <= set(saved)
    assert saved["weights"]["sha256"] and len(saved["before"]["bins"]) == N_BINS
    # validation split as held out in training (5% of 6,000), the whole test split
    assert (cal.fit_split, cal.n_fit, cal.report_split, cal.n_report) == ("validation", 300, "test", 1000)
    assert cal.before.accuracy == pytest.approx(run.summary()["test_acc"]) == pytest.approx(cal.after.accuracy)
    assert cal.after.nll < cal.before.nll  # measured on the test split, fitted on the validation split
    assert load_calibration(run) == cal and saved_temperature(run) == pytest.approx(cal.temperature)
    again, fitted = calibration_for(run)
    assert not fitted and again == cal

    # the same bytes with a new mtime (a copied folder): still this fit
    st = run.file(WEIGHTS).stat()
    os.utime(run.file(WEIGHTS), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert stale_reason(run, cal) is None

    # retrained weights: stale, not offered, fitted again on request
    bundle = load_bundle(run, device="cpu")
    with torch.no_grad():
        for p in bundle.model.parameters():
            p.mul_(1.5)
    save_weights(bundle.model, run.file(WEIGHTS))
    assert "resumed or retrained" in (stale_reason(run, cal) or "")
    assert saved_temperature(run) is None
    refit, fitted = calibration_for(run)
    assert fitted and refit.weights["sha256"] != cal.weights["sha256"]


def test_damaged_file_is_named_and_refitted(shapes_copy):
    run = shapes_copy
    run.file(CALIBRATION).write_text("{not json")
    with pytest.raises(ModelError, match=r"calibration\.json is damaged"):
        load_calibration(run)
    assert saved_temperature(run) is None
    _, fitted = calibration_for(run)
    assert fitted and load_calibration(run) is not None


def _edit_config(run: Run, **changes) -> None:
    config = json.loads(run.file(CONFIG).read_text())
    for key, value in changes.items():
        if key == "val_fraction":
            config["train"]["val_fraction"] = value
        else:
            config[key] = value
    run.file(CONFIG).write_text(json.dumps(config))


def test_no_validation_split_fits_on_half_the_test_split(shapes_copy):
    _edit_config(shapes_copy, val_fraction=0.0)
    cal, _ = calibration_for(shapes_copy)
    assert cal.fit_split == "test, first half" and cal.n_fit + cal.n_report == 1000 and cal.n_fit == 500
    assert "val_fraction 0" in cal.note and "half of the test split" in cal.note


def test_refusals(shapes_copy, monkeypatch):
    run = shapes_copy
    _edit_config(run, language_model={"architecture": "LlamaForCausalLM", "layers": 2, "heads": 2})
    assert "generative language model" in (refusal(run) or "")
    with pytest.raises(ModelError, match="generative language model"):
        calibration_for(run)
    _edit_config(run, language_model=None)
    config = json.loads(run.file(CONFIG).read_text())
    config.pop("language_model")
    config["dataset"] = "mnist"  # not under this test's (empty) data root
    run.file(CONFIG).write_text(json.dumps(config))
    with pytest.raises(ModelError, match="needs the test split of mnist, which is unavailable"):
        calibration_for(run)
    assert not run.file(CALIBRATION).exists()


def test_text_run(tmp_path):
    from train_configs import tiny_run

    run = Run(tiny_run(tmp_path / "runs", "cues", "text_cnn"))  # 64 samples: too few held out, half the test split
    cal, fitted = calibration_for(run)
    assert fitted and cal.fit_split == "test, first half" and "only 6 samples" in cal.note
    assert math.isfinite(cal.temperature) and cal.temperature > 0
    assert 0 <= cal.after.ece <= 1 and cal.before.accuracy == cal.after.accuracy


def test_cli_prints_and_writes(shapes_copy, tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert main(["runs", "--calibration", shapes_copy.id, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "temperature T =" in text and "ECE (15 bins)" in text and "confidence bin" in text
    assert len([ln for ln in text.splitlines() if ln.startswith("(0.")]) == N_BINS
    written = json.loads(out.read_text())
    assert written["run"] == shapes_copy.id and written["temperature"] == pytest.approx(
        saved_temperature(shapes_copy), rel=1e-9
    )
    assert main(["runs", "--calibration", shapes_copy.id]) == 0
    assert "read:" in capsys.readouterr().out  # fresh: not fitted again
    assert main(["runs", "--calibration", "no-such-run"]) == 2
    assert "not found" in capsys.readouterr().err


def test_imported_runs(tmp_path):
    """An imported model linked to a data set fits on half its test split; one with no data set is refused."""
    import importlib.util

    from imported_models import write_module_file

    from xaidash.models.external import ImportOptions, import_model

    path = write_module_file(tmp_path)
    spec = importlib.util.spec_from_file_location("small_net_for_calibration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    torch.save(module.SmallNet(classes=4).state_dict(), tmp_path / "w.pt")
    source = f"module:{path}:SmallNet"
    linked = import_model(
        source, ImportOptions(weights=tmp_path / "w.pt", dataset="shapes", model_options={"classes": 4})
    ).run
    cal, _ = calibration_for(linked)
    assert cal.fit_split == "test, first half" and "imported model has no validation split" in cal.note
    assert cal.n_fit + cal.n_report == 1000
    torch.save(module.SmallNet().state_dict(), tmp_path / "w3.pt")
    alone = import_model(
        source, ImportOptions(weights=tmp_path / "w3.pt", input_shape=(3, 32, 32), classes=("a", "b", "c"))
    ).run
    assert "no data set linked" in (refusal(alone) or "")
    with pytest.raises(ModelError, match="no data set linked"):
        calibration_for(alone)
