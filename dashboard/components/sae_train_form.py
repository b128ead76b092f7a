"""The Features page's form for a new sparse autoencoder: where it reads (layer, site), what it is (architecture,
width, sparsity), what it learns from (corpus, tokens, epochs), the expected time before Start, and Start. Settings
that cannot work get one line under the button, before anything is written or started."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard.errors import show_error
from xaidash.dashboard.sae_jobs import sae_job
from xaidash.data.formatting import duration_text
from xaidash.models.device import pick_device
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae import store
from xaidash.models.language.sae.config import ARCHITECTURES, SaeConfig, expected_seconds
from xaidash.models.language.sae.corpus import text_datasets
from xaidash.models.language.sites import SITES
from xaidash.models.runs.store import Run

OWN_CORPUS = "a text file or folder…"
D = SaeConfig(layer=0)
ARCH_LABELS = {
    "topk": "TopK (k features active per token)",
    "jumprelu": "JumpReLU (an L0 penalty)",
    "standard": "standard (ReLU with an L1 penalty)",
}


def _corpus() -> str:
    names = text_datasets()
    left, right = st.columns([1, 2])
    choice = left.selectbox(
        "Corpus",
        [*names, OWN_CORPUS],
        index=names.index(D.corpus) if D.corpus in names else 0,
        key="sae_corpus",
        help="The texts whose activations the SAE learns from: a text data set's train split, or your own texts.",
    )
    if choice != OWN_CORPUS:
        return str(choice)
    return right.text_input(
        "Text file or folder (on the server)",
        key="sae_corpus_path",
        placeholder="/path/to/texts/ or notes.txt",
        help="A folder is read recursively: .txt, .md, .csv, .json, .jsonl, .html, .rst files.",
    ).strip()


def _sparsity(architecture: str, width: int) -> tuple[int | None, float]:
    if architecture == "topk":
        k = st.number_input("k (active features per token)", 1, max(1, width), min(D.k or 32, width), key="sae_k")
        return int(k), D.sparsity
    label = "L0 coefficient" if architecture == "jumprelu" else "L1 coefficient"
    return None, float(st.number_input(label, 0.0, 1e4, D.sparsity, format="%g", key="sae_sparsity"))


def _more() -> dict[str, float | int]:
    with st.expander("More: context, batch, learning rate, held-out tokens, seed"):
        a, b, c = st.columns(3)
        return {
            "context": int(a.number_input("Tokens per context", 8, 4096, D.context, key="sae_context")),
            "batch_tokens": int(b.number_input("Batch (tokens a step)", 1, 1 << 16, D.batch_tokens, key="sae_batch")),
            "lr": float(c.number_input("Learning rate", 1e-6, 1.0, D.lr, format="%g", key="sae_lr")),
            "heldout_tokens": int(
                a.number_input("Held-out tokens (evaluation)", 1, 1 << 20, D.heldout_tokens, key="sae_heldout")
            ),
            "seed": int(b.number_input("Seed", 0, 2**31 - 1, D.seed, key="sae_seed")),
        }


def sae_settings(lm: LanguageModel) -> SaeConfig:
    """The form's settings (widgets outside a form: the expected time follows every change)."""
    a, b, c = st.columns(3)
    layer = a.number_input(
        f"Layer (0 to {lm.num_layers - 1})", 0, lm.num_layers - 1, lm.num_layers // 2, key="sae_layer"
    )
    site = b.selectbox("Site", list(SITES), format_func=lambda s: SITES[s].label, key="sae_site")
    architecture = c.selectbox(
        "Architecture", ARCHITECTURES, format_func=lambda s: ARCH_LABELS.get(s, s), key="sae_architecture"
    )
    a, b, c = st.columns(3)
    with a:
        width = int(st.number_input("Width (features)", 1, 1 << 17, D.width, step=256, key="sae_width"))
    with b:
        k, sparsity = _sparsity(str(architecture), width)
    with c:
        epochs = int(st.number_input("Epochs", 1, 100, D.epochs, key="sae_epochs"))
    corpus = _corpus()
    tokens = int(st.number_input("Training tokens", 1, 50_000_000, D.tokens, step=10_000, key="sae_tokens"))
    return SaeConfig(
        layer=int(layer),
        site=str(site),
        architecture=str(architecture),
        width=width,
        k=k,
        corpus=corpus,
        tokens=tokens,
        sparsity=sparsity,
        epochs=epochs,
        **_more(),  # type: ignore[arg-type]
    )


def _expected(run: Run, lm: LanguageModel, config: SaeConfig) -> None:
    d_in = int(lm.embedding().weight.shape[1])
    t = expected_seconds(config, d_in, lm.num_layers, store.measured_rates(run))
    source = "this run's earlier SAEs" if store.measured_rates(run) else "rates measured on a 2-core CPU"
    st.caption(
        f"Expected about **{duration_text(t['total'])}** on {pick_device('auto')} (harvest "
        f"{duration_text(t['harvest'])}, train {duration_text(t['train'])}, evaluate {duration_text(t['evaluate'])}; "
        f"from {source}): {config.total_steps:,} steps of {config.batch_tokens:,} tokens. Stop keeps what it has "
        "done; Resume continues it."
    )


def sae_form(run: Run, lm: LanguageModel, busy: bool) -> None:
    """The form and Start; `busy`: a job trains (Start is off, the job panel says which)."""
    config = sae_settings(lm)
    _expected(run, lm, config)
    pressed = st.button(
        "Start SAE training", type="primary", icon=":material/play_arrow:", disabled=busy, key="sae_start"
    )
    if not pressed:
        return
    if not config.corpus:
        st.error("Give the path of a text file or folder for the corpus, or pick a text data set.")
        return
    try:
        with st.spinner("Checking the settings against the model and the corpus…"):
            config.check(lm)
    except Exception as e:  # noqa: BLE001 - one line under the button; nothing was written
        show_error(e, "These settings cannot work")
        return
    if not sae_job().start(run, config):
        st.warning("An SAE is already training on this server: stop it first, or wait for it to end.")
        return
    st.rerun()
