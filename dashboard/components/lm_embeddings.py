"""The Embeddings page for a generative language model: one layer's representations of a labelled text data set
(SST-2 by default), one point per sentence (its tokens' states pooled) or per token, projected to 2-D and drawn
with the classifier page's map (`embedding_map.map_chart`), coloured by the sentence's label or a token property.

Nothing is computed here: the texts, the representations and the projection are lower-layer calls
(`explainers/language/embeddings`, `explainers/inspection/projection`), run on a leased replica and cached per
(model weights, data set, sentences, layer, mode) in the shared language-model cache, so a rerun or another
session asking the same is instant."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, cast

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.embedding_map import INTERACTIVE_MAX, map_chart, outlying_view, projection_choice
from xaidash.dashboard.components.generate_compute import LMContext, cached, context_of, leased
from xaidash.dashboard.components.params import param_widget
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import LAST_KIND_KEY
from xaidash.data.modalities import modality_of
from xaidash.data.paths import data_root
from xaidash.data.registry import get_source, list_datasets
from xaidash.explainers.inspection.projection import LABELS, PARAMS, Projection, project
from xaidash.explainers.language.embeddings import (
    POOLS,
    TOKEN_PROPERTIES,
    Pool,
    TokenRepresentations,
    labelled_texts,
    layer_names,
    middle_layer,
    sentence_representations,
    token_representations,
)
from xaidash.models.runs.store import Run

Mode = Literal["sentence", "token"]
SPLIT: Literal["test"] = "test"  # SST-2's labelled GLUE dev file
DEFAULT_DATASET = "sst2"
N_DEFAULT, N_MAX = 250, 1000  # sentences: SmolLM2's middle layer reads 250 SST-2 sentences in about 9 s on 1 thread
TOKENS_DEFAULT, TOKENS_MAX = 2000, INTERACTIVE_MAX  # every token a point with its tooltip
TEXT_TIP = 160  # characters of a sentence in a tooltip
CONTEXT_TOKENS = 8  # tokens either side of a token in its tooltip
MODE_LABELS = {"sentence": "Sentences", "token": "Tokens"}
POOL_LABELS = {"mean": "mean of its tokens", "last": "its last token"}
POOL_CAPTIONS = {
    "mean": "the mean of its tokens' states",
    "last": "the state of its last token (the only one that has read the whole sentence)",
}
LABEL = "label"  # the colour that is the sentence's class
# Legend titles of the colourings (TOKEN_PROPERTIES' labels are longer, for the picker).
COLOUR_TITLES = {
    LABEL: "label",
    "kind": "token kind",
    "starts_word": "starts a word",
    "digit": "number",
    "position": "position in the text",
}
POSITION_BINS = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 10**9))  # 1-based, inclusive
KIND_ORDER = ("word start", "word piece", "punctuation", "number", "space")


@dataclass(frozen=True)
class LMChoice:
    """What the controls say."""

    dataset: str
    n: int
    layer: int
    mode: Mode
    pool: Pool
    token_limit: int
    colour: str  # LABEL or a TOKEN_PROPERTIES name
    method: str
    params: tuple[tuple[str, Any], ...]

    @property
    def read_key(self) -> tuple[Any, ...]:
        """What the representations depend on (the colouring and the projection do not)."""
        how = self.pool if self.mode == "sentence" else self.token_limit
        return (self.dataset, self.n, self.layer, self.mode, how)


@dataclass(frozen=True)
class Read:
    """The texts and their representations: (N, D) per sentence, or per token with `tokens`; `seconds` the
    representations took (the model's passes)."""

    texts: tuple[str, ...]
    labels: np.ndarray
    classes: tuple[str, ...]
    features: np.ndarray
    tokens: TokenRepresentations | None
    seconds: float


# ---- choices ---------------------------------------------------------------------------------------------------------
def text_datasets() -> dict[str, bool]:
    """The registered text data sets and whether each is on this machine (a download would be needed otherwise):
    those whose inputs a tokenizer reads, as a language model reads its prompts."""
    root = data_root()
    readable = [i for i in list_datasets() if modality_of(i.modality).tokenized]
    return {i.name: bool(get_source(i.name).is_available(root)) for i in readable}


def default_dataset(available: dict[str, bool]) -> str:
    if available.get(DEFAULT_DATASET):
        return DEFAULT_DATASET
    return next((name for name, ok in available.items() if ok), next(iter(available)))


def _keep_valid(key: str, options: list[Any]) -> None:
    """Forget a widget's value chosen for another run or data set, so the widget takes its default."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


def _sentence_count(dataset: str, column: Any) -> int:
    """The number of sentences, bounded by the split; the page stops with one message when the data set is not
    on this machine."""
    try:
        total = len(services.text_split(dataset, SPLIT))
    except Exception as e:  # the loader says where the files go
        show_error(e, f"The data set {dataset}")
        st.stop()
        raise  # unreachable: st.stop() raises
    most = min(N_MAX, total)
    if st.session_state.get("emb_lm_n", 0) > most:  # chosen for a larger data set
        st.session_state["emb_lm_n"] = most
    return int(
        column.number_input(
            "Sentences",
            min_value=min(10, most),
            max_value=most,
            value=min(N_DEFAULT, most),
            step=50,
            key="emb_lm_n",
            help=f"A seeded sample of the {SPLIT} split's {total:,} sentences (up to {most:,}), read once and cached.",
        )
    )


def _projection_params(method: str, columns: list[Any]) -> tuple[tuple[str, Any], ...]:
    params = {}
    for col, param in zip(columns, PARAMS[method], strict=False):
        with col:
            params[param.name] = param_widget(param, key=f"emb_lm_{method}_{param.name}")
    return tuple(sorted(params.items()))


def controls(ctx: LMContext) -> LMChoice:
    """The data set, sentences, layer, projection; then sentences or tokens, the pooling or the token limit, the
    colouring, and the projection's parameters."""
    available = text_datasets()
    c0, c1, c2, c3 = st.columns([2, 1, 4, 2])
    _keep_valid("emb_lm_dataset", list(available))
    dataset = c0.selectbox(
        "Data set",
        list(available),
        index=list(available).index(default_dataset(available)),
        format_func=lambda d: d if available[d] else f"{d} (not on this machine)",
        key="emb_lm_dataset",
        help="The registered text data sets; their labels colour the sentences.",
    )
    n = _sentence_count(dataset, c1)
    names = layer_names(ctx.lm)
    _keep_valid("emb_lm_layer", list(names))
    layer = c2.select_slider(
        "Layer",
        list(names),
        value=middle_layer(ctx.lm),
        format_func=names.get,
        key="emb_lm_layer",
        help=f"0: the token embeddings; k: the residual stream after k of the {ctx.lm.num_layers} decoder layers "
        "(before the final norm). The middle one by default.",
    )
    method = projection_choice(c3, "emb_lm_method")
    d0, d1, d2, *pcols = st.columns([2, 2, 3] + [1] * max(1, len(PARAMS[method])))
    mode = cast(Mode, d0.radio("Points", list(MODE_LABELS), format_func=MODE_LABELS.get, key="emb_lm_mode"))
    pool: Pool = "mean"
    limit, colour = TOKENS_DEFAULT, LABEL
    if mode == "sentence":
        pool = cast(
            Pool,
            d1.radio(
                "Each sentence is",
                list(POOLS),
                format_func=POOL_LABELS.get,
                key="emb_lm_pool",
                help="In a causal model the last token is the only one that has read the whole sentence.",
            ),
        )
        d2.radio("Colour by", [LABEL], format_func=lambda _: "the sentence's label", key="emb_lm_sentence_colour")
    else:
        limit = int(
            d1.number_input(
                "Tokens",
                min_value=100,
                max_value=TOKENS_MAX,
                value=TOKENS_DEFAULT,
                step=500,
                key="emb_lm_tokens",
                help="The sentences' tokens in order, up to this many (special tokens left out).",
            )
        )
        colour = d2.selectbox(
            "Colour by",
            [*TOKEN_PROPERTIES, LABEL],
            format_func=lambda p: "the sentence's label" if p == LABEL else COLOUR_TITLES.get(p, p),
            key="emb_lm_colour",
            help="token kind: word start, word piece, punctuation, number or space; starts a word, punctuation, "
            "number: yes or no; position in the text: 1, 2, 3–4, 5–8, … (special tokens not counted); the "
            "sentence's label: the data set's class of the sentence the token is in.",
        )
    params = _projection_params(method, pcols)
    return LMChoice(dataset, n, int(layer), mode, pool, limit, colour, method, params)


# ---- computing (cached) ----------------------------------------------------------------------------------------------
def _read(ctx: LMContext, choice: LMChoice) -> Read:
    texts, labels, classes = labelled_texts(choice.dataset, SPLIT, choice.n)
    what = "sentences" if choice.mode == "sentence" else "sentences' tokens"
    bar = st.progress(0.0, text=f"Reading layer {choice.layer} for {len(texts):,} {what}…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Reading layer {choice.layer}: {done:,}/{total:,} sentences")

    try:
        with leased(ctx) as lm:
            start = time.perf_counter()  # the passes only, not the wait for a replica
            if choice.mode == "sentence":
                tokens = None
                features = sentence_representations(lm, texts, choice.layer, choice.pool, progress=progress)
            else:
                tokens = token_representations(lm, texts, choice.layer, choice.token_limit, progress=progress)
                features = tokens.features
            seconds = time.perf_counter() - start
    finally:
        bar.empty()
    return Read(tuple(texts), labels, classes, features, tokens, seconds)


def representations(ctx: LMContext, choice: LMChoice) -> tuple[Read, bool]:
    """The representations and whether they were reused; the page stops with one message on an error."""
    try:
        return cached(("emb_lm_read", ctx.key, *choice.read_key), lambda: _read(ctx, choice))
    except Exception as e:  # one message, the page stops
        show_error(e, "Representations")
        st.stop()
        raise  # unreachable: st.stop() raises


def projection_of(ctx: LMContext, choice: LMChoice, read: Read) -> Projection:
    """The 2-D map (kept in memory only: a reader never writes into the run folder)."""
    try:
        first = " (the first UMAP on this server may compile numba: about 10 s more)" if choice.method == "umap" else ""
        with st.spinner(f"{LABELS[choice.method]} of {len(read.features):,} points{first}…"):
            proj, _ = cached(
                ("emb_lm_proj", ctx.key, *choice.read_key, choice.method, choice.params),
                lambda: project(read.features, choice.method, **dict(choice.params)),
            )
        return proj
    except Exception as e:  # one message, the page stops
        show_error(e, LABELS[choice.method])
        st.stop()
        raise  # unreachable: st.stop() raises


# ---- the map's rows --------------------------------------------------------------------------------------------------
def cut(text: str, most: int = TEXT_TIP) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def joined(tokens: list[str], starts: np.ndarray) -> str:
    """Tokens back into text: a byte-level BPE token carries its own space; a word-level one (no spaces) gets one
    before each word start."""
    out = ""
    for i, (token, start) in enumerate(zip(tokens, starts, strict=True)):
        gap = i > 0 and bool(start) and not token[:1].isspace() and not out[-1:].isspace()
        out += (" " if gap else "") + token
    return out


def token_contexts(tokens: TokenRepresentations, window: int = CONTEXT_TOKENS) -> list[str]:
    """Each token in its sentence, marked [like this], with up to `window` tokens either side."""
    starts = tokens.properties["starts_word"]
    out = []
    for row in range(len(tokens)):
        first = row - int(tokens.position[row])  # the text's first row: rows hold texts one after the other
        lo, hi = max(first, row - window), row + 1
        while hi < len(tokens) and hi <= row + window and tokens.text_index[hi] == tokens.text_index[row]:
            hi += 1
        token = tokens.token[row]
        lead = token[: len(token) - len(token.lstrip())]
        before = joined(tokens.token[lo : row + 1], starts[lo : row + 1])
        before = before[: len(before) - len(token)]
        after = joined(tokens.token[row:hi], starts[row:hi])[len(token) :]
        text = f"{'…' if lo > first else ''}{before}{lead}[{token.strip()}]{after}{'…' if hi < len(tokens) else ''}"
        out.append(text.strip())
    return out


def colour_values(name: str, tokens: TokenRepresentations) -> tuple[list[str], list[str]]:
    """A token property as the legend's values, and their order: positions in bins of doubling width, booleans
    as yes / no, kinds as they are."""
    values = tokens.properties[name]
    if name == "position":
        names = [f"{a}" if a == b else (f"{a}+" if b > 10**8 else f"{a}–{b}") for a, b in POSITION_BINS]
        bins = np.searchsorted([b for _, b in POSITION_BINS], np.asarray(values) + 1)
        shown = [names[i] for i in bins]
        return shown, [n for n in names if n in set(shown)]
    if np.asarray(values).dtype == bool:
        return ["yes" if v else "no" for v in values], ["yes", "no"]
    shown = [str(v) for v in values]
    present = set(shown)
    return shown, [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))


