"""Explain's "What would change the answer" panel, drawn per input: an attack from the registry within a budget in
grey levels (the perturbed input, the perturbation with its colour bar, the new prediction, and the chosen methods'
maps before and after with their rank correlation), and the smallest change that makes the model answer a class the
user picks, by the searches the model's inputs allow (explainers/robust/searches.py: for images a minimal
adversarial example, a change of every pixel usually too small to see, or a patch counterfactual a person can see;
for text the fewest word edits; for a table row the fewest changed columns, which for a model that predicts a number
bring its value into a range the user types: value_counterfactual.py), each named by its declared facts, with a
progress bar of its model runs.
Computed on a button, cached per run, input and settings; drawing only: the work is explainers.robust's."""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.explain_maps import map_card
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.params import param_widget
from xaidash.dashboard.components.session_results import record_result
from xaidash.dashboard.components.value_counterfactual import changes_frame, value_counterfactual_section
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import selected_run
from xaidash.explainers.figures.report import ExplainReport
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.robust import attack, counterfactual, explanation_change, list_attacks
from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.robust.counterfactual import DEFAULT_BUDGET, DEFAULT_EDITS, Counterfactual
from xaidash.explainers.robust.explanation_change import TOP_SHARE, MapChange
from xaidash.explainers.robust.figures import change_figures, perturbation_figure
from xaidash.explainers.robust.registry import text_note
from xaidash.explainers.robust.searches import (
    COLUMNS,
    EDITS,
    PATCH,
    PERTURBATION,
    SEARCHES,
    VISIBLE_LEVELS,
    SearchStep,
    searches,
)
from xaidash.explainers.robust.table_counterfactual import DEFAULT_CHANGES
from xaidash.explainers.session_extras import attack_extra, counterfactual_extra
from xaidash.models.bundle import ModelBundle

MAX_LEVELS = 32  # the attack's budget slider: 1..32 grey levels (/255)
CF_MAX_LEVELS = 64


@st.cache_resource(show_spinner=False)
def _results() -> services.LRUCache:
    """Attacks and counterfactuals computed this session and others (keyed by the model's weights version)."""
    return services.LRUCache(32)


def _attack_work(
    bkey: str, bundle: ModelBundle, raw: Any, attack_id: str, params: dict[str, Any], methods: list[str], choice: Any
) -> tuple[AttackResult, list[MapChange]]:
    with leased_model(bkey, bundle) as replica:
        result = attack(replica, raw, None, attack_id, params)
        changes = explanation_change(replica, result, methods, choice.params, choice.target)
    return result, changes


def _verdict(result: AttackResult) -> None:
    c = result.classes
    b, a = result.pred_before, result.pred_after
    line = f"{c[b]} ({result.probs_before[b]:.0%}) → **{c[a]}** ({result.probs_after[a]:.0%})"
    if result.flipped:
        st.error(f"Prediction flipped: {line}", icon=":material/swap_horiz:")
    else:
        st.success(f"Not flipped within this budget: {line}", icon=":material/shield:")
    st.caption(
        f"{result.label}, ε = {result.epsilon * 255:.0f}/255 = {result.epsilon:.4f} (pixel values 0–1): "
        f"L∞ {result.linf * 255:.1f}/255, L2 {result.l2:.3f}, {result.seconds:.2f} s."
    )


def _images_row(result: AttackResult, key: str) -> None:
    with st.container(horizontal=True, gap="small"):
        for title, image in (("Original", result.original), ("Perturbed", result.perturbed)):
            with st.container(width=224):
                st.caption(f"**{title}**")
                st.image(to_pil(image, 224), width="stretch")
        a = result.pred_after
        said = f"predicted after: {result.classes[a]} ({result.probs_after[a]:.0%}) · {result.seconds:.2f} s"
        map_card(perturbation_figure(result), key=f"{key}_perturbation", caption=said, enlarge=False, warn=False)


