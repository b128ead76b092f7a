"""Compare says what a run will take before its button (issue 29: 350 s with no estimate beforehand), offers the
metrics as checkboxes with their declared cost, the map-recomputing ones unticked, and scores only those ticked."""

from __future__ import annotations

from app_pages import assert_ok, open_run_page, texts
from inspect_runs import make_run

from xaidash.explainers.metrics.registry import metrics_for

TIMEOUT = 300


def test_compare_prices_the_run_before_its_button_and_offers_costly_metrics_unticked(tmp_path, monkeypatch):
    run = make_run(tmp_path / "runs", "shapes", "resnet_small", epochs=1)
    at = open_run_page(run, "compare", monkeypatch, TIMEOUT, compare_methods=["saliency", "ig"], compare_sanity_steps=1)
    assert_ok(at)
    boxes = {b.key: b for b in at.checkbox}
    for spec in metrics_for("compare", "image"):
        box = boxes[f"compare_metric_{spec.id}"]
        assert box.value is (not spec.recomputes_maps), spec.id  # from the declared passes, never by name
        assert " · " in box.label  # its cost per input beside its title
    assert not boxes["compare_metric_max_sensitivity"].value and "4 recomputed maps" in (
        boxes["compare_metric_max_sensitivity"].label
    )
    assert (
        boxes["compare_metric_deletion_auc"].value and "17 forward passes" in boxes["compare_metric_deletion_auc"].label
    )
    expected = [m for m in texts(at.markdown) if m.startswith("Expected time: **about")]
    assert len(expected) == 1 and "sanity check" in expected[0] and "16 inputs × 2 methods" in expected[0], expected
    assert any("ms per forward row" in c for c in texts(at.caption))
    # Ticking a metric that recomputes maps raises the estimate; the run scores only what is ticked.
    at.checkbox(key="compare_metric_max_sensitivity").check().run()  # 4 more IG maps per input
    raised = next(m for m in texts(at.markdown) if m.startswith("Expected time: **about"))
    assert raised != expected[0]
    at.checkbox(key="compare_metric_max_sensitivity").uncheck()
    at.checkbox(key="compare_metric_deletion_auc").uncheck()
    at.number_input(key="compare_n").set_value(2)
    at.toggle(key="compare_sanity").set_value(False)
    at.button(key="compare_go").click().run()
    assert_ok(at)
    table = at.dataframe[0].value
    assert "Insertion AUC ↑" in table.index and "Deletion AUC ↓" not in table.index
    assert "Max-sensitivity ↓" not in table.index and "Sparseness ↑" in table.index
