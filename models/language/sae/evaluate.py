"""An SAE judged on held-out tokens, as SAELens reports it (sae_lens/evals.py):

- explained variance against the mean (SAELens's ExplainedVarianceCalculator: 1 - E|x - x_hat|^2 / Var(x), the
  definition since its fix of that metric), the mean squared error, L0 (active features per token);
- dead features (never active on the held-out tokens) and dense ones (active on more than DENSE of them);
- the language model's next-token cross-entropy clean, with the site replaced by the SAE's reconstruction, and
  with the site zero-ablated; loss recovered = (zero - sae) / (zero - clean) (SAELens's ce_loss_score).

SAELens computes the losses through a HookedTransformer, which cannot wrap the loaded SmolLM2 offline: here the
site is replaced through models.language.sites.editing. As in training, position 0 and the special tokens (attention
sinks, harvest.harvested_positions) keep their activation; the losses are over the predictions from position 1 on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae import store
from xaidash.models.language.sae.harvest import harvested_positions, special_ids
from xaidash.models.language.sae.lens import sae_lens
from xaidash.models.language.sites import editing
from xaidash.models.runs.store import Run

DENSE = 0.1  # a feature active on more than a tenth of the tokens is dense
EVAL_BATCH_TOKENS = 2048


@torch.no_grad()
def activation_metrics(sae: Any, chunks: Any) -> dict[str, Any]:
    """Explained variance, MSE, L0 and feature densities of `sae` over (activations, index) chunks."""
    ev = sae_lens("evals").ExplainedVarianceCalculator()
    device = sae.W_dec.device
    fires = torch.zeros(sae.W_dec.shape[0], dtype=torch.float64)
    sq_err = 0.0
    active = 0.0
    n = 0
    for acts, _ in chunks:
        for part in acts.split(EVAL_BATCH_TOKENS):
            x = part.to(device)
            f = sae.encode(x)
            recon = sae.decode(f)
            ev.add_batch(recon, x)
            on = (f != 0).to(torch.float64)
            fires += on.sum(0).cpu()
            active += float(on.sum())
            sq_err += float((recon - x).pow(2).sum())
            n += x.shape[0]
    density = fires / max(n, 1)
    return {
        "explained_variance": float(ev.compute()),
        "mse": sq_err / max(n, 1) / float(sae.W_dec.shape[1]),
        "l0": active / max(n, 1),
        "dead": int((fires == 0).sum()),
        "dense": int((density > DENSE).sum()),
        "heldout_tokens": n,
    }


def next_token_loss(lm: LanguageModel, ids: torch.Tensor) -> tuple[float, int]:
    """Summed cross-entropy of the predictions from positions 1 on (of tokens 2 on), and their count."""
    logits = lm.model(input_ids=ids.to(lm.device), use_cache=False).logits[:, 1:-1].float()
    target = ids[:, 2:].to(logits.device)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum")
    return float(loss), int(target.numel())


@torch.no_grad()
def loss_metrics(lm: LanguageModel, sae: Any, layer: int, site: str, contexts: torch.Tensor) -> dict[str, float]:
    """Cross-entropy clean, with (layer, site) replaced by the SAE's reconstruction, and zero-ablated; the loss
    recovered. The positions harvesting leaves out (0 and the special tokens) keep their activation in all three."""

    special = special_ids(lm.tokenizer)
    per = max(1, EVAL_BATCH_TOKENS // contexts.shape[1])
    totals = {"clean": 0.0, "sae": 0.0, "zero": 0.0}
    count = 0
    for batch in contexts.split(per):
        keep = harvested_positions(batch, special).to(lm.device)[..., None]

        def reconstructed(out: torch.Tensor, keep: torch.Tensor = keep) -> torch.Tensor:
            return torch.where(keep, sae.decode(sae.encode(out.float())).to(out.dtype), out)

        def zeroed(out: torch.Tensor, keep: torch.Tensor = keep) -> torch.Tensor:
            return torch.where(keep, torch.zeros_like(out), out)

        loss, n = next_token_loss(lm, batch)
        totals["clean"] += loss
        count += n
        for name, edit in (("sae", reconstructed), ("zero", zeroed)):
            with editing(lm, layer, site, edit):
                totals[name] += next_token_loss(lm, batch)[0]
    clean, with_sae, zero = (totals[k] / max(count, 1) for k in ("clean", "sae", "zero"))
    gap = zero - clean
    return {
        "ce_loss_clean": clean,
        "ce_loss_with_sae": with_sae,
        "ce_loss_zero_ablated": zero,
        "loss_recovered": (zero - with_sae) / gap if gap != 0 else float("nan"),
    }


def evaluate_folder(lm: LanguageModel, run: Run | Path, sae_id: str, device: str | None = None) -> dict[str, Any]:
    """The held-out metrics of a trained SAE of `run` (its held-out chunks and contexts)."""
    loaded = store.load_sae(run, sae_id, device=device or str(lm.device))
    metrics = activation_metrics(loaded.sae, store.activation_chunks(run, sae_id, "heldout"))
    tokens, heldout = store.corpus_tokens(run, sae_id)
    metrics.update(loss_metrics(lm, loaded.sae, loaded.layer, loaded.site, tokens[heldout]))
    return metrics