def _changes(changes: list[MapChange], result: AttackResult, display: str, key: str) -> None:
    if not changes:
        st.caption("Pick methods above to see how their maps change under the attack.")
        return
    st.markdown(
        f"**Explanations before → after** (same class, one colour scale per pair): Spearman rank correlation of the "
        f"two maps (1 = same ranking) and the share of the top {TOP_SHARE:.0%} pixels they keep."
    )
    for c in changes:
        figs = change_figures(c, result, result.classes, display)
        if figs is None:
            st.caption(f"**{c.label}**: failed ({c.error})")
            continue
        rho = "–" if math.isnan(c.spearman) else f"{c.spearman:.2f}"
        with st.container(horizontal=True, gap="small"):
            map_card(figs[0], key=f"{key}_{c.method}_before", title=f"{c.label}: before", enlarge=False, warn=False)
            map_card(figs[1], key=f"{key}_{c.method}_after", title=f"{c.label}: after", enlarge=False, warn=False)
            with st.container(width=200):
                st.metric("Spearman ρ", rho, help="rank correlation of the maps before and after")
                st.metric(f"Top {TOP_SHARE:.0%} kept", f"{c.top_k:.0%}", help=f"of the {c.k} most important pixels")


def _attack_section(bkey: str, bundle: ModelBundle, raw: Any, choice: Any, key: str) -> None:
    specs = list_attacks(bundle.modality)
    if not specs:
        st.caption("No attack is registered for this kind of model.")
        return
    by_id = {s.id: s for s in specs}
    default = next((j for j, s in enumerate(specs) if s.iterative), 0)
    c1, c2 = st.columns([1, 2])
    attack_id = str(
        c1.selectbox("Attack", list(by_id), index=default, format_func=lambda a: by_id[a].label, key=f"{key}_attack")
    )
    spec = by_id[attack_id]
    levels = int(
        c2.slider(
            "Budget ε (grey levels, /255)",
            1,
            MAX_LEVELS,
            8,
            key=f"{key}_eps",
            help="the most any pixel value may change, in 255ths of the pixel range, before normalisation",
        )
    )
    st.caption(f"{spec.label}: {spec.description}. ε = {levels}/255 = {levels / 255:.4f}. Library: `{spec.library}`.")
    own: dict[str, Any] = {}
    if spec.params:
        cols = st.columns(len(spec.params))
        for col, p in zip(cols, spec.params, strict=True):
            with col:
                own[p.name] = param_widget(p, f"{key}_{spec.id}_{p.name}")
    params = {"epsilon": levels / 255, **own}
    methods = list(choice.methods)
    cache_key = (
        bkey,
        services.content_key(raw),
        "attack",
        attack_id,
        tuple(sorted(params.items())),
        tuple(methods),
        repr(sorted((m, sorted(choice.params.get(m, {}).items())) for m in methods)),
        choice.target,
    )
    cache = _results()
    if st.button("Run attack", key=f"{key}_run", icon=":material/bolt:"):
        try:
            with st.spinner(f"Running {spec.label} and re-explaining…"):
                cache.get_or_compute(
                    cache_key, lambda: _attack_work(bkey, bundle, raw, attack_id, params, methods, choice)
                )
        except Exception as err:  # noqa: BLE001 - said on the page; the rest of Explain stays
            show_error(err, "Attack failed")
            return
    done = cache.get(cache_key)
    if done is None:
        return
    result, changes = done
    i, display = (
        int(key.rsplit("_", 1)[1]),
        choice.display if choice.display != "tokens" else "overlay",
    )  # key: attack_<i>
    record_result(i, "attack", lambda: attack_extra(i, result, changes, display))  # into the session's report
    _verdict(result)
    _images_row(result, key)
    _changes(changes, result, choice.display if choice.display != "tokens" else "overlay", key)


