"""Explain's "What would change the answer" panel through AppTest: the attacks listed from the registry, an attack
run on a button with its verdict, perturbation map (colour bar in grey levels) and before/after maps with their
rank correlation; the counterfactual's result or "none found"; text runs told that the counterfactual is theirs."""

from __future__ import annotations

from app_pages import assert_ok, make_app, open_page, texts
from streamlit.testing.v1 import AppTest

from xaidash.explainers.robust import list_attacks
from xaidash.explainers.robust.searches import PATCH, SEARCHES, searches

PANEL = "What would change the answer"


def _open(run_id: str) -> AppTest:
    at = open_page(make_app(run_id, timeout=180), "views/explain.py")
    assert any(e.label == PANEL for e in at.expander)
    return at


def test_attack_and_counterfactual_on_an_image_run(runs) -> None:
    at = _open(runs["image"])
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    assert_ok(at)
    picker = at.selectbox(key="attack_0_attack")
    assert list(picker.options) == [s.label for s in list_attacks("image")]  # from the registry, not by name
    at.slider(key="attack_0_eps").set_value(16).run()
    at.button(key="attack_0_run").click().run()
    assert_ok(at)
    verdicts = [a.value for a in at.error] + [s.value for s in at.success]
    assert any("Prediction flipped" in v or "Not flipped" in v for v in verdicts), verdicts
    captions = texts(at.caption)
    assert any("ε = 16/255" in c and "L∞" in c for c in captions)
    legends = [m for m in texts(at.markdown) if 'class="xai-cbar"' in m]
    assert any("grey levels (/255)" in m for m in legends), "the perturbation's colour bar reads in pixel units"
    assert any(m.label == "Spearman ρ" for m in at.metric)
    assert any("Saliency: before" in c for c in captions) and any("Saliency: after" in c for c in captions)

    # the image searches are offered by their declared names: a minimal adversarial example or a patch you can see
    search = at.radio(key="attack_0_cf_search")
    assert list(search.options) == [SEARCHES[s].choice for s in searches("image")]
    assert "Minimal adversarial example or patch counterfactual" in " ".join(texts(at.markdown))
    assert at.button(key="attack_0_cf_run").label == "Find the minimal adversarial example"
    at.slider(key="attack_0_cf_budget").set_value(1).run()
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    said = [w.value for w in at.warning] + [s.value for s in at.success]
    assert any(
        v.startswith("None found within") or (v.startswith("Minimal adversarial example: ") and " at ε = " in v)
        for v in said
    ), said
    if any(v.startswith("Minimal adversarial example") for v in said):  # 1/255 is never a change a person sees
        assert any("not a change a person sees" in i.value for i in at.info), [i.value for i in at.info]

    search.set_value(PATCH).run()
    assert at.button(key="attack_0_cf_run").label == "Find the patch counterfactual"
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    said = [w.value for w in at.warning] + [s.value for s in at.success]
    assert any(v.startswith(("Patch counterfactual: ", "None found within a patch of")) for v in said), said


def test_text_run_gets_the_counterfactual(runs) -> None:
    at = _open(runs["text"])
    assert any("use the counterfactual" in c for c in texts(at.caption))
    assert not [b for b in at.button if b.key == "attack_0_run"]  # no pixel attack on text
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    said = [w.value for w in at.warning] + [s.value for s in at.success]
    assert any(
        v.startswith("None found within") or (v.startswith("Counterfactual: ") and "word edit" in v) for v in said
    ), said
    assert not [r for r in at.radio if r.key == "attack_0_cf_search"], "text has one search: no choice"
