"""SAE speed on a language model: harvesting tokens per second, and training tokens per second of xaidash's loop
beside SAELens's own `SAETrainer.fit` on the same activations and settings.

On SmolLM2-135M-Instruct (imported into a temporary runs root unless `--run` names a language-model run), it
- harvests `--tokens` activations of (`--layer`, `--site`) over `--corpus` (models/language/sae/harvest.py: batched
  passes that stop at the layer, chunks streamed to disk) and prints tokens/s;
- trains the same SAELens training SAE (same seed, same initial weights) on those activations for `--train-tokens`
  samples twice: through xaidash's loop (train.run_steps: SAETrainer.step per step, an event per step with
  SAELens's train-step log, Stop checked between steps) and through `SAETrainer.fit` (its own loop, tqdm bar);
- prints both times, tokens/s and the ratio SAELens / xaidash (about 1: the loop is SAELens's; what xaidash adds is
  the per-step event), and each SAE's explained variance on the held-out activations.

    python bench/sae_speed.py --threads 1                         # SmolLM2 layer 15, cues, CPU
    python bench/sae_speed.py --device cuda --tokens 1000000 --train-tokens 4000000 --width 4608
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from xaidash.models.device import device_label, pick_device, synchronize


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", help="a language-model run id or folder (default: SmolLM2 imported into a temp root)")
    p.add_argument("--layer", type=int, default=15)
    p.add_argument("--site", default="resid")
    p.add_argument("--corpus", default="cues", help="sst2, sms_spam, cues, a text file or folder (default cues)")
    p.add_argument("--tokens", type=int, default=65_536, help="activations to harvest")
    p.add_argument("--train-tokens", type=int, default=131_072, help="training samples (epochs over the harvest)")
    p.add_argument("--width", type=int, default=2304)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--batch-tokens", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return p.parse_args(argv)


def load_lm(args: argparse.Namespace, device: torch.device, scratch: Path) -> Any:
    from xaidash.models.language.convert import import_language_model
    from xaidash.models.language.loading import load_language_model
    from xaidash.models.runs.store import Run, resolve_run

    if args.run:
        path = Path(args.run)
        run = Run(path) if (path / "config.json").is_file() else resolve_run(args.run)
    else:
        print("importing smollm2 into a temporary runs root (about a minute)")
        run = import_language_model("smollm2", root=scratch)
    return load_language_model(run, device=str(device))


def harvest_speed(lm: Any, config: Any, folder: Path, device: torch.device) -> float:
    from xaidash.models.language.sae.harvest import harvest

    folder.mkdir(parents=True)
    config.check(lm)
    synchronize(device)
    start = time.perf_counter()
    harvest(lm, config, folder, threading.Event(), lambda p: None)
    synchronize(device)
    seconds = time.perf_counter() - start
    from xaidash.models.language.sae.harvest import read_plan

    plan = read_plan(folder) or {}
    tokens = (len(plan["train"]) + len(plan["heldout"])) * (config.context - 1)
    print(
        f"harvest: {tokens:,} tokens at layer {config.layer} {config.site} in {seconds:.1f} s: {tokens / seconds:,.0f} tokens/s"
    )
    return tokens / seconds


def heldout_ev(sae: Any, folder: Path) -> float:
    """Explained variance of the trained SAE (inference weights) on the held-out activations."""
    from xaidash.models.language.sae import store
    from xaidash.models.language.sae.evaluate import activation_metrics
    from xaidash.models.language.sae.train import inference_weights

    weights, cfg = inference_weights(sae)
    model = store.build_inference_sae(cfg, weights, str(sae.sae.device))
    chunks = (store.read_chunk(p) for p in store.chunk_files(folder, "heldout"))
    return float(activation_metrics(model, chunks)["explained_variance"])


def train_speeds(config: Any, d_in: int, folder: Path, device: torch.device) -> dict[str, float]:
    """Seconds, held-out EV and the largest weight difference of xaidash's loop and SAELens's fit on the same
    activations and settings."""
    from xaidash.models.language.sae.train import build_trainer, inference_weights, prepare_trainer, run_steps

    trainer = build_trainer(config, d_in, str(device), folder)
    prepare_trainer(trainer, config, folder)  # the activation scale and decoder bias, before the first step
    # The same seed gives the same initial weights; fit keeps the scale it is given, and gets the same bias: both
    # sides then train the same SAE on the same batches.
    reference = build_trainer(config, d_in, str(device), folder)
    reference.activation_scaler.scaling_factor = trainer.activation_scaler.scaling_factor
    reference.sae.b_dec.data.copy_(trainer.sae.b_dec.data)

    synchronize(device)
    start = time.perf_counter()
    run_steps(trainer, config, folder, lambda e: None, threading.Event())
    synchronize(device)
    ours = time.perf_counter() - start

    synchronize(device)
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # fit's tqdm bar
        reference.fit()
    synchronize(device)
    theirs = time.perf_counter() - start
    ours_w, _ = inference_weights(trainer)
    theirs_w, _ = inference_weights(reference)  # fit folded its scale already: nothing more is folded
    diff = max(float((ours_w[k] - theirs_w[k]).abs().max()) for k in ours_w)
    return {
        "xaidash_s": ours,
        "saelens_s": theirs,
        "xaidash_ev": heldout_ev(trainer, folder),
        "saelens_ev": heldout_ev(reference, folder),
        "max_weight_diff": diff,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    from xaidash.models.language.sae.config import SaeConfig
    from xaidash.models.language.sites import d_model

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    print(f"device {device_label(device)}")
    with tempfile.TemporaryDirectory(prefix="xaidash-sae-bench-") as scratch:
        lm = load_lm(args, device, Path(scratch))
        config = SaeConfig(
            layer=args.layer,
            site=args.site,
            width=args.width,
            k=args.k,
            corpus=args.corpus,
            tokens=args.tokens,
            batch_tokens=args.batch_tokens,
            lr=args.lr,
            heldout_tokens=min(8192, args.tokens // 4),
        )
        folder = Path(scratch) / "bench-run" / "saes" / "bench"
        harvest_tps = harvest_speed(lm, config, folder, device)
        train_config = SaeConfig(**{**config.to_json(), "tokens": args.train_tokens})
        r = train_speeds(train_config, d_model(lm), folder, device)
        n = train_config.total_steps * train_config.batch_tokens
        ours, theirs = r["xaidash_s"], r["saelens_s"]
        print(
            f"training {train_config.architecture} width {args.width:,} k {args.k}, {n:,} samples, batch "
            f"{args.batch_tokens:,}: xaidash {ours:.1f} s ({n / ours:,.0f} tokens/s, held-out EV "
            f"{r['xaidash_ev']:.3f}), SAELens fit {theirs:.1f} s ({n / theirs:,.0f} tokens/s, EV "
            f"{r['saelens_ev']:.3f}); max |weight diff| {r['max_weight_diff']:.2g}; ratio SAELens/xaidash "
            f"{theirs / ours:.2f}x"
        )
    return {"harvest_tokens_s": harvest_tps, **r, "ratio": theirs / ours}


if __name__ == "__main__":
    main()
