"""Table methods against the truth and the libraries: on `tabular_mlp` trained on `planted` (label set by x0 * x1 + x2),
IG, occlusion and KernelSHAP rank the truth columns on top; IG adds up to f(row) - f(reference); occlusion equals a hand
computation with each baseline and captum's FeatureAblation; LIME equals lime's own LimeTabularExplainer with the same
seed; KernelSHAP agrees with shap's KernelExplainer on the same background."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from table_bundles import split, trained_bundle

from xaidash.data.modalities.table import feature_mask
from xaidash.explainers import explain
from xaidash.explainers.methods.table_lime import TRAINING_ROWS, lime_table_reference
from xaidash.explainers.metrics.truth_columns import truth_recall
from xaidash.explainers.modalities.table_values import reference_rows, training_rows
from xaidash.models import ModelBundle

ROWS = 60  # test rows the truth is checked on
BACKGROUND = 10


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle()


def _background(bundle: ModelBundle) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw, prepared) background rows: the first BACKGROUND of the seeded training pick."""
    raw = training_rows(bundle, BACKGROUND, seed=3)
    assert raw is not None
    return raw, bundle.prepare(raw)


def test_the_model_learns_the_planted_rule(bundle: ModelBundle) -> None:
    test = split()
    accuracy = float((bundle.predict_proba(test.rows).argmax(1) == test.labels).float().mean())
    assert accuracy > 0.93


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("ig", {"baseline": "background", "background_size": BACKGROUND, "steps": 32}),
        ("occlusion", {"baseline": "background", "background_size": BACKGROUND}),
        ("occlusion", {"baseline": "mean"}),
        ("shap_kernel", {"samples": 200, "background_size": BACKGROUND}),
    ],
)
def test_the_truth_columns_are_found(bundle: ModelBundle, method: str, params: dict) -> None:
    rows = split().rows[:ROWS]
    _, background = _background(bundle)
    e = explain(bundle, rows, method=method, background=background, **params)
    names = [c.name for c in bundle.info.columns]
    recall = truth_recall(e, names, bundle.info.truth_columns)
    assert recall.shape == (ROWS,)
    assert float(recall.mean()) >= 0.8, f"{method} {params}: top-3 recall {recall.mean():.2f}"
    # a map that ranks columns at random finds 3/9 of them on average: the truth is found, not chance
    shuffled = np.random.default_rng(0).permuted(np.stack([e.item(i) for i in range(ROWS)]), axis=1)
    assert float(truth_recall(list(shuffled), names, bundle.info.truth_columns).mean()) < 0.6


@pytest.mark.parametrize("baseline", ["mean", "median", "background"])
def test_ig_adds_up_to_the_logit_change_from_its_reference(bundle: ModelBundle, baseline: str) -> None:
    rows = split().rows[:8]
    raw_bg, background = _background(bundle)
    e = explain(bundle, rows, method="ig", baseline=baseline, background=background, background_size=BACKGROUND)
    refs = reference_rows(baseline, bundle.info, raw_bg)
    t = torch.as_tensor(e.targets)
    f_x = bundle.logits(bundle.prepare(rows)).gather(1, t.view(-1, 1))[:, 0]
    f_ref = bundle.logits(bundle.prepare(refs))[:, t].mean(0)  # the mean over the references, per row's target
    change = (f_x - f_ref).detach().numpy()
    sums = np.array([e.item(i).sum() for i in range(len(rows))])
    np.testing.assert_allclose(sums, change, atol=0.01 * np.abs(change).max() + 1e-4)
    np.testing.assert_allclose(e.diagnostics["output_change"], change, rtol=1e-4, atol=1e-4)


def _logit(bundle: ModelBundle, rows: torch.Tensor, target: int) -> np.ndarray:
    with torch.no_grad():
        return bundle.logits(bundle.prepare(rows))[:, target].double().numpy()


@pytest.mark.parametrize("baseline", ["mean", "median", "background"])
def test_occlusion_equals_the_hand_computation(bundle: ModelBundle, baseline: str) -> None:
    rows = split().rows[:4]
    raw_bg, background = _background(bundle)
    e = explain(bundle, rows, method="occlusion", baseline=baseline, background=background, background_size=BACKGROUND)
    columns = bundle.info.columns
    for i in range(len(rows)):
        t = int(e.targets[i])
        if baseline == "background":
            refs = raw_bg
        else:
            stat = {c.name: (c.median if c.categorical or baseline == "median" else c.mean) for c in columns}
            refs = torch.tensor([[stat[c.name] for c in columns]])
        expected = []
        for j in range(len(columns)):
            hidden = rows[i].repeat(len(refs), 1)
            hidden[:, j] = refs[:, j]
            expected.append(_logit(bundle, rows[i : i + 1], t)[0] - _logit(bundle, hidden, t).mean())
        np.testing.assert_allclose(e.item(i), expected, rtol=1e-4, atol=1e-5)


