"""Features: what a language model represents at a layer, through sparse autoencoders trained here. Train an SAE
behind Start (live curves, Stop, Resume), read its held-out metrics, and browse its features: the contexts each
fires on, what it writes to the logits, its neighbours, and search by a text. A feature's address is a link."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.generate_compute import LMContext, language_model_or_stop
from xaidash.dashboard.components.sae_browser import browse_features
from xaidash.dashboard.components.sae_curves import sae_curves, stored_steps
from xaidash.dashboard.components.sae_job_panel import ended_here, job_panel
from xaidash.dashboard.components.sae_train_form import sae_form
from xaidash.dashboard.errors import guard
from xaidash.dashboard.sae_jobs import sae_job
from xaidash.models.language.sae import store
from xaidash.models.language.sae.store import SaeRecord
from xaidash.models.language.sites import SITES
from xaidash.models.runs.store import Run

PICK_KEY = "features_sae"


def header() -> None:
    st.title("Features")
    st.caption(
        "A sparse autoencoder (SAE) rewrites a layer's activations as a sum of a few of many learned directions, "
        "its features, which are often easier to name than neurons. Train one on this model's activations, then "
        "see what each feature fires on and what it makes the model say. A feature is a direction the SAE found "
        "useful for reconstruction: it shows what the layer represents, not that the model uses it for an answer "
        "(Steer & patch tests that)."
    )


def _number(metrics: dict[str, object] | None, key: str) -> float | None:
    value = (metrics or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def sae_table(records: list[SaeRecord]) -> None:
    rows = []
    for r in records:
        c, m = r.config, r.metrics
        rows.append(
            {
                "SAE": r.id,
                "status": r.status,
                "layer · site": f"{c.layer} · {c.site}",
                "SAE type": f"{c.architecture} · k {c.k}" if c.architecture == "topk" else c.architecture,
                "width": c.width,
                "explained variance": _number(m, "explained_variance"),
                "loss recovered": _number(m, "loss_recovered"),
                "L0": _number(m, "l0"),
                "dead": _number(m, "dead"),
                "corpus": f"{c.tokens:,} tokens of {c.corpus} x {c.epochs}",
            }
        )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        column_config={
            "layer · site": st.column_config.TextColumn(
                help="decoder layer (0 = the first) and site: "
                + "; ".join(f"{k} = {v.label}" for k, v in SITES.items())
            ),
            "width": st.column_config.NumberColumn(format="localized"),
            "explained variance": st.column_config.NumberColumn(format="%.3f", help="1 - MSE / variance (held out)"),
            "loss recovered": st.column_config.NumberColumn(
                format="%.3f", help="(CE zero-ablated - CE with the SAE) / (CE zero-ablated - CE clean), held out"
            ),
            "L0": st.column_config.NumberColumn(format="%.1f", help="active features per held-out token"),
            "dead": st.column_config.NumberColumn(format="%d", help="features never active on the held-out tokens"),
        },
    )
    st.caption("Metrics on held-out tokens, as SAELens defines them; empty until the SAE has finished training.")


def _pick(records: list[SaeRecord]) -> SaeRecord:
    ids = [r.id for r in records]
    wanted = st.query_params.get("sae")
    if wanted in ids and st.session_state.get(PICK_KEY + "_from_link") != wanted:
        st.session_state[PICK_KEY] = wanted  # a link named this SAE: follow it
        st.session_state[PICK_KEY + "_from_link"] = wanted
    if st.session_state.get(PICK_KEY) not in ids:
        st.session_state[PICK_KEY] = ids[-1]  # the newest
    chosen = st.selectbox("SAE", ids, key=PICK_KEY, format_func=lambda i: records[ids.index(i)].label)
    return records[ids.index(chosen)]


def delete_sae(run: Run, sae_id: str) -> None:
    """Delete's callback (the confirmation box is ticked)."""
    job = sae_job().snapshot()
    if job.active and job.run_id == run.id and job.sae_id == sae_id:
        st.session_state["features_flash"] = ("error", f"SAE {sae_id} is training right now: stop it first.")
        return
    store.remove_sae(run, sae_id)
    st.session_state.pop(PICK_KEY, None)
    st.session_state.pop(f"sae_confirm_delete_{sae_id}", None)
    st.session_state["features_flash"] = ("success", f"Deleted SAE {sae_id}.")


def actions(run: Run, record: SaeRecord, busy: bool) -> None:
    """Resume (a stopped SAE), Delete (confirmed), and its training curves."""
    if record.status == "failed" and record.error:
        st.error(f"SAE {record.id} failed: {record.error}", icon=":material/error:")
    left, mid, right = st.columns([1, 1, 2], vertical_alignment="bottom")
    if record.status == "stopped" and left.button(
        "Resume", key="sae_resume", icon=":material/play_arrow:", type="primary", disabled=busy
    ):
        if not sae_job().start(run, None, resume=record.id):
            st.warning("An SAE is already training on this server: stop it first, or wait for it to end.")
        st.rerun()
    sure = right.checkbox(
        "Yes, delete this SAE", key=f"sae_confirm_delete_{record.id}", disabled=record.status == "running"
    )
    mid.button(
        "Delete SAE",
        key="sae_delete",
        icon=":material/delete:",
        disabled=not sure,
        on_click=delete_sae,
        args=(run, record.id),
    )
    steps = stored_steps(record.folder)
    if steps:
        with st.expander(f"Training curves of {record.id} ({len(steps):,} steps)"):
            sae_curves(steps, record.config.total_steps)


def _flash() -> None:
    flash = st.session_state.pop("features_flash", None)
    if flash:
        getattr(st, flash[0])(flash[1])


def browsable(record: SaeRecord) -> bool:
    return (record.folder / store.WEIGHTS).is_file() and record.status in ("finished", "stopped")


def run_page(ctx: LMContext) -> None:
    run = ctx.run
    busy = job_panel(run.id)
    ended = ended_here(run.id)
    if ended:
        st.session_state[PICK_KEY] = ended  # show the SAE that just ended, not the one picked before
    _flash()
    records = store.list_saes(run)
    with st.expander("Train a new SAE", expanded=not records and not busy, icon=":material/add:"):
        sae_form(run, ctx.lm, busy)
    if not records:
        if not busy:
            st.info("This run has no SAE yet: set one up above and press Start.", icon=":material/info:")
        return
    st.subheader("Sparse autoencoders of this run")
    sae_table(records)
    record = _pick(records)
    actions(run, record, busy)
    if not browsable(record):
        st.caption(f"SAE {record.id} is {record.status}: its features can be browsed once it has weights.")
        return
    if record.status == "stopped" and not st.toggle(
        "Browse this stopped SAE as it is now",
        key=f"features_browse_stopped_{record.id}",
        help="Indexing its features takes a minute or two; Resume first to browse the finished SAE.",
    ):
        return
    st.subheader(f"Features of {record.id}")
    browse_features(run, record.id)


def main() -> None:
    header()
    ctx = language_model_or_stop()
    with guard("Features"):
        run_page(ctx)


main()
