"""SAELens SAEs with random weights, for tests that check the maths of reading an SAE (not what one learns), and a
writer that stores one as a finished SAE of a language-model run through the store's own writers."""

from __future__ import annotations

import os

import torch

from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.store import sae_folder, write_config, write_weights
from xaidash.models.runs.store import Run

os.environ.setdefault("WANDB_MODE", "disabled")


def randomised(sae, seed: int, bias: float = 0.3):
    """Every parameter of a SAELens SAE drawn at random (SAELens starts b_dec at zero: a bias term of zero would
    test nothing); matrices scaled by 1/sqrt(rows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (bias if p.ndim == 1 else 1.0 / p.shape[0] ** 0.5))
    return sae


def topk_sae(d_in: int, width: int = 64, k: int = 8, seed: int = 0, bias: float = 0.3):
    from sae_lens import TopKSAE, TopKSAEConfig

    return randomised(TopKSAE(TopKSAEConfig(d_in=d_in, d_sae=width, k=k)), seed, bias)


def write_sae(run: Run, sae_id: str, d_in: int, layer: int = 1, width: int = 64) -> None:
    """A random TopK SAE (k 8) at (layer, resid) stored as a finished SAE of `run`."""
    sae = topk_sae(d_in, width, 8, bias=0.1)
    config = SaeConfig(
        layer=layer,
        site="resid",
        width=width,
        k=8,
        corpus="cues",
        tokens=4096,
        batch_tokens=128,
        lr=1e-3,
        heldout_tokens=512,
    )
    folder = sae_folder(run, sae_id)
    folder.mkdir(parents=True)
    write_config(folder, config, d_in, "finished")
    write_weights(folder, sae.state_dict(), sae.cfg.to_dict())
