"""The Explain page's downloads carry what its panels computed (issue 29): after an attack and a counterfactual on
input 1, the page registers both for the report, says so beside the download buttons, and each part builds the
report's section; a draw without them registers nothing."""

from __future__ import annotations

from app_pages import assert_ok, make_app, open_page, texts

from xaidash.dashboard.components.session_results import KEY, with_results
from xaidash.explainers.figures.report import ExplainReport, ReportSettings, RunInfo


def test_attack_and_counterfactual_go_into_the_report(runs) -> None:
    at = open_page(make_app(runs["image"], timeout=180), "views/explain.py")
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    assert_ok(at)
    assert at.session_state[KEY] == {}  # nothing computed yet: nothing but the maps in the report
    assert not any("They include" in c for c in texts(at.caption))
    # A budget no other test uses: the panel's results are cached for the whole process (a flipped prediction is
    # drawn as an error, which other pages' tests of the same run and input would then see).
    at.slider(key="attack_0_eps").set_value(3).run()
    at.button(key="attack_0_run").click().run()
    at.slider(key="attack_0_cf_budget").set_value(1).run()
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    parts = at.session_state[KEY]
    assert sorted(parts) == [(0, "attack"), (0, "counterfactual")]
    assert any("the attack and counterfactual of input 1" in c for c in texts(at.caption))
    attack = parts[(0, "attack")]()
    assert attack.kind == "attack" and attack.title.startswith("Attack: ") and attack.figures
    assert "Saliency: before" in [f.title for f in attack.figures]
    cf = parts[(0, "counterfactual")]()
    assert cf.title.startswith("Minimal adversarial example: towards ") and cf.data["found"] in (True, False)


def test_a_part_that_fails_is_a_note() -> None:
    run = RunInfo("r", "m", "d", "image", ("a", "b"))
    report = ExplainReport([run], ReportSettings([]), [], [])

    def broken():
        raise RuntimeError("gone")

    made = with_results(report, {(0, "training_samples"): broken})
    assert made.extras == [] and made.notes == [
        "Input 1: the training samples could not be added to the report (gone)."
    ]
