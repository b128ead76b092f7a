"""The explain report carries what the session computed beside the maps (issue 29): an attack, a counterfactual and
the training samples behind a prediction appear in the HTML page (a section under their input, with pictures and
the numbers), in report.json (every field of the result) and among the report's files, and read back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

from xaidash.data.registry import DatasetInfo
from xaidash.explainers.figures.report import ExplainReport, MethodResult, MethodSetting, ReportSettings, session_report
from xaidash.explainers.influence.api import InfluenceResult, TrainingSample
from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.robust.counterfactual import PERTURBATION, Counterfactual
from xaidash.explainers.robust.explanation_change import MapChange
from xaidash.explainers.scoring import explain_and_score
from xaidash.explainers.session_extras import attack_extra, counterfactual_extra, influence_extra

INFO = DatasetInfo("rgb16x", "image", ("circle", "square", "<b>tri</b>"), (3, 16, 16), (0.5,) * 3, (0.25,) * 3)
CLASSES = INFO.classes


def _attack(seed: int = 0) -> AttackResult:
    rng = np.random.default_rng(seed)
    original = rng.random((3, 16, 16)).astype(np.float32)
    perturbed = np.clip(original + rng.uniform(-4 / 255, 4 / 255, original.shape), 0, 1).astype(np.float32)
    return AttackResult(
        "pgd", "PGD", 4 / 255, {"steps": 5}, CLASSES, original, perturbed,
        np.array([0.9, 0.08, 0.02]), np.array([0.3, 0.65, 0.05]), None, 0.5, "cpu",
    )  # fmt: skip


class _Split:
    """A training split of images, as the influence panel hands it over."""

    def image(self, index: int) -> torch.Tensor:
        return torch.full((3, 16, 16), index / 100.0)


@pytest.fixture(scope="module")
def report() -> ExplainReport:
    bundle = fresh_bundle("resnet_small", INFO)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    s = explain_and_score(bundle, x, "saliency", {}, None, with_metrics=False, steps=4)
    settings = ReportSettings([MethodSetting("saliency", "Saliency", {})])
    probs = bundle.predict_proba(x).numpy()
    base = session_report(bundle, "run1", [("a.png", x[0], 0), ("b.png", x[1], None)], probs, [
        MethodResult("saliency", s.explanation, s.metrics, s.metric_errors)], settings)  # fmt: skip
    attack = _attack()
    cf = Counterfactual(
        "image", PERTURBATION, 1, CLASSES, True, 16 / 255, attack.probs_before, attack.probs_after, 1.5,
        result=attack, epsilon=4 / 255, probes=3, attack="pgd",
    )  # fmt: skip
    samples = [TrainingSample(17, 0, 0, 0, 0.97, 0.42), TrainingSample(23, 2, 0, 0, 0.6, 0.1)]
    influence = InfluenceResult(
        "tracin_fast", "TracIn (final layer)", "loss-gradient dot products", 0, samples,
        [TrainingSample(5, 1, 1, 1, 0.99, -0.3)], [1, 2], "fc", ["a note"], 0.7,
    )  # fmt: skip
    failed = MapChange("gradcam", "Grad-CAM", 0, error="no conv layer")
    base.extras = [
        attack_extra(0, attack, [failed]),
        counterfactual_extra(0, cf),
        influence_extra(1, influence, CLASSES, _Split()),
    ]
    return base


def test_html_has_a_section_per_result_under_its_input(report: ExplainReport) -> None:
    page = report.to_html()
    first, second = page.split('id="input-1"')
    assert "Attack: PGD, ε = 4/255" in first and "circle (90.0%) → square (65.0%)" in first
    assert "Grad-CAM: failed (no conv layer)" in first and "Perturbation" in first
    assert "Minimal adversarial example: towards square" in first and "3 pgd runs" in first
    assert "Training samples behind this prediction" in second and "Training samples" not in first
    assert "supporting 2" in second and "flipped from circle" in second and "train #17" in second
    assert "&lt;b&gt;tri&lt;/b&gt;" in second and "<b>tri</b>" not in second  # class names escaped
    assert page.count("data:image/png;base64,") >= 2 + 3 + 3 + 3  # inputs+map, attack, counterfactual, samples


def test_json_and_files_hold_every_result_and_read_back(report: ExplainReport) -> None:
    d = json.loads(report.to_json())
    kinds = [(x["input"], x["kind"]) for x in d["extras"]]
    assert kinds == [(0, "attack"), (0, "counterfactual"), (1, "training_samples")]
    attack, cf, samples = d["extras"]
    assert attack["result"]["flipped"] is True and attack["result"]["params"] == {"steps": 5}
    assert attack["result"]["explanations"][0]["error"] == "no conv layer"
    assert cf["result"]["found"] is True and cf["result"]["result"]["attack"] == "pgd"
    assert [s["index"] for s in samples["result"]["proponents"]] == [17, 23] and samples["result"]["classes"][
        2
    ] == "<b>tri</b>"
    files = report.files()
    for x in d["extras"]:
        assert all(f["file"] in files for f in x["figures"])
    back = ExplainReport.from_json(report.to_json(), files)
    assert back.to_json() == report.to_json() and len(back.extras) == 3
    assert back.extras[2].table[1]["trained as"] == "<b>tri</b> (flipped from circle)"
