"""`xaidash steer` and `xaidash patch`: steering a language model's answer along a direction, and activation
patching between a clean and a corrupted prompt.

    xaidash steer --run RUN --prompt "Write about your neighbour." --layer 6 --toward "I love..." --away "I hate..."
    xaidash steer --run RUN --prompt "..." --sae SAE_ID --feature 17 --strength 0.5
    xaidash patch --run RUN --clean "When Mary and John ..., John gave a drink to" \\
        --corrupted "When John and Mary ..., Mary gave a drink to" --answer " Mary" --wrong " John"
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from xaidash.data.argtypes import float_range, int_range
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.language import patching as P
from xaidash.explainers.language import steering as S
from xaidash.explainers.language.cli import LATEST, pick_run
from xaidash.models.device import device_arg
from xaidash.models.language.generate import Generation
from xaidash.models.language.prompt import MAX_NEW_TOKENS
from xaidash.models.language.sites import SITES
from xaidash.models.registry import ModelError


def _load(args: argparse.Namespace):
    import torch

    from xaidash.models.language.loading import load_language_model

    torch.set_grad_enabled(False)
    run = pick_run(args.run)
    return run, load_language_model(run, device=args.device)


# ---- steer ---------------------------------------------------------------------------------------------------------


def answer_line(label: str, gen: Generation) -> str:
    """The answer and its tokens' probabilities (geometric mean: how sure the model was of it on average)."""
    probs = np.array([s.prob for s in gen.steps]) if gen.steps else np.ones(1)
    mean = float(np.exp(np.log(np.clip(probs, 1e-12, 1)).mean()))
    return f"{label:<8} {gen.text!r}\n         tokens {len(gen.steps)}, mean token probability {mean:.2f}"


def _steer(args: argparse.Namespace) -> int:
    from xaidash.models.language.prompt import build_prompt

    if (args.sae is None) == (not args.toward and not args.away):
        raise ModelError(
            "Steer along an SAE feature (--sae ID --feature N) or a difference of means "
            "(--toward TEXT ... --away TEXT ...), one of the two."
        )
    if args.sae is not None and args.feature is None:
        raise ModelError("--sae needs --feature N (the feature's number, `xaidash sae list` for the SAEs).")
    run, lm = _load(args)
    if args.sae is not None:
        direction = S.feature_direction(run, args.sae, args.feature)
    else:
        if args.layer is None:
            raise ModelError(f"--layer is needed with --toward/--away (0 to {lm.num_layers - 1}).")
        direction = S.mean_difference(lm, args.layer, args.site, args.toward or [], args.away or [])
    prompt = build_prompt(lm, args.prompt, chat=not args.no_chat)
    result = S.steer(lm, prompt, direction, args.strength, max_new_tokens=args.max_new_tokens)
    print(
        f"direction: {direction.source} at layer {direction.layer} {SITES[direction.site].label}; "
        f"strength {result.strength:g} (adds a vector of length {result.added_norm:.1f} at every token)"
    )
    print(answer_line("plain", result.plain))
    print(answer_line("steered", result.steered))
    return 0


def _add_steer(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("steer", help="a language model's answer steered along an SAE feature or a difference of means")
    s.add_argument("--run", help=f"a language-model run id; default {LATEST}")
    s.add_argument("--prompt", required=True, help="what to ask")
    s.add_argument("--no-chat", action="store_true", help="continue the text as is (no chat template)")
    s.add_argument("--sae", help="an SAE of the run (xaidash sae list): steer along one of its features")
    s.add_argument("--feature", type=int_range(0, 10**9), help="the SAE feature's number")
    s.add_argument("--toward", action="append", metavar="TEXT", help="a prompt to steer toward (repeat it)")
    s.add_argument("--away", action="append", metavar="TEXT", help="a prompt to steer away from (repeat it)")
    s.add_argument("--layer", type=int_range(0, 10**4), help="the layer for --toward/--away (an SAE has its own)")
    s.add_argument("--site", choices=list(SITES), default="resid", help="where in the layer (default resid)")
    s.add_argument(
        "--strength",
        type=float_range(-S.MAX_STRENGTH, S.MAX_STRENGTH),
        default=0.4,
        help="times the prompt's median activation norm at the site (default 0.4; negative steers away)",
    )
    s.add_argument("--max-new-tokens", type=int_range(1, MAX_NEW_TOKENS), default=24)
    s.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    s.set_defaults(func=lambda a: one_line_errors(_steer, a))


# ---- patch ---------------------------------------------------------------------------------------------------------


def heatmap_lines(result: P.PatchingResult) -> list[str]:
    """The layer x position table of percentages restored (rows: layers; columns: positions)."""
    t = result.resid.shape[1]
    head = "layer " + " ".join(f"{i:>4}" for i in range(t))
    rows = [
        f"{layer:>5} " + " ".join(f"{v * 100:>4.0f}" for v in result.resid[layer]) for layer in range(len(result.resid))
    ]
    return [head, *rows]


def _patch(args: argparse.Namespace) -> int:
    run, lm = _load(args)
    setup = P.prepare(lm, args.clean, args.corrupted, args.answer, args.wrong)
    started = time.perf_counter()
    result = P.patch_prompts(lm, setup, batch=args.batch)
    print(
        f"run {run.id}: {setup.clean.shape[1]} tokens; logit difference {setup.answer_text!r} - {setup.wrong_text!r}: "
        f"clean {result.clean_diff:.2f}, corrupted {result.corrupted_diff:.2f}"
    )
    for note in result.notes:
        print(f"note: {note}")
    print("positions: " + ", ".join(result.position_labels))
    print("% of the logit difference restored by patching the residual stream after each layer at each position:")
    print("\n".join(heatmap_lines(result)))
    print("\n".join(P.carriers(result)))
    print(
        f"{len(P.all_patches(lm, setup.clean.shape[1]))} patches in {result.forward_passes} forward passes, "
        f"{time.perf_counter() - started:.1f} s"
    )
    if args.json is not None:
        doc = {
            "run": run.id,
            "clean": args.clean,
            "corrupted": args.corrupted,
            "answer": args.answer,
            "wrong": args.wrong,
            "clean_diff": result.clean_diff,
            "corrupted_diff": result.corrupted_diff,
            "positions": result.position_labels,
            "resid": result.resid.tolist(),
            "heads": result.heads.tolist(),
            "mlp": result.mlp.tolist(),
            "carriers": P.carriers(result),
        }
        Path(args.json).expanduser().write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.json}")
    return 0


def _add_patch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("patch", help="activation patching: which layers, positions, heads and MLPs carry an answer")
    p.add_argument("--run", help=f"a language-model run id; default {LATEST}")
    p.add_argument("--clean", default=P.NAMES_CLEAN, help="the prompt whose answer is --answer")
    p.add_argument("--corrupted", default=P.NAMES_CORRUPTED, help="the same number of tokens, leading elsewhere")
    p.add_argument("--answer", default=P.NAMES_ANSWER, help="the clean answer, one token with its space (' Mary')")
    p.add_argument("--wrong", default=P.NAMES_WRONG, help="the corrupted prompt's answer, one token (' John')")
    p.add_argument("--batch", type=int_range(1, 4096), default=P.DEFAULT_BATCH, help="patches per forward pass")
    p.add_argument("--json", metavar="FILE", help="also write the fractions restored as JSON")
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    p.set_defaults(func=lambda a: one_line_errors(_patch, a))


def add_commands(sub: argparse._SubParsersAction) -> None:
    _add_steer(sub)
    _add_patch(sub)