def map_rows(read: Read, proj: Projection, colour: str) -> tuple[pd.DataFrame, list[str], list[str | alt.Tooltip]]:
    """One row per point (x, y, point, the colour column, the tooltips' columns), the legend's order, the tooltips."""
    title = COLOUR_TITLES.get(colour, colour)
    frame = pd.DataFrame({"x": proj.coords[:, 0], "y": proj.coords[:, 1], "point": np.arange(len(proj.coords))})
    tokens = read.tokens
    if tokens is None:
        frame[LABEL] = [read.classes[int(i)] for i in read.labels]
        frame["sentence"] = [cut(t) for t in read.texts]
        tips: list[str | alt.Tooltip] = ["sentence:N", f"{LABEL}:N"]
        return frame, list(read.classes), tips
    frame["token"] = [repr(t) for t in tokens.token]
    frame["in its sentence"] = token_contexts(tokens)
    frame["position"] = tokens.position + 1
    frame[LABEL] = [read.classes[int(i)] for i in tokens.per_token(read.labels)]
    order = list(read.classes)
    if colour != LABEL:
        frame[title], order = colour_values(colour, tokens)
    tips = ["token:N", "in its sentence:N", "position:Q", f"{LABEL}:N"]
    if colour not in (LABEL, "position"):  # both are in the tooltip already
        tips.insert(1, f"{title}:N")
    return frame, order, tips


