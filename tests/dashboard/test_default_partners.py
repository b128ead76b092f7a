"""Default partners: Side by side's model B and Train's "Compare runs" offer runs of the same data set and modality
first, good ones before unmeasured imports before poor ones, and flag a poor run wherever it is offered; a text
run is never paired with an image run by default (`comparison.side_by_side.rank_partners`, `default_comparison`)."""

from __future__ import annotations

import functools

import pytest
from app_pages import assert_ok, open_page
from app_pages import make_app as _make_app
from inspect_runs import make_run

from xaidash.explainers.comparison.side_by_side import (
    GOOD,
    POOR,
    POOR_FLAG,
    UNMEASURED,
    default_comparison,
    partners,
    rank_partners,
)
from xaidash.models.runs.store import WEIGHTS, Run

make_app = functools.partial(_make_app, timeout=120)
CHANCE_ACC = 0.249  # 4 classes: an untrained model


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("partner_runs")
    made = {
        "good_old": make_run(root, "shapes", "mlp", epochs=1),
        "anchor": make_run(root, "shapes", "resnet_small", epochs=1),
        "text": make_run(root, "cues", "text_cnn", epochs=1),
        "poor_new": make_run(root, "shapes", "mlp", epochs=1),
    }
    made["good_old"].update_summary(test_acc=0.93)
    made["anchor"].update_summary(test_acc=0.97)
    made["text"].update_summary(test_acc=0.99)
    made["poor_new"].update_summary(test_acc=CHANCE_ACC)
    return made


def newest_first(runs: dict[str, Run]) -> list[Run]:
    return [runs[k] for k in ("poor_new", "text", "anchor", "good_old")]


def test_ranking_puts_the_same_data_first_and_good_before_poor(runs):
    ranked = rank_partners(runs["anchor"], newest_first(runs))
    assert [r.run.id for r in ranked] == [runs["good_old"].id, runs["poor_new"].id, runs["text"].id]
    assert [(r.same_data, r.quality) for r in ranked] == [(True, GOOD), (True, POOR), (False, GOOD)]
    assert ranked[1].flag == POOR_FLAG and "near chance" in (ranked[1].warning or "")
    assert ranked[0].flag == "" and ranked[0].warning is None


def test_an_import_without_accuracy_comes_after_measured_runs(runs, tmp_path):
    import shutil

    from xaidash.data.registry import get_info
    from xaidash.models.external.options import ImportOptions
    from xaidash.models.external.runs import import_model

    root = tmp_path / "runs"
    for key in ("anchor", "good_old"):
        shutil.copytree(runs[key].path, root / runs[key].id)
    options = ImportOptions(
        weights=runs["good_old"].file(WEIGHTS), input_shape=(3, 32, 32), classes=tuple(get_info("shapes").classes)
    )
    imported = import_model("zoo:mlp", options, root=root).run  # newest, no accuracy of its own
    anchor = Run(root / runs["anchor"].id)
    found = partners(anchor, [imported, Run(root / runs["good_old"].id), anchor])
    assert [c.run.id for c in found.runs] == [runs["good_old"].id, imported.id]
    assert found.runs[1].flag == "accuracy not measured"
    assert rank_partners(anchor, [imported])[0].quality == UNMEASURED


def test_compare_runs_default_is_a_pair_of_the_same_data_set(runs):
    everything = newest_first(runs)
    assert [r.id for r in default_comparison(everything)] == [runs["anchor"].id, runs["good_old"].id]
    assert [r.id for r in default_comparison(everything, runs["anchor"])] == [runs["anchor"].id, runs["good_old"].id]
    # A text run with no other text run: alone, never beside an image run.
    assert [r.id for r in default_comparison(everything, runs["text"])] == [runs["text"].id]
    assert default_comparison([]) == []


def test_side_by_side_offers_the_good_run_first_and_flags_the_poor_one(runs, monkeypatch):
    monkeypatch.setenv("XAIDASH_RUNS", str(runs["anchor"].path.parent))
    at = open_page(make_app(runs["anchor"].id), "views/side_by_side.py")
    model_b = at.selectbox(key=f"sbs_b_{runs['anchor'].id}")
    assert runs["good_old"].id in model_b.options[0] and POOR_FLAG not in model_b.options[0]
    poor = [o for o in model_b.options if runs["poor_new"].id in o]
    assert len(poor) == 1 and poor[0].endswith(POOR_FLAG)


def test_train_compare_runs_defaults_to_the_same_data_set_and_flags_poor_runs(runs, monkeypatch):
    monkeypatch.setenv("XAIDASH_RUNS", str(runs["anchor"].path.parent))
    at = open_page(make_app(runs["text"].id), "views/train.py")
    pick = at.multiselect(key="compare_runs_pick")
    assert pick.value == [runs["text"].id]  # no other cues run: never paired with an image run
    at = open_page(make_app(runs["anchor"].id), "views/train.py")
    pick = at.multiselect(key="compare_runs_pick")
    assert pick.value == [runs["anchor"].id, runs["good_old"].id]
    assert pick.format_func(runs["poor_new"].id).endswith(POOR_FLAG)
    assert not pick.format_func(runs["good_old"].id).endswith(POOR_FLAG)
    assert_ok(at)


def test_a_stopped_run_is_paired_with_its_best_sibling_of_the_same_model(tmp_path):
    """Issue 29: a stopped resnet_small was paired with a newer vit_tiny instead of its 99.9% resnet_small sibling.
    The partner is the usable run of the same model spec on the same data set with the best measured accuracy,
    then other models by quality; a stopped run is fine as the subject."""
    root = tmp_path / "runs"
    sibling_low = make_run(root, "shapes", "resnet_small", epochs=1)
    sibling_best = make_run(root, "shapes", "resnet_small", epochs=1)
    other_model = make_run(root, "shapes", "mlp", epochs=1)
    still_training = make_run(root, "shapes", "resnet_small", epochs=1)
    stopped = make_run(root, "shapes", "resnet_small", epochs=1)
    sibling_low.update_summary(test_acc=0.95)
    sibling_best.update_summary(test_acc=0.999)
    other_model.update_summary(test_acc=0.99)  # newer than the siblings and good: still after them
    still_training.file(WEIGHTS).unlink()  # no weights yet: not usable, however high its last validation
    still_training.update_summary(test_acc=None, val_acc=0.9999)
    stopped.update_summary(state="stopped", test_acc=None, val_acc=0.62)
    newest_first = [stopped, still_training, other_model, sibling_best, sibling_low]
    assert default_comparison(newest_first, stopped) == [stopped, sibling_best]
    ranked = rank_partners(stopped, newest_first)
    assert [r.run.id for r in ranked] == [sibling_best.id, sibling_low.id, other_model.id, still_training.id]
    assert [(r.same_model, r.usable) for r in ranked] == [(True, True), (True, True), (False, True), (True, False)]
    # Without the same model spec among the usable runs, the best other model.
    assert default_comparison([stopped, still_training, other_model], stopped) == [stopped, other_model]
    # Side by side's Model B follows the same order.
    assert partners(stopped, newest_first).runs[0].run.id == sibling_best.id
