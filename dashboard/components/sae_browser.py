"""The feature browser of one SAE: pick a feature (or find one by a text or a token), see what it fires on (top
contexts with the activating tokens highlighted, the histogram of its activations, its density), what it writes
(the tokens whose logits it promotes and suppresses) and its decoder-cosine neighbours. The feature shown is in
the page's address (`?run=..&sae=..&feature=N`), so a link opens it."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st
import torch

from xaidash.dashboard.errors import guard
from xaidash.dashboard.nav import page_url
from xaidash.dashboard.services import language_model_for
from xaidash.explainers.language import sae_features as sf
from xaidash.explainers.language.sae_figures import contexts_html, visible
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae.store import LoadedSae, corpus_tokens, load_sae, sae_folder
from xaidash.models.runs.store import Run

SHOWN = 10  # top contexts shown at first; the rest behind "more"
K = 10


def _stamp(run: Run, sae_id: str) -> float:
    path = sae_folder(run, sae_id) / "sae.safetensors"
    return path.stat().st_mtime if path.is_file() else 0.0


@st.cache_resource(max_entries=4, show_spinner=False)
def _loaded(path: str, sae_id: str, stamp: float) -> LoadedSae:
    return load_sae(Path(path), sae_id)


@st.cache_resource(max_entries=4, show_spinner=False)
def _index(path: str, sae_id: str, stamp: float) -> tuple[sf.FeatureIndex, torch.Tensor]:
    loaded = _loaded(path, sae_id, stamp)
    return sf.feature_index(Path(path), sae_id, loaded), corpus_tokens(Path(path), sae_id)[0]


BROWSER = "features"  # the page that shows the browser


def feature_link(run_id: str, sae_id: str, feature: int) -> str:
    """The address that opens `feature` of SAE `sae_id` of run `run_id` in the browser (every page links so)."""
    return page_url(BROWSER, run=run_id, sae=sae_id, feature=feature)


def _wanted_feature(sae_id: str, width: int) -> int:
    """The feature in the address when it names this SAE, else 0."""
    if st.query_params.get("sae") != sae_id:
        return 0
    try:
        feature = int(st.query_params.get("feature", "0"))
    except ValueError:
        return 0
    return feature if 0 <= feature < width else 0


def _pick_feature(run: Run, sae_id: str, width: int) -> int:
    key = f"sae_feature_{run.id}_{sae_id}"
    wanted = _wanted_feature(sae_id, width)
    if key not in st.session_state or st.session_state.get(key + "_from_link") != wanted:
        st.session_state[key] = wanted  # a link (or another page) set the address: follow it
        st.session_state[key + "_from_link"] = wanted
    feature = int(st.number_input(f"Feature (0 to {width - 1:,})", 0, width - 1, key=key, step=1))
    st.query_params.update({"run": run.id, "sae": sae_id, "feature": str(feature)})
    st.session_state[key + "_from_link"] = feature
    return feature


def _words(lm: LanguageModel, ids: list[int]) -> list[str]:
    return lm.token_text(ids)


def _search(
    run: Run, sae_id: str, lm: LanguageModel, loaded: LoadedSae, index: sf.FeatureIndex, tokens: torch.Tensor
) -> None:
    """Find features by a text (run through the model) and, for a text of one token, by the corpus."""
    text = st.text_input(
        "Find features that fire on a text", key=f"sae_search_{run.id}_{sae_id}", placeholder="e.g. Paris"
    )
    if not text.strip():
        return
    with guard("searching features"):
        found = sf.search_text(lm, loaded, text, K)
        words = _words(lm, found.token_ids)
        rows = [
            {
                "feature": f,
                "open": feature_link(run.id, sae_id, f),
                "largest activation": round(v, 3),
                "on token": visible(words[at]),
                "density": float(index.density[f]),
            }
            for f, v, at in found.top
        ]
        st.caption(f"Features that fire most on the text's {len(words)} token(s):")
        _link_table(rows, "No feature fires on this text.")
        if len(found.token_ids) == 1:
            corpus = sf.features_on_token(index, tokens, found.token_ids[0], K)
            st.caption(f"Features whose top {sf.TOP_N} corpus tokens are most often {visible(words[0])!r}:")
            _link_table(
                [
                    {
                        "feature": f,
                        "open": feature_link(run.id, sae_id, f),
                        f"of top {sf.TOP_N}": n,
                        "largest activation": round(v, 3),
                    }
                    for f, n, v in corpus
                ],
                f"No feature has {visible(words[0])!r} among its top {sf.TOP_N} corpus tokens.",
            )


def _link_table(rows: list[dict[str, object]], empty: str) -> None:
    if not rows:
        st.info(empty)
        return
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "density": st.column_config.NumberColumn("density", format="percent"),
        },
    )


def _histogram(index: sf.FeatureIndex, feature: int) -> alt.Chart:
    edges = index.hist_edges(feature).tolist()
    df = pd.DataFrame({"from": edges[:-1], "to": edges[1:], "tokens": index.hist[feature].tolist()})
    return (
        alt.Chart(df)
        .mark_bar(color="#e6550d")
        .encode(
            x=alt.X("from:Q", title="activation (where it fires)", bin="binned"),
            x2="to:Q",
            y=alt.Y("tokens:Q", title="tokens"),
            tooltip=["from:Q", "to:Q", "tokens:Q"],
        )
        .properties(height=180)
    )


def _facts(index: sf.FeatureIndex, feature: int) -> None:
    density = float(index.density[feature])
    c1, c2, c3 = st.columns(3)
    c1.metric("Density", f"{density:.3%}", help=f"Fraction of the {index.tokens:,} harvested tokens where it fires.")
    c2.metric("Mean when firing", f"{float(index.mean_active[feature]):.3g}")
    c3.metric("Largest activation", f"{float(index.max_value[feature]):.3g}")
    if density == 0:
        st.warning("This feature never fired on the harvested tokens (a dead feature).")


def _contexts(lm: LanguageModel, index: sf.FeatureIndex, tokens: torch.Tensor, feature: int) -> None:
    rows = []
    for slot in range(index.top_values.shape[1]):
        ids, vals, focus = sf.context_of(index, tokens, feature, slot)
        if ids:
            rows.append((_words(lm, ids), vals, focus, float(index.top_values[feature, slot])))
    if not rows:
        return
    st.markdown(f"**Top activating contexts** ({len(rows)}; {sf.BEFORE} tokens before, {sf.AFTER} after)")
    starts = {t for t in (lm.tokenizer.bos_token_id, lm.tokenizer.eos_token_id) if t is not None}
    after, n = sf.at_start_share(index, tokens, feature, starts)
    if n and after >= n / 2:
        st.caption(
            f"{after} of its {n} top tokens are the first word of a text: this feature marks where a text begins "
            "(the position), more than any one word."
        )
    st.html(contexts_html(rows[:SHOWN], float(index.max_value[feature])))
    if len(rows) > SHOWN:
        with st.expander(f"{len(rows) - SHOWN} more"):
            st.html(contexts_html(rows[SHOWN:], float(index.max_value[feature])))


def _effects(run: Run, sae_id: str, lm: LanguageModel, loaded: LoadedSae, feature: int) -> None:
    up, down = sf.logit_effects(lm, loaded, feature, K)
    near = sf.neighbours(loaded, feature, K)
    c1, c2, c3 = st.columns(3)
    for col, title, pairs in ((c1, "Promotes", up), (c2, "Suppresses", down)):
        words = _words(lm, [i for i, _ in pairs])
        col.markdown(f"**{title}** (logit change per unit)")
        col.dataframe(
            pd.DataFrame({"token": [visible(w) for w in words], "logit": [round(v, 3) for _, v in pairs]}),
            hide_index=True,
        )
    c3.markdown("**Neighbours** (decoder cosine)")
    c3.dataframe(
        pd.DataFrame(
            {
                "feature": [f for f, _ in near],
                "open": [feature_link(run.id, sae_id, f) for f, _ in near],
                "cosine": [round(c, 3) for _, c in near],
            }
        ),
        hide_index=True,
        column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
    )


def _feature_view(
    run: Run,
    sae_id: str,
    lm: LanguageModel,
    loaded: LoadedSae,
    index: sf.FeatureIndex,
    tokens: torch.Tensor,
    feature: int,
) -> None:
    st.subheader(f"Feature {feature}")
    _facts(index, feature)
    _contexts(lm, index, tokens, feature)
    if int(index.hist[feature].sum()):
        st.markdown("**Activations where it fires**")
        st.altair_chart(_histogram(index, feature), width="stretch")
    _effects(run, sae_id, lm, loaded, feature)


def browse_features(run: Run, sae_id: str) -> None:
    """The browser of SAE `sae_id` of `run` (a language-model run): the feature in the address, or 0."""
    with guard("opening the SAE's features"):
        stamp = _stamp(run, sae_id)
        loaded = _loaded(str(run.path), sae_id, stamp)
        if not (sae_folder(run, sae_id) / sf.INDEX).is_file():
            st.caption("Indexing the features (once per SAE: two passes over its harvested activations)…")
        with st.spinner("Indexing the SAE's features…"):
            index, tokens = _index(str(run.path), sae_id, stamp)
        lm = language_model_for(run)
        alive = int((index.density > 0).sum())
        st.caption(
            f"{loaded.width:,} features, {alive:,} fired on the {index.tokens:,} harvested tokens; "
            f"layer {loaded.layer} {loaded.site}."
        )
        _search(run, sae_id, lm, loaded, index, tokens)
        feature = _pick_feature(run, sae_id, loaded.width)
        _feature_view(run, sae_id, lm, loaded, index, tokens, feature)
