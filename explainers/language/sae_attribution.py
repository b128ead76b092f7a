"""Which sparse-autoencoder features drove a generated token: for a prompt, the explained target (a generated
token's log-probability, a span's summed, or log p(target) - log p(contrast), read as `PromptQuery` reads it) and an
SAE at (layer, site), each feature's activation x the gradient of the target with respect to it, summed over the
positions read, with the parts the SAE does not explain attributed too.

The site's activation x at every position splits exactly into the SAE's parts: x = sum_i f_i d_i + b + e, where f_i
is feature i's activation, d_i its decoder direction (what `sae.decode` adds per unit of f_i), b the decoder's bias
(`sae.decode` of no features) and e = x - decode(encode(x)) the error term (what the SAE misses). With g the
gradient of the target at the site, gradient x activation x.g is then sum_i f_i (d_i.g) + b.g + e.g: each feature's
attribution, the bias term and the error term add up to the site's total, position by position. `gap` measures how
far the parts are from x.g (a few float32 roundings for a plain SAE; more where `decode` is not affine, as with an
SAE that normalises its input).

One forward and one backward pass: the site's output is replaced by decode(f) + e with f and e leaves of the graph
(the same values, so the model computes what it did), and autograd gives the gradient with respect to every
feature's activation through SAELens's own `decode` and, through e, the gradient at the site itself. This splicing
(the attribution patching of Marks et al., "Sparse feature circuits", 2024) is written here: SAELens attaches SAEs
to TransformerLens models only, not to the transformers model xaidash loads.

Positions counted: the user's own prompt tokens (the query's features) and every position that reads the answer
(the last prompt position, which predicts its first token, and the answer's tokens). The chat template's and special
tokens are left out unless the query counts them as features too (`include_template`), as for the token
attributions. Counted, they top every list while saying nothing about this answer: on SmolLM2 with an SAE at layer 6,
the first token (the attention sink) had feature activations above 100 where the user's tokens had under 35, and its
features filled the top of the list for any target. Every position's terms are kept in the result.

Like any gradient x activation, a feature's attribution is the first-order change of the target if the feature were
switched off at every position: large features and saturated softmaxes make the real change differ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from xaidash.explainers.language.methods.gradients import sequence_ids
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.scoring import explained, step_log_probs
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sites import check_layer, d_model, editing, site_of

DEFAULT_TOP = 20


class SparseAutoencoder(Protocol):
    """What is used of a SAELens SAE (`sae_lens.SAE` and its subclasses)."""

    W_dec: torch.Tensor

    def encode(self, x: torch.Tensor) -> torch.Tensor: ...

    def decode(self, feature_acts: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class FeatureAttribution:
    """Attribution of a query's explained output to an SAE's features at (layer, site).

    tokens: the T positions read (the prompt, then the answer up to the explained step), `prompt_length` of them the
    prompt's; counted: (T,) the positions summed (see the module docstring); output: the explained output's value;
    attribution: (width,) each feature's activation x gradient summed over the counted positions; max_activation:
    (width,) its largest activation over them, at `argmax_position`;
    top: the `top` features with the largest |attribution|, largest first; top_attribution / top_activation: (T,
    len(top)) their values per position; error, bias, total: (T,) the error term's and the decoder bias's
    attribution and the site's gradient x activation per position (the totals sum the counted ones); error_share:
    (T,) |e| / |x| per position (the part of the activation the SAE misses); gap: |features + bias + error - total|
    over the counted positions."""

    layer: int
    site: str
    width: int
    tokens: tuple[str, ...]
    prompt_length: int
    counted: np.ndarray
    output: float
    attribution: np.ndarray
    max_activation: np.ndarray
    argmax_position: np.ndarray
    top: tuple[int, ...]
    top_attribution: np.ndarray
    top_activation: np.ndarray
    error: np.ndarray
    bias: np.ndarray
    total: np.ndarray
    error_share: np.ndarray

    @property
    def features_total(self) -> float:
        return float(self.attribution.sum())

    @property
    def error_total(self) -> float:
        return float(self.error[self.counted].sum())

    @property
    def bias_total(self) -> float:
        return float(self.bias[self.counted].sum())

    @property
    def site_total(self) -> float:
        return float(self.total[self.counted].sum())

    @property
    def gap(self) -> float:
        return abs(self.features_total + self.error_total + self.bias_total - self.site_total)

    @property
    def active(self) -> int:
        """Features active at one counted position or more."""
        return int((self.max_activation > 0).sum())

    def rest_total(self) -> float:
        """The attribution of the features outside `top`, summed."""
        return self.features_total - float(self.attribution[list(self.top)].sum())


def _width(sae: SparseAutoencoder) -> int:
    return int(sae.W_dec.shape[0])


def check_sae(lm: LanguageModel, sae: SparseAutoencoder, layer: int, site: str) -> None:
    """ExplainError (or the sites' ModelError) when the SAE cannot read this model's (layer, site)."""
    check_layer(lm, layer)
    site_of(site)
    d_in, width = int(sae.W_dec.shape[1]), _width(sae)
    if d_in != d_model(lm):
        raise ExplainError(
            f"The SAE reads {d_in}-wide activations but {lm.name}'s are {d_model(lm)} wide: it was trained on "
            "another model."
        )
    if width < 1:
        raise ExplainError("The SAE has no features.")


@dataclass
class _Spliced:
    """What the splice saw at the site: x (T, d), the features f (T, width) and error e (T, d) as graph leaves."""

    x: torch.Tensor | None = None
    features: torch.Tensor | None = None
    error: torch.Tensor | None = None


def _splice(sae: SparseAutoencoder, seen: _Spliced) -> Any:
    """The site's edit: x -> decode(f) + e with f = encode(x) and e = x - decode(f), f and e leaves (the value x is
    kept, up to rounding)."""

    def edit(out: torch.Tensor) -> torch.Tensor:
        x = out.detach()
        sae_x = x.to(sae.W_dec.dtype)
        f = sae.encode(sae_x).detach().requires_grad_()
        recon = sae.decode(f)
        e = (sae_x - recon).detach().requires_grad_()
        seen.x, seen.features, seen.error = sae_x[0], f, e
        return (recon + e).to(out.dtype)

    return edit


def _gradients(
    lm: LanguageModel, query: PromptQuery, sae: SparseAutoencoder, layer: int, site: str
) -> tuple[float, _Spliced, torch.Tensor, torch.Tensor]:
    """(explained output, what the splice saw, d output / d f (T, width), d output / d site (T, d))."""
    seen = _Spliced()
    ids = sequence_ids(lm, query)
    with torch.enable_grad(), editing(lm, layer, site, _splice(sae, seen)):
        out = lm.model(input_ids=ids, use_cache=False, logits_to_keep=query.n_steps)
        value = explained(query, step_log_probs(query, out.logits))[0]
        assert seen.features is not None and seen.error is not None, "the site was not reached"
        grad_f, grad_site = torch.autograd.grad(value, [seen.features, seen.error])
    return float(value.detach()), seen, grad_f[0], grad_site[0]


def counted_positions(query: PromptQuery) -> list[int]:
    """The positions summed: the query's feature positions and those that read the answer (module docstring)."""
    length = len(query.prompt.ids)
    users = {p for group in query.features for p in group}
    return sorted(users | set(range(length - 1, length + query.n_steps - 1)))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def sae_attribution(
    lm: LanguageModel, query: PromptQuery, sae: SparseAutoencoder, layer: int, site: str, top: int = DEFAULT_TOP
) -> FeatureAttribution:
    """Each feature's activation x gradient of the query's explained output, the error and bias terms, and the site's
    gradient x activation they add up to (see the module docstring). The SAE must be on the model's device."""
    check_sae(lm, sae, layer, site)
    value, seen, grad_f, g = _gradients(lm, query, sae, layer, site)
    assert seen.x is not None and seen.features is not None and seen.error is not None
    f = seen.features.detach()[0]
    counted = torch.zeros(len(f), dtype=torch.bool, device=f.device)
    counted[counted_positions(query)] = True
    with torch.no_grad():
        bias = sae.decode(torch.zeros(1, _width(sae), dtype=f.dtype, device=f.device))[0]
        per_position = f * grad_f  # (T, width)
        attribution = per_position[counted].double().sum(0)
        order = torch.argsort(attribution.abs(), descending=True, stable=True)[: max(0, min(top, _width(sae)))]
        order = order[attribution[order] != 0]  # an inactive feature has no attribution to show
        max_act, where = f[counted].max(dim=0)
        argmax = counted.nonzero()[:, 0][where]
        x, e = seen.x, seen.error.detach()[0]
        share = e.norm(dim=-1) / x.norm(dim=-1).clamp_min(torch.finfo(x.dtype).tiny)
        ids = list(query.prompt.ids) + list(query.target_ids[:-1])
        return FeatureAttribution(
            layer=layer,
            site=site,
            width=_width(sae),
            tokens=tuple(lm.token_text(ids)),
            prompt_length=len(query.prompt.ids),
            counted=counted.cpu().numpy(),
            output=value,
            attribution=_np(attribution),
            max_activation=_np(max_act),
            argmax_position=argmax.cpu().numpy(),
            top=tuple(int(i) for i in order.tolist()),
            top_attribution=_np(per_position[:, order]),
            top_activation=_np(f[:, order]),
            error=_np((e * g).sum(-1)),
            bias=_np((bias * g).sum(-1)),
            total=_np((x * g).sum(-1)),
            error_share=_np(share),
        )