def _edited_html(cf: Counterfactual) -> str:
    """The edited words: deleted ones struck through, substituted ones shown old → new, both highlighted."""
    parts = []
    changed = {e.position: e for e in cf.edits}
    for pos, w in enumerate(cf.original_words):
        e = changed.get(pos)
        if e is None:
            parts.append(html.escape(w))
        elif e.new is None:
            parts.append(f"<del style='background:#fbd5d5;color:#9b1c1c'>{html.escape(w)}</del>")
        else:
            parts.append(
                f"<del style='color:#9b1c1c'>{html.escape(w)}</del>&nbsp;<mark style='background:#c6f6d5'>"
                f"{html.escape(e.new)}</mark>"
            )
    return "<p style='line-height:1.9'>" + " ".join(parts) + "</p>"


def _search_choice(bundle: ModelBundle, key: str) -> str:
    """The search to run: a choice among those the model's inputs allow (their declared labels), or the one."""
    allowed = searches(bundle.modality)
    if len(allowed) == 1:
        return allowed[0]
    return str(
        st.radio(
            "Search",
            allowed,
            format_func=lambda s: SEARCHES[s].choice,
            key=f"{key}_cf_search",
            help="; ".join(f"{SEARCHES[s].name}: changes {SEARCHES[s].changes}" for s in allowed),
        )
    )


def _budget(search: str, key: str, column: Any) -> float | None:
    """The search's budget control: the largest ε (/255) for a pixel budget, the most word edits for text; a patch
    grows through its declared sizes."""
    if search == PERTURBATION:
        levels = column.slider(
            "Budget: largest ε tried (/255)", 1, CF_MAX_LEVELS, round(DEFAULT_BUDGET * 255), key=f"{key}_cf_budget"
        )
        return int(levels) / 255
    if search == PATCH:
        column.caption(f"{SEARCHES[PATCH].changes}; up to half the image's side.")
        return None
    if search == COLUMNS:
        return int(column.number_input("Budget: most changed columns", 1, 10, DEFAULT_CHANGES, key=f"{key}_cf_cols"))
    return int(column.number_input("Budget: most word edits", 1, 20, DEFAULT_EDITS, key=f"{key}_cf_edits"))


def _run_search(
    bkey: str, bundle: ModelBundle, raw: Any, to: int, search: str, budget: float | None, **options: Any
) -> Counterfactual:
    """The search with a progress bar of its model runs ('PGD run 3 of at most 9 · ε = 12.8/255')."""
    bar = st.progress(0.0, text=f"Looking for a {SEARCHES[search].name}…")

    def progress(step: SearchStep) -> None:
        bar.progress(step.fraction, text=f"Looking for a {SEARCHES[search].name}: {step.text()}")

    try:
        with leased_model(bkey, bundle) as replica:
            return counterfactual(replica, raw, to, budget=budget, search=search, progress=progress, **options)
    finally:
        bar.empty()


def _found(cf: Counterfactual, key: str) -> None:
    st.success(cf.summary(), icon=":material/check_circle:")
    change = cf.change
    if change is not None and not change.visible:
        st.info(
            f"This is an adversarial example, not a change a person sees: no pixel moved by {VISIBLE_LEVELS}/255 or "
            f"more, so the two images look the same. For a change you can see, choose “{SEARCHES[PATCH].choice}”.",
            icon=":material/visibility_off:",
        )
    if cf.note:
        st.caption(cf.note)
    if cf.result is not None:
        _images_row(cf.result, f"{key}_cf")
    elif cf.text is not None:
        st.markdown(_edited_html(cf), unsafe_allow_html=True)
    elif cf.changes:
        _column_changes(cf)


def _column_changes(cf: Counterfactual) -> None:
    """The changed columns, old → new in their units (categories by name), and every class's probability."""
    st.dataframe(changes_frame(cf.changes), hide_index=True)
    if cf.probs_after is not None:
        st.dataframe(
            pd.DataFrame({"class": list(cf.classes), "the row": cf.probs_before, "changed row": cf.probs_after}),
            hide_index=True,
            column_config={
                c: st.column_config.ProgressColumn(c, format="percent", min_value=0.0, max_value=1.0)
                for c in ("the row", "changed row")
            },
        )
    if cf.fixed:
        st.caption("Kept as they were: " + ", ".join(cf.fixed) + ".")