def test_occlusion_with_the_mean_row_equals_captum_feature_ablation(bundle: ModelBundle) -> None:
    from captum.attr import FeatureAblation

    rows = split().rows[:5]
    e = explain(bundle, rows, method="occlusion", baseline="mean")
    x = bundle.prepare(rows)
    base = bundle.prepare(reference_rows("mean", bundle.info, None))
    mask = feature_mask(bundle.info).unsqueeze(0)
    expected = FeatureAblation(bundle.model).attribute(
        x, baselines=base, target=torch.as_tensor(e.targets), feature_mask=mask
    )
    per_column = torch.stack([expected[:, mask[0] == j][:, 0] for j in range(len(bundle.info.columns))], 1)
    np.testing.assert_allclose(
        np.stack([e.item(i) for i in range(5)]), per_column.detach().numpy(), rtol=1e-4, atol=1e-5
    )


def test_lime_equals_lime_s_own_tabular_explainer(bundle: ModelBundle) -> None:
    rows = split().rows[:3]
    e = explain(bundle, rows, method="lime", samples=300, seed=5)
    training = training_rows(bundle, TRAINING_ROWS, 0)
    assert training is not None
    for i in range(len(rows)):
        reference = lime_table_reference(bundle, rows[i], int(e.targets[i]), 300, training.double().numpy(), seed=5)
        np.testing.assert_allclose(e.item(i), reference, rtol=1e-5, atol=1e-7)
        assert np.abs(reference).max() > 0
    assert all(0.0 <= r <= 1.0 for r in e.diagnostics["surrogate_r2"])


def test_kernel_shap_agrees_with_shap_s_kernel_explainer(bundle: ModelBundle) -> None:
    import shap

    rows = split().rows[10:14]
    raw_bg, background = _background(bundle)
    e = explain(bundle, rows, method="shap_kernel", samples=600, background=background, background_size=BACKGROUND)
    for i in range(len(rows)):
        t = int(e.targets[i])

        def f(m: np.ndarray, t: int = t) -> np.ndarray:
            return bundle.predict_proba(torch.as_tensor(m, dtype=torch.float32))[:, t].double().numpy()

        explainer = shap.KernelExplainer(f, raw_bg.double().numpy())
        reference = np.asarray(explainer.shap_values(rows[i].double().numpy(), silent=True)).reshape(-1)
        ours = e.item(i)
        assert np.corrcoef(ours, reference)[0, 1] >= 0.9, (ours, reference)
        # both add up to p(row) - mean p(background)
        assert ours.sum() == pytest.approx(reference.sum(), abs=1e-3)
    assert max(e.diagnostics["additivity_gap"]) < 1e-3


def test_every_table_method_runs_on_an_imported_module(tmp_path, monkeypatch) -> None:
    from table_models import table_module

    from xaidash.data.modalities.table import prepared_width
    from xaidash.explainers import list_methods
    from xaidash.explainers.robust import counterfactual
    from xaidash.models.external import ImportOptions, import_model
    from xaidash.models.runs.store import load_bundle

    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    width = prepared_width(trained_bundle().info)
    source, weights, _ = table_module(tmp_path, width)
    options = ImportOptions(weights=weights, dataset="planted", model_options={"inputs": width})
    bundle = load_bundle(import_model(f"module:{source}:TableNet", options).run.id, device="cpu")
    rows = split().rows[:3]
    methods = [s.id for s in list_methods("table")]
    assert set(methods) == {"ig", "inputxgrad", "saliency", "occlusion", "shap_kernel", "lime"}
    for method in methods:
        e = explain(bundle, rows, method=method, **({"samples": 64} if method in ("lime", "shap_kernel") else {}))
        maps = np.stack([e.item(i) for i in range(3)])
        assert maps.shape == (3, 9) and np.isfinite(maps).all(), method
    cf = counterfactual(bundle, rows[0], 1 - int(bundle.predict_proba(rows[:1]).argmax()), budget=9)
    assert cf.found or cf.summary().startswith("None found")
