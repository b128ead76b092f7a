"""TCAV mechanics on an untrained resnet_small (fast): the CAV cache, captum equivalence, refusals, the CLI."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from concept_runs import FAST, noise_folder, red_folder

import xaidash.explainers  # noqa: F401  (registers data sets and models)
from xaidash.explainers.concepts import concept_report, list_sources
from xaidash.explainers.concepts.api import class_inputs
from xaidash.explainers.concepts.classifier import SeededLinearClassifier
from xaidash.explainers.concepts.randoms import random_pool, random_sets
from xaidash.explainers.concepts.sources import load_concept
from xaidash.explainers.concepts.tcav import activations, tcav_scores, train_cav
from xaidash.explainers.params import ExplainError
from xaidash.models import ModelBundle


def cav_files(bundle: ModelBundle) -> dict[Path, int]:
    assert bundle.run_dir is not None
    return {p: p.stat().st_mtime_ns for p in (bundle.run_dir / "concepts").rglob("*.safetensors")}


def test_second_call_reuses_the_cached_cavs(bundle, tmp_path):
    red = red_folder(tmp_path / "red", n=12)
    first = concept_report(bundle, [f"folder:{red}"], "circle", **FAST)
    files = cav_files(bundle)
    # 3 concept CAVs + 3 random-vs-random CAVs, as safetensors; nothing of captum's pickle store
    assert first.cavs_trained == 6 and first.cavs_cached == 0 and len(files) == 6
    assert not list(bundle.run_dir.rglob("*.pkl")) and not list(bundle.run_dir.rglob("*.pt"))
    again = concept_report(bundle, [f"folder:{red}"], "circle", **FAST)
    assert again.cavs_cached == 6 and again.cavs_trained == 0
    assert cav_files(bundle) == files  # read, not rewritten
    assert [r.scores for r in again.results] == [r.scores for r in first.results]
    # other examples (another seed picks another subset): new CAVs, the old files stay
    other = concept_report(bundle, [f"folder:{red}"], "circle", seed=1, **FAST)
    assert other.cavs_trained == 6 and len(cav_files(bundle)) == 12


def test_scores_are_captums_share_of_positive_directional_derivatives(bundle, tmp_path):
    """The scores come from captum's TCAV.interpret; recomputed here by hand from the gradient and the CAV."""
    concept = load_concept(f"folder:{red_folder(tmp_path / 'red', n=10)}", bundle, 10)
    pool = random_pool(bundle, None, 40, 0)
    randoms = random_sets(pool, 3, 10, 0)
    inputs = class_inputs(bundle, 0, 16, 0, None).inputs
    scores = tcav_scores(bundle, [concept], randoms, inputs, 0, ["layers.1"], seed=0)
    acts = {
        g: activations(bundle, ["layers.1"], bundle.prepare(x.inputs))["layers.1"]
        for g, x in enumerate([concept, *randoms])
    }
    x = bundle.prepare(inputs).requires_grad_(False)
    store: dict[str, torch.Tensor] = {}
    handle = bundle.layer("layers.1").register_forward_hook(lambda m, i, o: store.update(out=o) or o.retain_grad())
    logits = bundle.model(x)
    handle.remove()
    logits[:, 0].sum().backward()
    grads = store["out"].grad.reshape(len(x), -1)
    for i in (1, 2):
        cav = train_cav(acts[0], acts[i + 1], (0, 1000 + i), 0)  # acts[i + 1]: random set i
        expected = float((grads @ cav.weights[0] > 0).float().mean())
        assert scores.concept_scores["layers.1"][concept.name][i - 1] == pytest.approx(expected, abs=1e-6)


def test_seeded_classifier_agrees_with_captums_default_classifier(bundle, tmp_path):
    from captum.concept._utils.classifier import DefaultClassifier
    from torch.utils.data import DataLoader, TensorDataset

    concept = load_concept(f"folder:{red_folder(tmp_path / 'red', n=30)}", bundle, 30)
    noise = load_concept(f"folder:{noise_folder(tmp_path / 'noise', n=30)}", bundle, 30)
    a = activations(bundle, ["layers.2"], bundle.prepare(concept.inputs))["layers.2"]
    b = activations(bundle, ["layers.2"], bundle.prepare(noise.inputs))["layers.2"]
    x, y = torch.cat([a, b]), torch.cat([torch.zeros(30), torch.ones(30)]).long()
    ours = SeededLinearClassifier(0)
    ours.train_and_eval(DataLoader(TensorDataset(x, y), batch_size=60))
    random.seed(0)  # captum's split shuffles with python's random, its SGDClassifier draws from numpy's global state
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its "keeps data in memory" notice and a numpy-to-tensor speed notice
        theirs = DefaultClassifier()
        theirs.train_and_eval(DataLoader(TensorDataset(x, y), batch_size=60))
    assert list(theirs.classes()) == ours.classes() == [0, 1]
    w1, w2 = ours.weights()[1], theirs.weights()[1].float()
    cosine = float(w1 @ w2 / (w1.norm() * w2.norm()))
    assert cosine > 0.7, cosine  # same direction: measured 0.78-0.86 over 8 seeds of captum's draws