def _counterfactual_section(bkey: str, bundle: ModelBundle, raw: Any, report: ExplainReport, i: int, key: str) -> None:
    names = " or ".join(SEARCHES[s].name for s in searches(bundle.modality))
    st.markdown(f"**{names[0].upper() + names[1:]}**: the smallest change that makes the model answer another class.")
    classes = list(bundle.info.classes)
    pred = report.inputs[i].predictions["A"][0].cls
    others = [k for k in range(len(classes)) if k != pred]
    search = _search_choice(bundle, key)
    c1, c2 = st.columns([1, 2])
    to = int(c1.selectbox("Class to reach", others, format_func=lambda k: classes[k], key=f"{key}_cf_to"))
    budget = _budget(search, key, c2)
    options: dict[str, Any] = {}
    if search == COLUMNS:
        options["fixed"] = st.multiselect(
            "Keep fixed",
            [c.name for c in bundle.info.columns],
            key=f"{key}_cf_fixed",
            help="columns the search leaves as they are (what cannot be changed, such as an age or a group)",
        )
    cache_key = (bkey, services.content_key(raw), "counterfactual", search, to, budget, repr(options))
    cache = _results()
    if st.button(f"Find the {SEARCHES[search].name}", key=f"{key}_cf_run", icon=":material/alt_route:"):
        try:
            cache.get_or_compute(cache_key, lambda: _run_search(bkey, bundle, raw, to, search, budget, **options))
        except Exception as err:  # noqa: BLE001 - said on the page
            show_error(err, f"The {SEARCHES[search].name} search failed")
            return
    cf = cache.get(cache_key)
    if cf is None:
        return
    record_result(i, "counterfactual", lambda: counterfactual_extra(i, cf))  # into the session's report
    if not cf.found:
        st.warning(cf.summary(), icon=":material/block:")
        return
    _found(cf, key)


def attack_panel(report: ExplainReport, i: int, choice: Any) -> None:
    """The panel for input `i` of the Explain page's report; `choice`: the page's methods, parameters, target and
    display (explain.Choice)."""
    # A fixed key and label keep the browser's open state across the reruns the panel's buttons cause.
    with st.expander("What would change the answer", icon=":material/bolt:", key=f"attack_panel_{i}"):
        run = selected_run()
        if run is None:
            return
        try:
            bundle = services.bundle_for(run)
        except Exception as err:  # noqa: BLE001 - the page above already said it; keep the panel quiet
            show_error(err, "Model not available")
            return
        bkey = services.run_key(run)
        raw = report.inputs[i].raw(*bundle.info.input_shape[:1])  # channels; a text model has no input shape
        key = f"attack_{i}"
        adapter = adapter_of(bundle.modality)
        if adapter.attackable:
            _attack_section(bkey, bundle, raw, choice, key)
        elif EDITS in searches(bundle.modality):
            st.caption(text_note())
        elif not searches(bundle.modality):
            st.caption(
                f"Attacks and counterfactual searches are drawn for images, texts and table rows; xaidash has none "
                f"for {adapter.label} yet."
            )
            return
        else:
            st.caption(
                f"Gradient attacks (FGSM, PGD) move pixels within a budget; they do not apply to {adapter.label}. "
                + " ".join(
                    f"The {SEARCHES[s].name} below changes {SEARCHES[s].changes}." for s in searches(bundle.modality)
                )
            )
        st.divider()
        if bundle.regression is not None:  # no other class to reach: a range of values instead
            value_counterfactual_section(bkey, bundle, raw, report, i, key, _results())
            return
        _counterfactual_section(bkey, bundle, raw, report, i, key)