# ---- the page --------------------------------------------------------------------------------------------------------
def layer_text(lm_layers: int, layer: int) -> str:
    if layer == 0:
        return "layer 0 (the token embeddings, before any decoder layer)"
    return f"layer {layer} of {lm_layers} (the residual stream after {layer} decoder layers, before the final norm)"


def caption(ctx: LMContext, choice: LMChoice, read: Read, reused: bool, proj: Projection) -> str:
    """One line: what a point is, the layer and the pooling, and how long the representations and the map took."""
    layer = layer_text(ctx.lm.num_layers, choice.layer)
    dims = read.features.shape[1]
    if read.tokens is None:
        what = (
            f"Each point is one of {len(read.texts):,} {choice.dataset} {SPLIT} sentences: "
            f"{POOL_CAPTIONS[choice.pool]} at {layer}"
        )
    else:
        texts = len(set(read.tokens.text_index.tolist()))
        what = (
            f"Each point is one token: {len(read.tokens):,} tokens of the first {texts:,} of {len(read.texts):,} "
            f"{choice.dataset} {SPLIT} sentences (special tokens left out), their states at {layer}"
        )
    took = f"computed in {read.seconds:.1f} s" + (" (reused now)" if reused else "")
    mapped = "read from cache" if proj.from_cache else f"computed in {proj.seconds:.1f} s"
    return f"{what}; {dims:,} features. Representations {took}; {LABELS[choice.method]} {mapped}."


