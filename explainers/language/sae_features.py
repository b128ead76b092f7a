"""The feature index of a trained SAE: what each feature fires on, built once from the harvested activations and
kept beside the SAE (`<sae folder>/features.safetensors`).

For every feature: its top-N activating tokens (flat indices into the SAE's corpus and their values) with the
feature's activation on a window of tokens around each, a histogram of its non-zero activations (bins from 0 to
its largest activation), its density (the fraction of harvested tokens where it fires) and its mean activation
when firing. Two streaming passes over the chunks (the top values, then the histograms and windows), so memory
is bounded by the SAE's width whatever the corpus size. Written by hand: SAELens's feature dashboards
(sae-dashboard) need a TransformerLens model and a network, neither of which the loaded SmolLM2 has here.

On demand, without the index: logit effects (the decoder row through the final norm's weight and the
unembedding: the tokens a feature promotes and suppresses), decoder-cosine neighbours, and search by text (the
features that fire most on a text's tokens, through the language model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from xaidash.data.atomic import atomic_write
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae.store import (
    WEIGHTS,
    LoadedSae,
    activation_chunks,
    chunk_files,
    corpus_tokens,
    load_sae,
    sae_folder,
)
from xaidash.models.language.sites import reading
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run

INDEX = "features.safetensors"
VERSION = 1
TOP_N = 20
BINS = 40
BEFORE = 12  # tokens shown before an activating token
AFTER = 4  # and after it
ROWS = 2048  # activations encoded at once: (ROWS, width) floats in memory


@dataclass(frozen=True)
class FeatureIndex:
    """The index of one SAE. `top_values`/`top_index`: (width, N), largest first, index -1 where a feature fired on
    fewer than N tokens; `windows`: (width, N, BEFORE + 1 + AFTER) the feature's activation on the tokens around
    each top token (NaN where there is no harvested token: outside the context, or a token harvesting left out);
    `hist`: (width, BINS) counts of non-zero activations in equal bins from 0 to `max_value`;
    `density`: (width,) fraction of tokens with a non-zero activation; `mean_active`: (width,) mean activation
    where non-zero; `tokens`: the number of harvested tokens read."""

    top_values: torch.Tensor
    top_index: torch.Tensor
    windows: torch.Tensor
    hist: torch.Tensor
    max_value: torch.Tensor
    density: torch.Tensor
    mean_active: torch.Tensor
    tokens: int

    @property
    def width(self) -> int:
        return int(self.top_values.shape[0])

    def hist_edges(self, feature: int) -> torch.Tensor:
        return torch.linspace(0.0, float(self.max_value[feature]), BINS + 1)


def _chunks(run: Run | Path, sae_id: str) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Every harvested activation, both splits (the held-out tokens are contexts too)."""
    folder = sae_folder(run, sae_id)
    for split in ("train", "heldout"):
        if chunk_files(folder, split):
            yield from activation_chunks(run, sae_id, split)


def _encoded(sae: Any, run: Run | Path, sae_id: str) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(feature activations (n, width), flat indices (n,)) in slices of ROWS."""
    with torch.no_grad():
        for acts, index in _chunks(run, sae_id):
            for s in range(0, len(index), ROWS):
                yield sae.encode(acts[s : s + ROWS]).float(), index[s : s + ROWS]


def _first_pass(
    sae: Any, run: Run | Path, sae_id: str, width: int, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Top-N values and indices per feature, firing counts, sums and maxima."""
    top_v = torch.full((width, n), -torch.inf)
    top_i = torch.full((width, n), -1, dtype=torch.int64)
    fires = torch.zeros(width, dtype=torch.int64)
    sums = torch.zeros(width, dtype=torch.float64)
    tokens = 0
    for f, index in _encoded(sae, run, sae_id):
        tokens += len(index)
        active = f > 0
        fires += active.sum(0)
        sums += f.sum(0, dtype=torch.float64)
        k = min(n, len(index))
        v, rows = f.T.topk(k, dim=1)
        merged_v = torch.cat([top_v, v], 1)
        merged_i = torch.cat([top_i, index[rows]], 1)
        top_v, order = merged_v.topk(n, dim=1)
        top_i = merged_i.gather(1, order)
    if tokens == 0:
        raise ModelError(f"SAE {sae_id} has no harvested activations to index.")
    dead = top_v <= 0  # a feature that fired on fewer than N tokens: the rest are no contexts
    top_v = top_v.masked_fill(dead, 0.0)
    top_i = top_i.masked_fill(dead, -1)
    return top_v, top_i, fires, sums, tokens


