"""The Generate page's panel "Which SAE features drove it": for the token (or span, or contrast) the page explains,
pick one of the run's sparse autoencoders; its features with the largest activation x gradient of the target are
drawn as bars, with the error term (what the SAE misses) and the decoder bias beside them, and listed with their
activations and a link to each feature's page in the Features browser."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.dashboard.components.generate_compute import LMContext, cached, leased
from xaidash.dashboard.components.sae_browser import BROWSER, feature_link
from xaidash.dashboard.errors import guard
from xaidash.dashboard.nav import page_path
from xaidash.explainers.language.figures import target_label
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.sae_attribution import FeatureAttribution, sae_attribution
from xaidash.models.language.sae.store import WEIGHTS, SaeRecord, list_saes, load_sae

USABLE = ("finished", "stopped")  # a stopped SAE keeps the weights it had when it stopped
TOP_DEFAULT, TOP_MAX = 12, 40
ROW_PX = 35  # Streamlit's dataframe row height
RAISES, LOWERS, NOT_A_FEATURE = "raises the target", "lowers the target", "not one feature"
COLOURS = {RAISES: "#c0392b", LOWERS: "#2e6db4", NOT_A_FEATURE: "#9a9a9a"}  # red up, blue down, as the maps


def usable_saes(ctx: LMContext) -> list[SaeRecord]:
    return [r for r in list_saes(ctx.run) if r.status in USABLE and (r.folder / WEIGHTS).is_file()]


def _version(record: SaeRecord) -> int:
    """The weights file's version: a resumed training rewrites it, and the cached attributions must follow."""
    return (record.folder / WEIGHTS).stat().st_mtime_ns


def attribution_of(ctx: LMContext, query: PromptQuery, record: SaeRecord, top: int) -> FeatureAttribution:
    """The features' attributions of the query's target, on a leased replica (cached per SAE weights and query)."""

    def compute() -> FeatureAttribution:
        with leased(ctx) as lm:
            loaded = load_sae(ctx.run, record.id, device=str(lm.device))
            return sae_attribution(lm, query, loaded.sae, loaded.layer, loaded.site, top=top)

    value, _ = cached(("sae_attribution", ctx.key, query, record.id, _version(record), top), compute)
    return value


def _peak_token(fa: FeatureAttribution, feature: int) -> str:
    position = int(fa.argmax_position[feature])
    where = "prompt" if position < fa.prompt_length else "answer"
    return f"{shown_token(fa.tokens[position])!r} ({where}, position {position})"


def chart_frame(fa: FeatureAttribution, n: int) -> pd.DataFrame:
    """One row per bar: the top n features, then the other active features together, the error term and the
    decoder bias (rows that are no one feature)."""
    rows = []
    for f in fa.top[:n]:
        value = float(fa.attribution[f])
        rows.append(
            {
                "part": f"#{f}",
                "attribution": value,
                "kind": RAISES if value > 0 else LOWERS,
                "max activation": float(fa.max_activation[f]),
                "fires most on": _peak_token(fa, f),
            }
        )
    rest = fa.features_total - sum(float(fa.attribution[f]) for f in fa.top[:n])
    others = fa.active - min(n, len(fa.top))
    extra = [
        (f"{others} other features", rest, "the other active features' attributions, summed"),
        ("error term", fa.error_total, "what the SAE misses: the activation minus its reconstruction"),
        ("decoder bias", fa.bias_total, "the SAE's decoder bias, present whatever the features"),
    ]
    for label, value, what in extra:
        if label.startswith("0 other"):
            continue
        rows.append(
            {"part": label, "attribution": value, "kind": NOT_A_FEATURE, "max activation": None, "fires most on": what}
        )
    return pd.DataFrame(rows)


def features_chart(frame: pd.DataFrame, output_label: str) -> alt.Chart:
    """Horizontal bars in the order of the frame, coloured by what each does to the target, with their legend."""
    order = list(frame["part"])
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("attribution:Q", title=f"activation × gradient of {output_label}"),
            y=alt.Y("part:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=list(COLOURS), range=list(COLOURS.values())),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            tooltip=[
                "part",
                alt.Tooltip("attribution:Q", format="+.4f"),
                alt.Tooltip("max activation:Q", format=".3f"),
                "fires most on",
            ],
        )
        .properties(height=alt.Step(22))  # one band per bar, whatever their number
    )