def far_points_note(frame: pd.DataFrame, outside: np.ndarray, most: int = 4) -> str:
    """Which points the first view leaves out, farthest first (a token with its sentence, or a sentence)."""
    xy = frame[["x", "y"]].to_numpy(float)
    centre, spread = np.median(xy, axis=0), np.maximum(np.subtract(*np.percentile(xy, [75, 25], axis=0)), 1e-12)
    rows = np.flatnonzero(outside)
    rows = rows[np.argsort(-np.abs((xy[rows] - centre) / spread).max(axis=1))]
    named = [
        f"{frame['token'][r]} in “{cut(frame['in its sentence'][r], 60)}”"
        if "token" in frame
        else f"“{cut(frame['sentence'][r], 60)}”"
        for r in rows[:most]
    ]
    more = f" and {len(rows) - most:,} more" if len(rows) > most else ""
    return (
        f"{len(rows):,} of the {len(frame):,} points lie far from the rest (beyond 3 interquartile ranges) and are left "
        f"out of the first view, which would otherwise squeeze the others into a corner; scroll out to see them: "
        + "; ".join(named)
        + more
        + "."
    )


def show_picked(event: Any, read: Read, frame: pd.DataFrame) -> None:
    """The clicked point's whole sentence (and its token)."""
    picked = (event.selection.get("pick") or []) if event and event.selection else []
    if not (picked and 0 <= int(picked[0].get("point", -1)) < len(frame)):
        return
    row = int(picked[0]["point"])
    tokens = read.tokens
    if tokens is None:
        st.markdown(f"**{frame[LABEL][row]}** · {read.texts[row]}")
        return
    text = int(tokens.text_index[row])
    st.markdown(
        f"Token **{frame['token'][row]}** (position {int(tokens.position[row]) + 1}) · "
        f"sentence labelled **{read.classes[int(read.labels[text])]}**: {read.texts[text]}"
    )