def test_refusals_say_what_to_do(bundle, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ExplainError, match="empty"):
        concept_report(bundle, [f"folder:{empty}"], "circle", **FAST)
    with pytest.raises(ExplainError, match="does not exist"):
        concept_report(bundle, [f"folder:{tmp_path / 'missing'}"], "circle", **FAST)
    few = red_folder(tmp_path / "few", n=1)
    (few / "broken.png").write_bytes(b"not an image")
    with pytest.raises(ExplainError, match=r"1 usable example; TCAV needs at least 5.*broken.png"):
        concept_report(bundle, [f"folder:{few}"], "circle", **FAST)
    red = red_folder(tmp_path / "red", n=8)
    with pytest.raises(ExplainError, match=r"no class 'blob'.*circle, square"):
        concept_report(bundle, ["dataset:shapes_colour:blob"], "circle", **FAST)
    with pytest.raises(ExplainError, match="not one of the model's classes"):
        concept_report(bundle, [f"folder:{red}"], "ellipse", **FAST)
    with pytest.raises(ExplainError, match=r"no layer 'nope'; its layers: stem, layers\.0, layers\.1, layers\.2"):
        concept_report(bundle, [f"folder:{red}"], "circle", **{**FAST, "layers": ["nope"]})
    with pytest.raises(ExplainError, match=r"^Data set cues holds texts; this model reads images\.$"):
        concept_report(bundle, ["dataset:cues:positive"], "circle", **FAST)
    with pytest.raises(ExplainError, match="Unknown concept source 'foo'"):
        concept_report(bundle, ["foo:bar"], "circle", **FAST)
    with pytest.raises(ExplainError, match="text models"):
        concept_report(bundle, [f"text:{tmp_path / 'x.txt'}"], "circle", **FAST)
    with pytest.raises(ExplainError, match="random sets must be 2"):
        concept_report(bundle, [f"folder:{red}"], "circle", **{**FAST, "random_count": 1})
    assert not (bundle.run_dir / "concepts").exists()  # refused before anything was written


def test_imported_model_without_a_data_set_is_told_what_to_give(bundle, tmp_path):
    bundle.has_dataset = False
    red = red_folder(tmp_path / "red", n=8)
    with pytest.raises(ExplainError, match=r"--random folder:PATH"):
        concept_report(bundle, [f"folder:{red}"], "circle", **FAST)
    noise = noise_folder(tmp_path / "noise", n=40)
    with pytest.raises(ExplainError, match=r"--inputs folder:PATH"):
        concept_report(bundle, [f"folder:{red}"], "circle", random_from=f"folder:{noise}", **FAST)
    report = concept_report(
        bundle, [f"folder:{red}"], "circle", random_from=f"folder:{noise}", inputs_from=f"folder:{red}", **FAST
    )
    assert len(report.results) == 1 and report.inputs == 8


def test_every_source_is_listed_for_its_modality():
    kinds = {s.kind for s in list_sources("image")}
    assert {"dataset", "folder", "gallery"} <= kinds and "text" not in kinds
    assert "text" in {s.kind for s in list_sources("text")}


def test_gallery_and_dataset_sources(bundle):
    report = concept_report(bundle, ["gallery:0,1,2,3,4,5,6,7", "dataset:shapes_colour:square:test"], "circle", **FAST)
    assert [c["examples"] for c in report.concepts] == [8, 8]
    assert len(report.results) == 2 and all(0 <= s <= 1 for r in report.results for s in r.scores)
    assert all(r.p_adjusted >= r.p_value for r in report.results)  # Bonferroni over 2 tests
    with pytest.raises(ExplainError, match="outside"):
        concept_report(bundle, ["gallery:1,2,3,4,99999"], "circle", **FAST)


def test_cli_prints_the_table_and_writes_json(tmp_path, monkeypatch, capsys):
    from inspect_runs import make_run

    from xaidash.dashboard.cli import main

    run = make_run(tmp_path / "runs", "shapes_colour", "resnet_small", epochs=1)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    red = red_folder(tmp_path / "red", n=8)
    out = tmp_path / "out"  # --out names a folder (issue 29): concepts.json is written into it
    argv = ["concepts", "--run", run.id, "--concept", f"folder:{red}", "--class", "circle", "--layers", "layers.2"]
    code = main([*argv, "--random-sets", "3", "--examples", "8", "--inputs", "10", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "layer" in printed and "p (Bonferroni)" in printed and "layers.2" in printed
    data = json.loads((out / "concepts.json").read_text())
    assert data["target"] == "circle" and len(data["results"]) == 1
    assert {"mean", "std", "min", "max", "p_value", "p_adjusted", "significant", "verdict"} <= set(data["results"][0])
    assert main([*argv[:5], "--class", "ellipse", "--quiet"]) == 2
    assert "not one of the model's classes" in capsys.readouterr().err


def test_text_model_with_a_text_file_concept(tmp_path, monkeypatch):
    """Text concepts: sentences from a file and a text data set's class, encoded to one token width."""
    from inspect_runs import make_run

    from xaidash.models.runs.store import load_bundle

    run = make_run(tmp_path / "runs", "cues", "text_cnn", epochs=1)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    bundle = load_bundle(run.id, device="cpu")
    sentences = tmp_path / "praise.txt"
    sentences.write_text("great film\na wonderful story\n\nsuperb acting\nlovely and charming\nbrilliant ending\n")
    report = concept_report(
        bundle, [f"text:{sentences}", "dataset:cues:negative"], "positive", random_count=3, examples=5, inputs=10
    )
    assert report.layers == ["embedding"] and [c["name"] for c in report.concepts] == ["praise", "cues:negative"]
    assert all(len(r.scores) == 3 and 0 <= r.mean <= 1 for r in report.results)
    with pytest.raises(ExplainError, match="for image models"):
        concept_report(bundle, [f"folder:{tmp_path}"], "positive", random_count=3, examples=5)
    with pytest.raises(ExplainError, match=r"^Data set shapes_colour holds images; this model reads texts\.$"):
        concept_report(bundle, ["dataset:shapes_colour:circle"], "positive", random_count=3, examples=5)
