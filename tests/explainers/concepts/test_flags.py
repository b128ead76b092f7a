"""Flags on TCAV results that the significance test cannot see: a concept made of the tested class's own examples
(circular: the class compared with random images) and a CAV whose held-out accuracy is near chance (the direction
is then not about the concept). A flagged result is no finding, whatever its p-value."""

from __future__ import annotations

import torch
from concept_runs import FAST

import xaidash.explainers  # noqa: F401  (registers data sets and models)
from xaidash.data.registry import load_split
from xaidash.explainers.concepts import concept_report
from xaidash.explainers.concepts.flags import MIN_CAV_ACCURACY, accuracy_flag
from xaidash.explainers.concepts.significance import judge


def test_a_concept_made_of_the_tested_class_is_flagged_and_no_finding(bundle):
    circles = torch.nonzero(load_split("shapes_colour", "test").labels == 0).flatten()[:8].tolist()
    specs = ["dataset:shapes_colour:circle:train", f"gallery:{','.join(map(str, circles))}", "dataset:shapes:circle"]
    specs.append("dataset:shapes_colour:square:test")
    report = concept_report(bundle, specs, "circle", **FAST)
    by_spec = {c["spec"]: c["name"] for c in report.concepts}
    found = {r.concept: r for r in report.results}
    for spec in specs[:3]:  # its own class, gallery picks of it, the same class of another data set
        r = found[by_spec[spec]]
        assert any("circular" in f and "circle" in f for f in r.flags), (spec, r.flags)
        assert not r.finding and r.verdict.startswith("flagged"), r.verdict
        assert r.to_json()["finding"] is False and r.to_json()["flags"] == list(r.flags)
    square = found[by_spec[specs[3]]]
    assert not any("circular" in f for f in square.flags), square.flags
    # the origin is the source's declared fact: another class tested with the same concept is not circular
    other = concept_report(bundle, specs[:1], "square", **FAST)
    assert not any("circular" in f for f in other.results[0].flags)


def test_a_cav_near_chance_is_flagged_whatever_the_test_says():
    assert 0.5 < MIN_CAV_ACCURACY < 1
    sure, weak = [0.9, 1.0, 0.95, 1.0, 0.92], [0.4, 0.5, 0.45, 0.5, 0.42]
    good = judge("red", "layers.1", sure, weak, 1, 0.95)
    assert good.significant and good.finding and not good.flags and good.verdict.startswith("significant")
    near = judge("red", "layers.1", sure, weak, 1, 0.61, flags=accuracy_flag(0.61))
    assert near.significant and not near.finding  # the t-test alone would have called it a finding
    assert near.verdict.startswith("flagged") and "0.61" in near.flags[0] and "chance" in near.flags[0]
    assert accuracy_flag(MIN_CAV_ACCURACY) == () and accuracy_flag(float("nan"))


def test_cli_prints_the_flags(tmp_path, monkeypatch, capsys):
    from inspect_runs import make_run

    from xaidash.dashboard.cli import main

    run = make_run(tmp_path / "runs", "shapes_colour", "resnet_small", epochs=1)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    argv = ["concepts", "--run", run.id, "--concept", "dataset:shapes_colour:circle", "--class", "circle"]
    argv += ["--layers", "layers.2", "--random-sets", "3", "--examples", "8", "--inputs", "10", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "flagged" in printed and "flag: shapes_colour:circle at layers.2:" in printed and "circular" in printed