def require_language_model(run: Run) -> LMContext:
    st.session_state[LAST_KIND_KEY] = "language"  # the Attention page follows the kind worked with last
    try:
        with st.spinner("Loading the model…"):
            return context_of(run)
    except Exception as e:  # shown with its cause; the app keeps running
        show_error(e, f"Could not load run {run.id}")
        st.stop()
        raise  # unreachable: st.stop() raises


def language_embeddings(run: Run) -> None:
    """The page for a language model run."""
    st.title("Embeddings")
    st.caption(
        "How the language model arranges a text data set inside: one layer's representations of each sentence "
        "(or of each token) projected to two dimensions. Sentences or tokens the model finds similar land close "
        "together."
    )
    ctx = require_language_model(run)
    choice = controls(ctx)
    read, reused = representations(ctx, choice)
    proj = projection_of(ctx, choice, read)
    frame, order, tips = map_rows(read, proj, choice.colour)
    colour = COLOUR_TITLES.get(choice.colour, choice.colour)
    points = "sentences" if read.tokens is None else "tokens"
    title = f"{LABELS[choice.method]} of {layer_names(ctx.lm)[choice.layer]} · {len(frame):,} {points}"
    view, outside = outlying_view(frame)
    event = st.altair_chart(
        map_chart(frame, colour, title, proj.axis_labels(), tooltips=tips, domain=order, view=view),
        on_select="rerun",
        selection_mode="pick",
        key=f"emb_lm_chart_{choice.mode}_{choice.layer}_{choice.n}_{choice.method}",
    )
    if proj.note:
        st.caption(f":warning: {proj.note}")
    st.caption(caption(ctx, choice, read, reused, proj))
    if view is not None:
        st.caption(far_points_note(frame, outside))
    st.caption("Hover a point for its text, drag to pan, scroll to zoom, click for the whole sentence.")
    show_picked(event, read, frame)
