"""Deletion and insertion over columns for a model that predicts a number (`diabetes`): the curve is the predicted
value in the target's units (from the row's prediction to the mean row's), its AUC the area under the curve rescaled
to the share of f(row) - f(mean row) still present, checked against a hand computation; IG's ranking beats a random
one on both; the metric's description says how a number is scored."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from table_bundles import split, trained_bundle

from xaidash.explainers import explain
from xaidash.explainers.metrics.registry import REGISTRY
from xaidash.explainers.modalities.table_curves import share_aucs, table_perturbation_curve
from xaidash.explainers.modalities.table_values import reference_rows
from xaidash.models import ModelBundle

ROWS = 40


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle("diabetes")


def _value(bundle: ModelBundle, rows: torch.Tensor) -> np.ndarray:
    return bundle.predict_proba(rows)[:, 0].double().numpy()


def test_the_deletion_curve_is_the_predicted_value_and_its_auc_the_share_left(bundle: ModelBundle) -> None:
    rows = split("diabetes").rows[:3]
    e = explain(bundle, rows, method="ig")
    curve = table_perturbation_curve(bundle, rows, e, mode="deletion", steps=10)
    mean_row = reference_rows("mean", bundle.info, None)
    np.testing.assert_allclose(curve.curves[:, 0], _value(bundle, rows), rtol=1e-5)
    np.testing.assert_allclose(curve.curves[:, -1], np.repeat(_value(bundle, mean_row), 3), rtol=1e-5)
    # by hand: hide the strongest columns first, one row at a time
    for i in range(3):
        order = np.argsort(-np.abs(e.item(i)), kind="stable")
        points = []
        for fraction in curve.fractions:
            hidden = rows[i].clone()
            k = round(float(fraction) * len(order))
            hidden[order[:k]] = mean_row[0, order[:k]]
            points.append(_value(bundle, hidden.unsqueeze(0))[0])
        np.testing.assert_allclose(curve.curves[i], points, rtol=1e-5, atol=1e-3)
        share = (np.array(points) - points[-1]) / (points[0] - points[-1])
        assert curve.aucs[i] == pytest.approx(np.trapezoid(share, curve.fractions), abs=1e-4)


def test_insertion_rises_from_the_mean_row_to_the_row(bundle: ModelBundle) -> None:
    rows = split("diabetes").rows[:3]
    e = explain(bundle, rows, method="occlusion")
    curve = table_perturbation_curve(bundle, rows, e, mode="insertion", steps=10)
    np.testing.assert_allclose(curve.curves[:, -1], _value(bundle, rows), rtol=1e-5)
    deletion = table_perturbation_curve(bundle, rows, e, mode="deletion", steps=10)
    # insertion starts where deletion ends: at the mean row's prediction
    np.testing.assert_allclose(curve.curves[:, 0], deletion.curves[:, -1], rtol=1e-5)


def test_ig_s_ranking_beats_a_random_one(bundle: ModelBundle) -> None:
    rows = split("diabetes").rows[:ROWS]
    e = explain(bundle, rows, method="ig")
    maps = np.stack([e.item(i) for i in range(ROWS)])
    shuffled = list(np.random.default_rng(0).permuted(maps, axis=1))
    scored = {
        mode: (
            table_perturbation_curve(bundle, rows, e, mode=mode).aucs,
            table_perturbation_curve(bundle, rows, shuffled, targets=[0] * ROWS, mode=mode).aucs,
        )
        for mode in ("deletion", "insertion")
    }
    ig_del, random_del = scored["deletion"]
    ig_ins, random_ins = scored["insertion"]
    assert np.nanmean(ig_del) < np.nanmean(random_del) - 0.05
    assert np.nanmean(ig_ins) > np.nanmean(random_ins) + 0.05


def test_a_row_predicted_as_the_mean_row_has_no_share() -> None:
    curves = np.array([[10.0, 8.0, 5.0], [5.0, 5.0, 5.0]])
    aucs = share_aucs(curves, np.linspace(0, 1, 3), (curves[:, 0], curves[:, -1]), target_std=2.0)
    assert aucs[0] == pytest.approx(np.trapezoid([1.0, 0.6, 0.0], np.linspace(0, 1, 3)))
    assert np.isnan(aucs[1])


def test_the_metric_says_how_a_number_is_scored() -> None:
    for metric in ("deletion_auc", "insertion_auc"):
        assert "predicts a number" in REGISTRY.get(metric).meaning


@pytest.mark.parametrize("method", ["ig", "shap_kernel"])
def test_the_explain_page_s_metrics_score_a_regression_map(bundle: ModelBundle, method: str) -> None:
    from xaidash.explainers.scoring import explain_and_score

    rows = split("diabetes").rows[:4]
    scored = explain_and_score(bundle, rows, method, {"samples": 300} if method == "shap_kernel" else {})
    assert not scored.metric_errors
    assert {"deletion_auc", "insertion_auc", "completeness_gap"} <= set(scored.metrics)
    assert max(scored.metrics["completeness_gap"]) < 0.02
