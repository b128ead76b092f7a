"""What the influence methods refuse, each with one clear sentence: an imported run (no checkpoints, no training
labels), a run with one checkpoint (full TracIn), an unknown method, a model without a final linear layer; and
the CLI's exit code 2 with one line for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from imported_models import import_external
from inspect_runs import make_run
from torch import nn

from xaidash.dashboard.cli import main
from xaidash.data.registry import get_info
from xaidash.explainers.influence import (
    explain_influence,
    get_influence_method,
    influence_methods_for,
    list_influence_methods,
    run_self_influence,
)
from xaidash.explainers.influence.layer import final_linear
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import load_bundle

SHAPES = get_info("shapes").input_shape


def test_registry_lists_every_method_with_its_facts() -> None:
    ids = [s.id for s in list_influence_methods()]
    assert ids[0] == "tracin_fast" and {"tracin_projected", "similar"} <= set(ids)
    for spec in list_influence_methods():
        assert spec.label and spec.description.endswith(".") and spec.units
    with pytest.raises(ExplainError, match=r"Unknown influence method .nope.*tracin_fast"):
        get_influence_method("nope")


def test_imported_run_without_checkpoints(tmp_path: Path) -> None:
    run = import_external("module", tmp_path / "module", tmp_path / "runs")
    why = {s.id: w for s, w in influence_methods_for(run)}
    assert "imported model" in why["tracin_fast"] and "checkpoints" in why["tracin_fast"]
    assert "imported model" in why["tracin_projected"]
    assert "data set" in why["similar"]  # no data set linked: nothing to search
    bundle = load_bundle(run, device="cpu")
    with pytest.raises(ExplainError, match="imported model"):
        explain_influence(bundle, run, torch.rand(*SHAPES))
    with pytest.raises(ExplainError, match="imported model"):
        run_self_influence(run)


def test_one_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=1)
    why = {s.id: w for s, w in influence_methods_for(run)}
    assert why["tracin_projected"] is not None and "at least 2" in why["tracin_projected"]
    assert why["tracin_fast"] is None and why["similar"] is None  # what still applies
    bundle = load_bundle(run, device="cpu")
    with pytest.raises(ExplainError, match="at least 2"):
        explain_influence(bundle, run, torch.rand(*SHAPES), method="tracin_projected")
    result = explain_influence(bundle, run, torch.rand(*SHAPES), method="tracin_fast", k=3)
    assert result.checkpoints == [1] and any("one checkpoint" in n for n in result.notes)
    assert len(result.proponents) <= 3 and len(result.opponents) <= 3


def test_unknown_method_and_bad_arguments(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=2)
    bundle = load_bundle(run, device="cpu")
    with pytest.raises(ExplainError, match="Unknown influence method"):
        explain_influence(bundle, run, torch.rand(*SHAPES), method="influence_functions")
    with pytest.raises(ExplainError, match="k must be"):
        explain_influence(bundle, run, torch.rand(*SHAPES), k=0)
    with pytest.raises(ExplainError, match="out of range"):
        explain_influence(bundle, run, torch.rand(*SHAPES), target=7)
    with pytest.raises(ExplainError, match="one image"):
        explain_influence(bundle, run, "a text for an image model")
    with pytest.raises(ExplainError, match="no self-influence"):
        run_self_influence(run, "similar")


class _NoLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(SHAPES[0], 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean((2, 3))


def test_model_without_final_linear(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=2)  # declares no classifier: found by running it
    bundle = load_bundle(run, device="cpu")
    probe = bundle.prepare(torch.rand(2, *bundle.info.input_shape))
    found = bundle.model.get_submodule(final_linear(bundle, probe))
    assert isinstance(found, nn.Linear) and found.out_features == bundle.info.num_classes
    bundle.model = _NoLinear()
    with pytest.raises(ExplainError, match=r"no final nn\.Linear"):
        final_linear(bundle, probe)


def test_cli_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=2)
    cases = [
        (["--input", "test:999999"], "out of range"),
        ([], "give --input"),
        (["--input", "test:0", "--self"], "give --input"),
        (["--self", "--export", str(tmp_path / "out.txt")], ".csv or .json"),
        (["--input", "test:0", "--method", "nope"], "Unknown influence method"),
        (["--input", "test:0", "--target", "hexagon"], "--target"),
    ]
    for extra, message in cases:
        assert main(["influence", "--run", run.id, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error:") and message in err, err


def test_a_model_that_predicts_a_number_is_refused_in_one_sentence() -> None:
    from table_bundles import untrained_bundle

    bundle = untrained_bundle("diabetes")
    probe = bundle.prepare(torch.zeros(2, len(bundle.info.columns)))
    with pytest.raises(ExplainError, match=r"predicts a number \(disease progression\), so they do not apply"):
        final_linear(bundle, probe)


def test_no_influence_method_is_offered_for_a_run_that_predicts_a_number(tmp_path: Path) -> None:
    from table_runs import fitted_bundle, table_run

    run = table_run(tmp_path / "runs", fitted_bundle("diabetes"))
    reasons = [why for _, why in influence_methods_for(run)]
    assert reasons and all(why and "predicts a number (disease progression)" in why for why in reasons), reasons
