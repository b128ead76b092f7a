"""Steer & patch: which layers, positions, heads and MLPs of a language model carry an answer (activation patching
between a clean and a corrupted prompt), and what its answer becomes when a direction is added inside it (steering
along an SAE feature or a difference of means)."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.generate_compute import LMContext, language_model_or_stop, leased
from xaidash.dashboard.errors import guard
from xaidash.explainers.language import patching as P
from xaidash.explainers.language import steering as S
from xaidash.models.language.generate import Generation
from xaidash.models.language.prompt import build_prompt
from xaidash.models.language.sae.store import list_saes
from xaidash.models.language.sites import SITES

PATCH_KEY = "sp_patch"  # (model key, PatchingResult) of the last Patch press
STEER_KEY = "sp_steer"  # (model key, SteeringResult) of the last Steer press
WARM = "I love you, you are wonderful and I am so happy.\nWhat a beautiful, joyful day, everything is great!"
COLD = "I hate you, you are awful and I am so angry.\nWhat a terrible, miserable day, everything is bad!"
RESTORED = "fraction of the logit difference restored"


def header() -> None:
    st.title("Steer & patch")
    st.caption(
        "Which parts of a language model carry its answer, found by activation patching: run a corrupted prompt, "
        "put back one activation from the clean prompt, and see how much of the clean answer returns. Then steer: "
        "add a direction inside the model while it answers and compare with its plain answer."
    )


# ---- patching ------------------------------------------------------------------------------------------------------


def patch_form(ctx: LMContext) -> None:
    with st.form("sp_patch_form"):
        left, right = st.columns(2)
        clean = left.text_input("Clean prompt", P.NAMES_CLEAN, key="sp_clean")
        corrupted = right.text_input("Corrupted prompt (the same number of tokens)", P.NAMES_CORRUPTED, key="sp_corr")
        answer = left.text_input("Answer to the clean prompt (one token)", P.NAMES_ANSWER, key="sp_answer")
        wrong = right.text_input("Answer to the corrupted prompt (one token)", P.NAMES_WRONG, key="sp_wrong")
        n = ctx.lm.num_layers
        st.caption(
            f"{n} layers x each position, {n * ctx.lm.num_heads} heads and {n} MLPs, {P.DEFAULT_BATCH} patches per "
            "forward pass."
        )
        pressed = st.form_submit_button("Patch", type="primary", icon=":material/science:")
    if not pressed:
        return
    with guard("Patching"):
        bar = st.progress(0.0, "Patching…")
        with leased(ctx) as lm:
            setup = P.prepare(lm, clean, corrupted, answer, wrong)

            def advance(done: int, total: int) -> None:
                bar.progress(done / total, f"Patch {done} of {total}")

            result = P.patch_prompts(lm, setup, on_pass=advance)
        bar.empty()
        st.session_state[PATCH_KEY] = (ctx.key, result)


def resid_chart(result: P.PatchingResult) -> alt.LayerChart:
    """Layer x position heatmap of the fraction restored, with its colour bar (diverging at 0)."""
    n, t = result.resid.shape
    labels = result.position_labels
    frame = pd.DataFrame(
        [
            {"layer": layer, "position": labels[pos], "pos": pos, RESTORED: float(result.resid[layer, pos])}
            for layer in range(n)
            for pos in range(t)
        ]
    )
    x = alt.X("position:N", sort=labels, title=None, axis=alt.Axis(labelAngle=-40, orient="top", labelLimit=160))
    y = alt.Y("layer:O", sort="descending", title="residual stream after layer")
    base = alt.Chart(frame).encode(x=x, y=y)
    cells = base.mark_rect().encode(
        color=alt.Color(
            f"{RESTORED}:Q",
            scale=alt.Scale(scheme="redblue", domain=[-1, 1]),
            legend=alt.Legend(title="restored", orient="right", format="%", gradientLength=300),
        ),
        tooltip=[
            alt.Tooltip("layer:O"),
            alt.Tooltip("position:N"),
            alt.Tooltip(f"{RESTORED}:Q", format=".0%"),
        ],
    )
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text(f"{RESTORED}:Q", format=".0%"),
        color=alt.condition(f"abs(datum['{RESTORED}']) > 0.6", alt.value("white"), alt.value("black")),
    )
    return (cells + text).properties(height=18 * n, width="container")


def heads_chart(result: P.PatchingResult) -> alt.Chart:
    n, h = result.heads.shape
    frame = pd.DataFrame(
        [
            {"layer": layer, "head": head, RESTORED: float(result.heads[layer, head])}
            for layer in range(n)
            for head in range(h)
        ]
    )
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("head:O", axis=alt.Axis(orient="top", labelAngle=0)),
            y=alt.Y("layer:O", sort="descending"),
            color=alt.Color(
                f"{RESTORED}:Q",
                scale=alt.Scale(scheme="redblue", domain=[-1, 1]),
                legend=alt.Legend(title="restored", format="%"),
            ),
            tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip(f"{RESTORED}:Q", format=".0%")],
        )
        .properties(height=18 * n, width="container")
    )


def mlp_chart(result: P.PatchingResult) -> alt.Chart:
    frame = pd.DataFrame({"layer": np.arange(len(result.mlp)), RESTORED: result.mlp})
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("layer:O", sort="descending"),
            x=alt.X(f"{RESTORED}:Q", axis=alt.Axis(format="%"), title="restored by the MLP's output"),
            color=alt.condition(f"datum['{RESTORED}'] >= 0", alt.value("#2166ac"), alt.value("#b2182b")),
            tooltip=[alt.Tooltip("layer:O"), alt.Tooltip(f"{RESTORED}:Q", format=".0%")],
        )
        .properties(height=18 * len(result.mlp), width="container")
    )


def _stored(key: str, ctx: LMContext) -> Any:
    """The result the last press kept under `key`, when it was computed on this model; else None."""
    stored = st.session_state.get(key)
    return stored[1] if stored and stored[0] == ctx.key else None


def patch_results(ctx: LMContext) -> None:
    result: P.PatchingResult | None = _stored(PATCH_KEY, ctx)
    if result is None:
        return
    s = result.setup
    a, b, c = st.columns(3)
    a.metric(f"Logit difference {s.answer_text!r} − {s.wrong_text!r}, clean", f"{result.clean_diff:.2f}")
    b.metric("… corrupted", f"{result.corrupted_diff:.2f}")
    c.metric("Time", f"{result.seconds:.1f} s", help=f"{result.forward_passes} forward passes")
    for note in result.notes:
        st.warning(note, icon=":material/warning:")
    st.markdown("**What carries the answer**")
    st.markdown("\n".join(f"- {line}" for line in P.carriers(result)))
    st.markdown("**Residual stream, layer x position**")
    st.caption(
        "Each cell: the corrupted prompt run with the residual stream after that layer, at that position alone, "
        "taken from the clean prompt. 100% = the clean logit difference back, 0% = no change."
    )
    st.altair_chart(resid_chart(result), width="stretch")
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Attention heads** (each head's output at every position)")
        st.altair_chart(heads_chart(result), width="stretch")
    with right:
        st.markdown("**MLPs** (each MLP's output at every position)")
        st.altair_chart(mlp_chart(result), width="stretch")


# ---- steering ------------------------------------------------------------------------------------------------------


def _direction(ctx: LMContext, source: str, values: dict[str, object]) -> S.Direction:
    if source == "SAE feature":
        return S.feature_direction(ctx.run, str(values["sae"]), int(values["feature"]))  # type: ignore[call-overload]
    lines = lambda key: [t for t in str(values[key]).splitlines() if t.strip()]  # noqa: E731
    with leased(ctx) as lm:
        return S.mean_difference(lm, int(values["layer"]), str(values["site"]), lines("toward"), lines("away"))  # type: ignore[call-overload]


def steer_form(ctx: LMContext) -> None:
    saes = [r for r in list_saes(ctx.run) if r.status in ("finished", "stopped")]
    source = st.radio(
        "Direction",
        ["Difference of means", "SAE feature"],
        horizontal=True,
        key="sp_source",
        help="Train an SAE on the Features page to steer along its features.",
    )
    with st.form("sp_steer_form"):
        prompt = st.text_input("Prompt", "Write one sentence about your neighbour.", key="sp_prompt")
        values: dict[str, object] = {}
        if source == "SAE feature":
            if not saes:
                st.info("This run has no trained SAE yet: train one on the Features page.", icon=":material/info:")
            left, right = st.columns(2)
            values["sae"] = left.selectbox("SAE", [r.id for r in saes], key="sp_sae")
            values["feature"] = right.number_input("Feature", 0, 10**6, 0, key="sp_feature")
        else:
            a, b = st.columns(2)
            values["layer"] = a.number_input(
                "Layer", 0, ctx.lm.num_layers - 1, min(6, ctx.lm.num_layers - 1), key="sp_layer"
            )
            values["site"] = b.selectbox("Site", list(SITES), format_func=lambda k: SITES[k].label, key="sp_site")
            values["toward"] = a.text_area("Toward (one prompt a line)", WARM, key="sp_toward")
            values["away"] = b.text_area("Away from (one prompt a line)", COLD, key="sp_away")
        left, right = st.columns(2)
        strength = left.slider(
            "Strength",
            -2.0,
            2.0,
            0.4,
            0.05,
            key="sp_strength",
            help="Times the prompt's median activation norm at the site; negative steers the other way.",
        )
        tokens = right.slider("Max new tokens", 4, 64, 24, key="sp_tokens")
        pressed = st.form_submit_button("Steer", type="primary", icon=":material/alt_route:")
    if not pressed:
        return
    with guard("Steering"), st.spinner("Answering twice…"):
        direction = _direction(ctx, source, values)
        with leased(ctx) as lm:
            result = S.steer(lm, build_prompt(lm, prompt), direction, strength, max_new_tokens=tokens)
        st.session_state[STEER_KEY] = (ctx.key, result)


def _answer(title: str, gen: Generation) -> None:
    st.markdown(f"**{title}**")
    st.markdown(f"> {gen.text.strip() or '(nothing)'}")
    probs = [s.prob for s in gen.steps]
    mean = float(np.exp(np.mean(np.log(np.clip(probs, 1e-12, 1))))) if probs else 0.0
    st.caption(f"{len(probs)} tokens, mean token probability {mean:.0%}")
    st.dataframe(
        pd.DataFrame({"token": [repr(s.token) for s in gen.steps], "probability": probs}),
        column_config={"probability": st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1)},
        hide_index=True,
        height=220,
        width="stretch",
    )


def steer_results(ctx: LMContext) -> None:
    result: S.SteeringResult | None = _stored(STEER_KEY, ctx)
    if result is None:
        return
    d = result.direction
    st.caption(
        f"Direction: {d.source}, at layer {d.layer} ({SITES[d.site].label}); strength {result.strength:g}: a vector "
        f"of length {result.added_norm:.1f} added at every token."
    )
    left, right = st.columns(2)
    with left:
        _answer("Plain", result.plain)
    with right:
        _answer("Steered", result.steered)


def main() -> None:
    header()
    ctx = language_model_or_stop()
    patch_tab, steer_tab = st.tabs(["Activation patching", "Steering"])
    with patch_tab:
        patch_form(ctx)
        patch_results(ctx)
    with steer_tab:
        steer_form(ctx)
        steer_results(ctx)


main()