def _window_targets(top_i: torch.Tensor, context: int) -> torch.Tensor:
    """(width, N, W) flat indices of the window around each top token, -1 outside its context."""
    offsets = torch.arange(-BEFORE, AFTER + 1)
    pos = (top_i % context).unsqueeze(-1) + offsets
    flat = top_i.unsqueeze(-1) + offsets
    ok = (top_i.unsqueeze(-1) >= 0) & (pos >= 0) & (pos < context)
    return torch.where(ok, flat, torch.full_like(flat, -1))


def _second_pass(
    sae: Any, run: Run | Path, sae_id: str, top_i: torch.Tensor, max_value: torch.Tensor, context: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Histograms of the non-zero activations (equal bins from 0 to each feature's maximum, the last bin closed as
    numpy's) and the top tokens' windows."""
    width = top_i.shape[0]
    hist = torch.zeros(width, BINS, dtype=torch.int64)
    targets = _window_targets(top_i, context)
    windows = torch.full(targets.shape, torch.nan)
    flat_t, flat_w = targets.reshape(-1), windows.view(-1)
    feat_t = torch.arange(width).view(-1, 1, 1).expand_as(targets).reshape(-1)
    want = flat_t >= 0
    t_idx, t_feat, t_pos = flat_t[want], feat_t[want], want.nonzero().squeeze(1)
    peak = max_value.double()  # float64 bins as numpy.histogram computes them
    scale = torch.where(peak > 0, BINS / peak.clamp_min(1e-30), torch.zeros_like(peak))
    for f, index in _encoded(sae, run, sae_id):
        rows, cols = (f > 0).nonzero(as_tuple=True)
        vals = f[rows, cols]
        bins = (vals.double() * scale[cols]).long().clamp(0, BINS - 1)
        hist.view(-1).index_add_(0, cols * BINS + bins, torch.ones_like(bins))
        order = index.argsort()
        sorted_index = index[order]
        at = torch.searchsorted(sorted_index, t_idx).clamp(max=len(index) - 1)
        hit = sorted_index[at] == t_idx
        flat_w[t_pos[hit]] = f[order[at[hit]], t_feat[hit]]
    return hist, windows


def _fingerprint(run: Run | Path, sae_id: str) -> str:
    folder = sae_folder(run, sae_id)
    parts = [
        WEIGHTS,
        *(str(p.relative_to(folder)) for p in chunk_files(folder, "train") + chunk_files(folder, "heldout")),
    ]
    stats = []
    for name in parts:
        st = (folder / name).stat()
        stats.append([name, st.st_size, st.st_mtime_ns])
    return json.dumps({"version": VERSION, "top": TOP_N, "bins": BINS, "files": stats})


def build_index(run: Run | Path, sae_id: str, loaded: LoadedSae | None = None) -> FeatureIndex:
    """The feature index from the harvested activations (two passes over the chunks)."""
    loaded = loaded or load_sae(run, sae_id)
    tokens_t, _ = corpus_tokens(run, sae_id)
    context = int(tokens_t.shape[1])
    top_v, top_i, fires, sums, tokens = _first_pass(loaded.sae, run, sae_id, loaded.width, TOP_N)
    max_value = top_v[:, 0].clone()
    hist, windows = _second_pass(loaded.sae, run, sae_id, top_i, max_value, context)
    mean_active = torch.where(fires > 0, sums / fires.clamp_min(1), torch.zeros_like(sums)).float()
    return FeatureIndex(
        top_values=top_v,
        top_index=top_i,
        windows=windows,
        hist=hist,
        max_value=max_value,
        density=fires.double().div(tokens).float(),
        mean_active=mean_active,
        tokens=tokens,
    )


_FIELDS = ("top_values", "top_index", "windows", "hist", "max_value", "density", "mean_active")


def feature_index(run: Run | Path, sae_id: str, loaded: LoadedSae | None = None) -> FeatureIndex:
    """The SAE's feature index, read from its folder, or built and kept there when missing or older than the
    SAE's weights or activations."""
    path = sae_folder(run, sae_id) / INDEX
    fingerprint = _fingerprint(run, sae_id)
    if path.is_file():
        from safetensors import safe_open

        with safe_open(str(path), "pt") as fh:
            meta = fh.metadata() or {}
        if meta.get("fingerprint") == fingerprint:
            data = load_file(str(path))
            return FeatureIndex(**{k: data[k] for k in _FIELDS}, tokens=int(meta["tokens"]))
    index = build_index(run, sae_id, loaded)
    tensors = {k: getattr(index, k).contiguous() for k in _FIELDS}
    meta = {"fingerprint": fingerprint, "tokens": str(index.tokens)}
    atomic_write(path, lambda p: save_file(tensors, str(p), metadata=meta))
    return index


# ---- on demand: what a feature writes, its neighbours, search ---------------------------------------------------


def _check_feature(loaded: LoadedSae, feature: int) -> int:
    if isinstance(feature, bool) or not isinstance(feature, int) or not 0 <= feature < loaded.width:
        raise ModelError(f"Feature {feature!r} is out of range: SAE {loaded.id} has features 0 to {loaded.width - 1}.")
    return feature


def logit_effects(
    lm: LanguageModel, loaded: LoadedSae, feature: int, k: int = 10
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(promoted, suppressed): the k tokens whose logits the feature raises most and lowers most, with the
    change per unit of activation."""
    _check_feature(loaded, feature)
    norm_w = getattr(lm.final_norm(), "weight", None)
    row = loaded.sae.W_dec[feature].detach().float().cpu()
    if norm_w is not None:
        row = row * norm_w.detach().float().cpu()
    effect = lm.unembedding().weight.detach().float().cpu() @ row
    up = effect.topk(k)
    down = (-effect).topk(k)
    return (
        [(int(i), float(v)) for v, i in zip(up.values, up.indices, strict=True)],
        [(int(i), -float(v)) for v, i in zip(down.values, down.indices, strict=True)],
    )


def neighbours(loaded: LoadedSae, feature: int, k: int = 10) -> list[tuple[int, float]]:
    """The k features whose decoder rows point most nearly the same way (cosine), itself left out."""
    _check_feature(loaded, feature)
    w = torch.nn.functional.normalize(loaded.sae.W_dec.detach().float().cpu(), dim=1)
    cos = w @ w[feature]
    cos[feature] = -torch.inf
    top = cos.topk(min(k, loaded.width - 1))
    return [(int(i), float(v)) for v, i in zip(top.values, top.indices, strict=True)]


def features_on_token(
    index: FeatureIndex, tokens: torch.Tensor, token_id: int, k: int = 10
) -> list[tuple[int, int, float]]:
    """The features whose top activating tokens are most often `token_id`: (feature, how many of its top-N, its
    largest activation there), most first."""
    flat = tokens.reshape(-1)
    valid = index.top_index >= 0
    ids = torch.where(valid, flat[index.top_index.clamp_min(0)], torch.full_like(index.top_index, -1))
    on = ids == token_id
    count = on.sum(1)
    best = torch.where(on, index.top_values, torch.zeros_like(index.top_values)).amax(1)
    order = sorted(range(index.width), key=lambda f: (-int(count[f]), -float(best[f])))
    return [(f, int(count[f]), float(best[f])) for f in order[:k] if count[f] > 0]


@dataclass(frozen=True)
class TextSearch:
    """The SAE's features on a text: `token_ids`, `acts` (T, width) each token's feature activations, `top`
    [(feature, largest activation over the text, at which token position)], largest first."""

    token_ids: list[int]
    acts: torch.Tensor
    top: list[tuple[int, float, int]]


LEAD_IN = "\n"  # read before a searched text: its first token is then not the first of a document


def search_text(lm: LanguageModel, loaded: LoadedSae, text: str, k: int = 10) -> TextSearch:
    """The features that fire most on `text`'s tokens (the site read at the SAE's layer, encoded). The text is
    read after one sink token (the tokenizer's BOS, else its EOS), which harvesting leaves out (the attention
    sink's activations are orders of magnitude off), and a line break: a word right after the sink fires the
    features of a document's first token (in a corpus of short texts, some of the strongest), which are about
    where the word is, not what it is. Neither is part of the result."""
    if not text.strip():
        raise ModelError("Type a text to search for the features that fire on it.")
    tok = lm.tokenizer
    sink = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    lead = [int(sink)] if sink is not None else []
    lead += tok(LEAD_IN, add_special_tokens=False)["input_ids"]
    text_ids = tok(text, add_special_tokens=False)["input_ids"][: max(1, lm.context - len(lead))]
    ids = torch.tensor([[*lead, *text_ids]])
    with torch.no_grad(), reading(lm, loaded.layer, loaded.site) as seen:
        lm.model(input_ids=ids.to(lm.device), use_cache=False)
        site = seen[0][0, len(lead) :]
        acts = loaded.sae.encode(site.float().to(loaded.sae.W_dec.device)).float().cpu()
    best, at = acts.max(0)
    order = best.argsort(descending=True)[:k]
    top = [(int(f), float(best[f]), int(at[f])) for f in order if best[f] > 0]
    return TextSearch(token_ids=[int(i) for i in text_ids], acts=acts, top=top)


def at_start_share(index: FeatureIndex, tokens: torch.Tensor, feature: int, starts: set[int]) -> tuple[int, int]:
    """(how many of the feature's top tokens come right after a document start, of how many): a token after one
    of `starts` (the BOS or EOS ids that begin and separate the corpus's texts) or at the first harvested
    position. A feature whose top tokens all do marks where a text begins, whatever its word."""
    context = tokens.shape[1]
    n = after = 0
    for slot in range(index.top_index.shape[1]):
        flat = int(index.top_index[feature, slot])
        if flat < 0:
            continue
        c, pos = divmod(flat, context)
        n += 1
        after += int(pos <= 1 or int(tokens[c, pos - 1]) in starts)
    return after, n


def context_of(
    index: FeatureIndex, tokens: torch.Tensor, feature: int, slot: int
) -> tuple[list[int], list[float], int]:
    """One top context of a feature: the window's token ids, the feature's activation on each (NaN where not
    harvested) and the position of the top token in the window."""
    flat_index = int(index.top_index[feature, slot])
    if flat_index < 0:
        return [], [], -1
    context = tokens.shape[1]
    c, pos = divmod(flat_index, context)
    lo, hi = max(0, pos - BEFORE), min(context, pos + AFTER + 1)
    ids = [int(t) for t in tokens[c, lo:hi]]
    vals = index.windows[feature, slot, lo - (pos - BEFORE) : lo - (pos - BEFORE) + len(ids)].tolist()
    return ids, vals, pos - lo


def index_path(run: Run | Path, sae_id: str) -> Path:
    return sae_folder(run, sae_id) / INDEX
