"""Activation patching of every layer x position of the residual stream (the names example on SmolLM2): xaidash's
batched patching (many patches per forward pass) beside a plain loop of TransformerLens `run_with_hooks` calls, one
patch per call, on the same model; prints both times, the ratio and the largest disagreement of the results.

The HookedTransformer is built offline from the loaded transformers model: its config from the model's own Llama
config (the fields TransformerLens's `convert_hf_model_config` reads for LlamaForCausalLM) and its weights through
TransformerLens's `convert_llama_weights`, without folding (so its logits match the model's); the bench checks that.

    python bench/patch_speed.py --run RUN [--device cuda] [--batch 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("WANDB_MODE", "disabled")

import numpy as np
import torch

from xaidash.explainers.language import patching as P
from xaidash.explainers.language.cli import pick_run
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.model import LanguageModel


def hooked_transformer(lm: LanguageModel):
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.llama import convert_llama_weights

    c = lm.config
    if c.model_type != "llama":
        raise SystemExit(f"This bench builds TransformerLens's Llama; {lm.name} is a {c.model_type}.")
    rope = getattr(c, "rope_theta", None) or (getattr(c, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    cfg = HookedTransformerConfig(
        d_model=c.hidden_size,
        d_head=c.hidden_size // c.num_attention_heads,
        n_heads=c.num_attention_heads,
        d_mlp=c.intermediate_size,
        n_layers=c.num_hidden_layers,
        n_ctx=min(c.max_position_embeddings, 2048),
        eps=c.rms_norm_eps,
        d_vocab=c.vocab_size,
        act_fn=c.hidden_act,
        n_key_value_heads=c.num_key_value_heads if c.num_key_value_heads != c.num_attention_heads else None,
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_adjacent_pairs=False,
        rotary_dim=c.hidden_size // c.num_attention_heads,
        rotary_base=float(rope),
        final_rms=True,
        gated_mlp=True,
        device=str(lm.device),
        dtype=torch.float32,
    )
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(
        convert_llama_weights(lm.model, cfg),
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=False,
    )
    return model.eval()


@torch.no_grad()
def tl_loop(model, setup: P.PatchingSetup, clean_resid: list[torch.Tensor]) -> np.ndarray:
    n, t = model.cfg.n_layers, setup.clean.shape[1]
    out = np.zeros((n, t))
    ids = setup.corrupted.to(model.cfg.device)
    for layer in range(n):
        for pos in range(t):

            def hook(act: torch.Tensor, hook: object, layer: int = layer, pos: int = pos) -> torch.Tensor:
                act[:, pos] = clean_resid[layer][pos]
                return act

            logits = model.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.hook_resid_post", hook)])
            out[layer, pos] = float(P.logit_diff(logits, setup.answer, setup.wrong)[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a language-model run (default: the newest)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=P.DEFAULT_BATCH)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_language_model(pick_run(args.run), device=args.device)
    setup = P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CORRUPTED, P.NAMES_ANSWER, P.NAMES_WRONG)
    n, t = lm.num_layers, setup.clean.shape[1]
    model = hooked_transformer(lm)
    with torch.no_grad():
        gap = (model(setup.clean.to(lm.device)).float() - lm.logits(setup.clean)).abs().max().item()
    print(
        f"{lm.name} on {lm.device}: {n} layers x {t} positions = {n * t} patches; TransformerLens logits differ "
        f"from the model's by at most {gap:.2e}"
    )

    sync = torch.cuda.synchronize if lm.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    clean = P.cache_run(lm, setup.clean, setup.answer, setup.wrong)
    corrupted = P.cache_run(lm, setup.corrupted, setup.answer, setup.wrong)
    patches = [P.Patch("resid", layer, pos) for layer in range(n) for pos in range(t)]
    ours = P.patch_diffs(lm, setup.corrupted, clean, corrupted, patches, setup.answer, setup.wrong, args.batch)
    sync()
    ours_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    theirs = tl_loop(model, setup, clean.resid)
    sync()
    theirs_s = time.perf_counter() - t0
    diff = np.abs(ours.reshape(n, t) - theirs).max()
    print(f"xaidash batched ({args.batch} per pass): {ours_s:.2f} s, {n * t / ours_s:.1f} patches/s")
    print(f"TransformerLens run_with_hooks loop:   {theirs_s:.2f} s, {n * t / theirs_s:.1f} patches/s")
    print(f"ratio (loop / batched): {theirs_s / ours_s:.2f}x; largest logit-difference disagreement {diff:.2e}")


if __name__ == "__main__":
    main()