def features_table(fa: FeatureAttribution, run_id: str, sae_id: str, n: int) -> pd.DataFrame:
    """The top n features: attribution, its share of the site's total, activations, where it fires most, its link."""
    last = len(fa.tokens) - 1
    rows = []
    for j, f in enumerate(fa.top[:n]):
        rows.append(
            {
                "feature": f,
                "attribution": float(fa.attribution[f]),
                "max activation": float(fa.max_activation[f]),
                "at the last position": float(fa.top_activation[last, j]),
                "fires most on": _peak_token(fa, f),
                "browse": feature_link(run_id, sae_id, f),
            }
        )
    return pd.DataFrame(rows)


def _table(frame: pd.DataFrame) -> None:
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        height=ROW_PX * (len(frame) + 1) + 3,  # every row, no inner scrolling
        column_config={
            "feature": st.column_config.NumberColumn("feature", format="#%d", width="small"),
            "attribution": st.column_config.NumberColumn(
                "attribution", format="%+.4f", help="activation × gradient, summed over the positions"
            ),
            "max activation": st.column_config.NumberColumn(
                "max activation", format="%.3f", help="the feature's largest activation over the positions"
            ),
            "at the last position": st.column_config.NumberColumn(
                "at the last position",
                format="%.3f",
                help="its activation at the position that predicts the explained token",
            ),
            "fires most on": st.column_config.TextColumn("fires most on", width="medium"),
            "browse": st.column_config.LinkColumn(
                "browse", display_text="open", help="the feature's page in the Features browser", width="small"
            ),
        },
    )


def completeness_line(fa: FeatureAttribution) -> str:
    share = float(fa.error_share[fa.counted].mean())
    return (
        f"The parts add up: features {fa.features_total:+.4f} + error term {fa.error_total:+.4f} + "
        f"decoder bias {fa.bias_total:+.4f} = {fa.site_total:+.4f}, the gradient × activation of "
        f"the whole site (gap {fa.gap:.1e}). {fa.active:,} of {fa.width:,} features are active at one of the "
        f"{int(fa.counted.sum())} positions counted; the error is {share:.0%} of the activation's norm on average "
        "there."
    )


def _no_sae(ctx: LMContext, records: Sequence[SaeRecord]) -> None:
    waiting = f" ({len(records)} still training or failed)" if records else ""
    st.info(
        f"No trained sparse autoencoder for this model yet{waiting}. Train one on the Features page, or "
        f"`xaidash sae train --run {ctx.run.id} --layer 15`.",
        icon=":material/info:",
    )
    st.page_link(page_path(BROWSER), label="Train an SAE", icon=":material/hub:", query_params={"run": ctx.run.id})


def features_panel(ctx: LMContext, query: PromptQuery) -> None:
    """The panel for the page's explained target (`query`)."""
    st.subheader("Which SAE features drove it")
    usable = usable_saes(ctx)
    if not usable:
        _no_sae(ctx, list_saes(ctx.run))
        return
    c1, c2 = st.columns([3, 1])
    by_id = {r.id: r for r in usable}
    sae_id = c1.selectbox(
        "Sparse autoencoder", list(by_id), index=len(by_id) - 1, format_func=lambda i: by_id[i].label, key="gen_sae"
    )
    n = int(c2.number_input("Features shown", 3, TOP_MAX, TOP_DEFAULT, key="gen_sae_top"))
    record = by_id[str(sae_id)]
    output_label = target_label(query)
    with guard("SAE features"), st.spinner("Reading the SAE's features…"):
        fa = attribution_of(ctx, query, record, TOP_MAX)
        st.caption(
            f"Each feature of the SAE at layer {fa.layer} ({record.config.site}): its activation × the gradient of "
            f"{output_label} (= {fa.output:+.3f}), summed over your prompt's tokens and the positions that read the "
            "answer (the template's too when “Include template tokens” is on): to first order, how much the target "
            "would drop if the feature were switched off there. Red features raise the target, blue ones lower it; "
            "the error term is the part of the activation the SAE does not explain."
        )
        st.altair_chart(features_chart(chart_frame(fa, n), output_label), width="stretch")
        st.caption(completeness_line(fa))
        _table(features_table(fa, ctx.run.id, record.id, n))
