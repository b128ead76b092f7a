"""`xaidash generate`: a prompt to a language-model run, its answer step by step, and which prompt tokens (or
words) produced a chosen generated token, by every prompt method asked for.

Prints the answer, a table of steps (token, probability, top alternatives), then per method the attributions of
the explained target to each prompt feature (a terminal bar and the value), the strongest features and the method's
completeness line. `--out DIR` writes report.json (`figures.prompt_report`), attributions/<method>.npy, and per
method that made one the prompt x generated-token matrix (matrix/<method>.npy and a Vega-Lite heatmap
matrix/<method>.vl.json); `--report FILE.html` the same as one self-contained page. Methods, their parameters and
their costs come from the prompt-method registry: nothing here is per method.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xaidash.data.argtypes import float_range, int_range
from xaidash.data.text_files import decode_text
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.figures.map_figure import MapFigure
from xaidash.explainers.figures.result_json import check_out_folder, parameters_of, result_document, write_result
from xaidash.explainers.language import api
from xaidash.explainers.language import figures as F
from xaidash.explainers.language.query import DEFAULT_BATCH, PromptQuery, make_query
from xaidash.explainers.language.registry import PromptMethodSpec, get_prompt_method, list_prompt_methods
from xaidash.explainers.params import MAX_BATCH_SIZE, ExplainError, parse_params
from xaidash.explainers.session import Outcome
from xaidash.models.device import device_arg
from xaidash.models.language.generate import Generation
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import MAX_NEW_TOKENS
from xaidash.models.runs.store import Run

LATEST = "latest-lm"
BAR = 12  # characters on each side of a signed terminal bar
SAE_TOP = 12  # features `--sae` lists
MAX_PROMPT_FILE = 1_000_000  # bytes: a prompt file beyond this is not a prompt


# ---- what the user asked for, checked before a model is loaded ------------------------------------------------------


def read_prompt(text: str | None, file: str | None) -> str:
    """The prompt from --prompt or --prompt-file; ExplainError for an empty one or a file that cannot be read."""
    if file is not None:
        path = Path(file).expanduser()
        try:
            if path.stat().st_size > MAX_PROMPT_FILE:
                raise ExplainError(
                    f"--prompt-file {file}: larger than {MAX_PROMPT_FILE:,} bytes; give a shorter prompt."
                )
            text = decode_text(path.read_bytes(), f"--prompt-file {file}", error=ExplainError).text
        except OSError as err:
            raise ExplainError(f"--prompt-file {file}: cannot read it ({err.strerror or err}).") from None
    if text is None or not text.strip():
        raise ExplainError(
            "The prompt is empty: give --prompt TEXT or --prompt-file FILE with a question or instruction."
        )
    return text


def chosen_methods(spec: str | None) -> list[PromptMethodSpec]:
    """--explain m1,m2 as specs, in order; ExplainError naming the known methods for an unknown one."""
    if spec is None:
        return []
    if spec.strip() == "all":
        return list_prompt_methods()
    ids = list(dict.fromkeys(m.strip() for m in spec.split(",") if m.strip()))
    if not ids:
        raise ExplainError(f"--explain is empty: name one or more of {known_methods()}.")
    if not list_prompt_methods():
        raise ExplainError("No prompt attribution methods are installed.")
    return [get_prompt_method(m) for m in ids]


def known_methods() -> str:
    return ", ".join(s.id for s in list_prompt_methods()) or "(none installed)"


def parse_span(text: str) -> tuple[int, int]:
    """--span A:B: generated steps A up to B (B not included), counted from 0 as in the step table."""
    a, sep, b = text.partition(":")
    try:
        start, stop = int(a), int(b)
    except ValueError:
        raise ExplainError(f"--span {text!r}: write START:STOP, e.g. 5:7 for steps 5 and 6.") from None
    if not sep or start < 0 or stop <= start:
        raise ExplainError(f"--span {text!r}: write START:STOP with 0 <= START < STOP, e.g. 5:7 for steps 5 and 6.")
    return start, stop


def find_text(generation: Generation, text: str) -> tuple[int, int]:
    """The first run of generated tokens whose text is `text` (exactly, else ignoring the spaces around it):
    (start, stop) steps; ExplainError when the answer holds no such tokens."""
    tokens = [s.token for s in generation.steps]
    for exact in (True, False):
        want = text if exact else text.strip()
        if not want:
            break
        for start in range(len(tokens)):
            joined = ""
            for stop in range(start + 1, len(tokens) + 1):
                joined += tokens[stop - 1]
                got = joined if exact else joined.strip()
                if got == want:
                    return start, stop
                if len(joined.strip()) > len(want) + 1:
                    break
    raise ExplainError(
        f"--target-text {text!r} is not a token or run of tokens of the answer {generation.text!r}: "
        "use one of the tokens in the step table, or --target-step K."
    )


def default_span(generation: Generation) -> tuple[int, int]:
    """The whole answer, less a final end-of-text token."""
    n = len(generation.steps) - (generation.stopped == "end of text")
    if n == 0:
        raise ExplainError("The answer is only an end-of-text token: nothing to explain.")
    return 0, n


def target_span(args: argparse.Namespace, generation: Generation) -> tuple[int, int]:
    n = len(generation.steps)
    if args.target_step is not None:
        k = args.target_step + n if args.target_step < 0 else args.target_step
        if not 0 <= k < n:
            raise ExplainError(f"--target-step {args.target_step}: the answer has steps 0-{n - 1}.")
        return k, k + 1
    if args.target_text is not None:
        return find_text(generation, args.target_text)
    if args.span is not None:
        start, stop = parse_span(args.span)
        if stop > n:
            raise ExplainError(f"--span {args.span}: the answer has steps 0-{n - 1}.")
        return start, stop
    return default_span(generation)


def contrast_id(lm: LanguageModel, text: str) -> int:
    """--contrast TEXT as one token id; ExplainError when the text is not one token."""
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = ", ".join(F.quoted(t) for t in lm.token_text(ids)) or "none"
        raise ExplainError(
            f"--contrast {text!r} is {len(ids)} tokens ({pieces}): give one token, e.g. with its leading space."
        )
    return int(ids[0])


def pick_run(run: str | None) -> Run:
    """The language-model run asked for: newest one for None or 'latest-lm'; a clear error for a classifier."""
    from xaidash.models.language.loading import is_language_run
    from xaidash.models.registry import ModelError
    from xaidash.models.runs.store import list_runs, resolve_run, runs_root

    if run in (None, LATEST):
        found = next((r for r in list_runs() if is_language_run(r)), None)
        if found is None:
            raise ModelError(
                f"No language-model run under {runs_root()}: make one with `xaidash import smollm2` "
                "(or gguf:FILE, hf:FOLDER)."
            )
        return found
    r = resolve_run(str(run))
    if not is_language_run(r):
        model = r.config().get("model", "?")
        raise ModelError(
            f"Run {r.id} holds a {model} classifier, not a generative language model: explain it with "
            f"`xaidash explain --run {r.id}`, or pick a language-model run (`xaidash runs`; --run {LATEST})."
        )
    return r


# ---- printing -----------------------------------------------------------------------------------------------------


def steps_table(generation: Generation, span: tuple[int, int] | None = None) -> list[str]:
    lines = [f"{'step':>4}  {'token':<16} {'prob':>6}  top alternatives"]
    for k, s in enumerate(generation.steps):
        alts = ", ".join(f"{F.quoted(t)} {p:.0%}" for t, i, p in s.alternatives if i != s.id)
        mark = "*" if span is not None and span[0] <= k < span[1] else " "
        lines.append(f"{k:>4}{mark} {F.quoted(s.token):<16} {s.prob:>6.1%}  {alts}")
    return lines


def bar(value: float, scale: float, signed: bool) -> str:
    """A terminal bar: signed values grow left (negative) or right (positive) of a centre line."""
    if not np.isfinite(value):
        return " " * BAR + "?"
    n = min(BAR, round(abs(value) / scale * BAR)) if scale > 0 else 0
    if not signed:
        return "█" * n
    return (" " * (BAR - n) + "█" * n if value < 0 else " " * BAR) + "│" + ("█" * n if value > 0 else "")


def attribution_lines(spec: PromptMethodSpec, e: api.PromptExplanation, fig: MapFigure, width: int) -> list[str]:
    """One method's answer in the terminal: its units and caption, each feature's value and bar, the strongest."""
    values = np.asarray(e.attributions, np.float64)
    finite = np.abs(values[np.isfinite(values)])
    scale = float(finite.max()) if finite.size else 0.0
    said = dataclasses.replace(fig.caption, completeness="").text()  # the completeness sentence gets its own line
    lines = [f"{spec.id} · {spec.label} · {fig.legend.units}", f"  {said}"]
    for label, v in zip(e.labels, values, strict=True):
        lines.append(f"  {F.quoted(label):<{width}} {v:+10.4f}  {bar(float(v), scale, spec.signed)}")
    top = ", ".join(f"{F.quoted(t)} {v:+.3f}" for _, t, v in F.top_features(e.labels, values))
    lines.append(f"  strongest: {top}")
    if fig.caption.completeness:
        lines.append(f"  {fig.caption.completeness_text()}")
    return lines


def _faithfulness(
    lm: LanguageModel, query: PromptQuery, explanations: dict[str, api.PromptExplanation]
) -> dict[str, Any] | None:
    from xaidash.explainers.language.faithfulness import deletion_insertion

    try:
        return dict(deletion_insertion(lm, query, explanations))
    except ExplainError as err:  # a metric that cannot be computed is said; the maps are still written
        print(f"faithfulness: not computed: {err}", file=sys.stderr)
        return None


def faithfulness_lines(scores: dict[str, Any]) -> list[str]:
    """Deletion and insertion AUCs per method and for random orders (the faithfulness module's own wording)."""
    lines = ["faithfulness: deletion AUC (↓ lower is better), insertion AUC (↑ higher is better)"]
    for name, s in scores.items():
        spread = f" (± {s.deletion_auc_std:.3f}, ± {s.insertion_auc_std:.3f} over {s.seeds} orders)" if s.seeds else ""
        lines.append(f"  {name:<20} {s.deletion_auc:+9.3f} {s.insertion_auc:+9.3f}{spread}")
    return lines


# ---- the command --------------------------------------------------------------------------------------------------


def _cmd_generate(args: argparse.Namespace) -> int:
    return one_line_errors(_generate, args)


def _check_report_path(path: str) -> Path:
    target = Path(path).expanduser()
    if target.is_dir():
        raise ExplainError(f"--report {path} is a folder: give a file name such as report.html.")
    check_out_folder(target.parent)
    return target


def _generate(args: argparse.Namespace) -> int:
    from xaidash.models.language.generate import generate
    from xaidash.models.language.loading import load_language_model
    from xaidash.models.language.prompt import build_prompt

    text = read_prompt(args.prompt, args.prompt_file)
    chosen = chosen_methods(args.explain)
    params = parse_params(args.param, chosen)
    for spec in chosen:  # a bad value is said now, not after the model has loaded and generated
        spec.resolve_params(params[spec.id])
    targeted = [
        f
        for f, v in (
            ("--target-step", args.target_step),
            ("--target-text", args.target_text),
            ("--span", args.span),
            ("--contrast", args.contrast),
        )
        if v is not None
    ]
    if targeted and not chosen and not args.sae:
        raise ExplainError(
            f"{targeted[0]} picks what to explain: add --explain METHODS ({known_methods()}) or --sae SAE_ID."
        )
    if args.span is not None:
        parse_span(args.span)
    out = Path(args.out).expanduser() if args.out else None
    if out is not None:
        if not chosen:
            raise ExplainError(f"--out writes the explanations: add --explain METHODS ({known_methods()}).")
        check_out_folder(out)
    report_path = _check_report_path(args.report) if args.report else None
    if report_path is not None and not chosen:
        raise ExplainError(f"--report needs --explain METHODS ({known_methods()}).")
    run = pick_run(args.run)
    if args.sae:
        _check_sae(run, args.sae)

    print(f"loading {run.id} ...", file=sys.stderr)
    lm = load_language_model(run, device=args.device)
    prompt = build_prompt(lm, text, chat=not args.raw)
    if prompt.notice:
        print(f"note: {prompt.notice}", file=sys.stderr)
    generation = generate(
        lm,
        prompt,
        max_new_tokens=args.max_new_tokens,
        sample=args.sample,
        temperature=args.temperature,
        seed=args.seed,
    )
    print(generation.text)
    how = f"sampled (seed {args.seed}, temperature {args.temperature:g})" if args.sample else "greedy"
    print(f"[{len(generation.steps)} tokens, {how}, stopped at {generation.stopped}, {generation.seconds:.2f} s]")
    if not chosen and not args.sae:
        print("\n".join(steps_table(generation)))
        return 0

    span = target_span(args, generation)
    contrast = contrast_id(lm, args.contrast) if args.contrast is not None else None
    print("\n".join(steps_table(generation, span)))
    query = make_query(
        lm,
        prompt,
        generation.ids,
        span=span,
        contrast=contrast,
        unit=args.unit,
        include_template=args.include_template,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    request = {
        "run": run.id,
        "inputs": {"prompt": text, "prompt_file": args.prompt_file},
        "parameters": parameters_of(args, leave_out=("run", "prompt", "prompt_file")),
    }
    code = _explain(generation, lm, query, chosen, params, out, report_path, args.metrics, request) if chosen else 0
    return _sae_features(lm, query, run, args.sae) if args.sae else code


def _check_sae(run: Run, sae_id: str) -> None:
    """A ModelError naming the run's SAEs when it has none by that id: said before the model loads."""
    from xaidash.models.language.sae.store import read_record

    read_record(run, sae_id)


def _sae_features(lm: LanguageModel, query: PromptQuery, run: Run, sae_id: str) -> int:
    """The SAE's features with the largest activation x gradient of the target, the error and bias terms."""
    from xaidash.explainers.language.sae_attribution import sae_attribution
    from xaidash.models.language.sae.store import load_sae

    loaded = load_sae(run, sae_id, device=str(lm.device))
    fa = sae_attribution(lm, query, loaded.sae, loaded.layer, loaded.site, top=SAE_TOP)
    print(
        f"\nSAE {sae_id} (layer {fa.layer} {fa.site}, {fa.width:,} features, {fa.active:,} active): activation x "
        f"gradient of {F.target_label(query)} = {fa.output:+.4f}, summed over {int(fa.counted.sum())} of "
        f"{len(fa.tokens)} positions (the user's tokens and those reading the answer)"
    )
    scale = max([abs(float(fa.attribution[f])) for f in fa.top] + [abs(fa.error_total), abs(fa.bias_total)])
    for f in fa.top:
        value, peak = float(fa.attribution[f]), int(fa.argmax_position[f])
        fires = f"max {fa.max_activation[f]:.3f} at {F.quoted(fa.tokens[peak])} ({peak})"
        print(f"  #{f:<8} {value:+10.4f}  {bar(value, scale, True)}  {fires}")
    for name, value in (("other", fa.rest_total()), ("error", fa.error_total), ("bias", fa.bias_total)):
        print(f"  {name:<9} {value:+10.4f}  {bar(value, scale, True)}")
    print(f"  features + error + bias = {fa.site_total:+.4f}, the site's gradient x activation (gap {fa.gap:.1e})")
    return 0


def _say_failed(outcome: Outcome[Any]) -> None:
    """One line on stderr for a method that failed; the others go on."""
    if outcome.error is not None:
        print(f"{outcome.method}: failed: {outcome.error}", file=sys.stderr)


def _explain(
    generation: Generation,
    lm: LanguageModel,
    query: PromptQuery,
    chosen: Sequence[PromptMethodSpec],
    params: dict[str, dict[str, Any]],
    out: Path | None,
    report_path: Path | None,
    metrics: bool = False,
    request: dict[str, Any] | None = None,
) -> int:
    wanted = {s.id: params[s.id] for s in chosen}
    planned = api.planned_rows(query, wanted)
    print(
        f"\nexplaining {F.target_label(query)} by {query.n_features} prompt {query.unit}s; model rows per method: "
        + ", ".join(f"{m} {n:,}" for m, n in planned.items()),
        file=sys.stderr,
    )
    outcomes = api.prompt_session(lm, query, wanted, done=_say_failed)
    explanations = {o.method: o.value for o in outcomes if o.value is not None}
    failed = sum(not o.ok for o in outcomes)
    if not explanations:
        return 1
    faithfulness = _faithfulness(lm, query, explanations) if metrics else None
    figures = F.prompt_figures(query, explanations)
    width = min(24, max(len(F.quoted(t)) for t in query.labels))
    for m, e in explanations.items():
        print()
        print("\n".join(attribution_lines(get_prompt_method(m), e, figures[m], width)))
    if faithfulness is not None:
        print("\n" + "\n".join(faithfulness_lines(faithfulness)))
    report = F.prompt_report(generation, query, explanations, faithfulness)
    if out is not None:
        _write_out(out, query, report, explanations, request or {})
        print(f"\nwritten to {out}")
    if report_path is not None:
        _write_html(report_path, report)
        print(f"HTML report {report_path}")
    return 1 if failed else 0


def _write_out(
    out: Path,
    query: PromptQuery,
    report: dict[str, Any],
    explanations: dict[str, api.PromptExplanation],
    request: dict[str, Any],
) -> None:
    """report.json (the prompt report under the result documents' envelope: schema, the run, the prompt and every
    parameter), the attributions and the matrices, through the one writer of result documents."""
    from xaidash.explainers.figures.jsonable import jsonable
    from xaidash.explainers.figures.report_files import json_text, npy_bytes

    files: dict[str, bytes] = {}
    for m, e in explanations.items():
        files[f"attributions/{m}.npy"] = npy_bytes(e.attributions)
        spec = F.matrix_spec(query, e)
        if spec is not None and e.per_step is not None:
            files[f"matrix/{m}.npy"] = npy_bytes(e.per_step)
            files[f"matrix/{m}.vl.json"] = json_text(jsonable(spec)).encode("utf-8")
    document, arrays = result_document(
        "generate",
        report,
        run=request.get("run"),
        inputs=request.get("inputs", {}),
        parameters=request.get("parameters", {}),
    )
    write_result(out, "report.json", document, {**files, **arrays})


def _write_html(path: Path, report: dict[str, Any]) -> None:
    from xaidash.data.atomic import atomic_write_bytes

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, F.prompt_report_html(report).encode("utf-8"))
    except OSError as err:
        raise ExplainError(f"Cannot write the HTML report to {path}: {err.strerror or err}.") from None


def _methods_help() -> str:
    lines = []
    for s in list_prompt_methods():
        lines.append(f"  {s.id}: {s.label} ({s.family}; {s.output.replace('_', '-')})")
        lines += [f"      {s.id}.{p.describe()}" for p in s.params]
    return "\n".join(lines) or "  (none installed)"


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="prompt a language-model run, show each generated token, and explain which prompt tokens produced one",
        description=textwrap.fill(
            "Generates an answer (greedy, or sampled with a seed) and prints each step's token, probability and top "
            "alternatives; with --explain, attributes the chosen target (the whole answer by default) to the prompt's "
            "own tokens or words by each method. --out DIR writes report.json, the attributions and the prompt x "
            "generated-token matrices; --report FILE.html one self-contained page.",
            100,
        )
        + f"\n\nmethods:\n{_methods_help()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--run", help=f"a language-model run id (xaidash runs); default {LATEST}: the newest one")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--prompt", help="the prompt text")
    given.add_argument("--prompt-file", metavar="FILE", help="read the prompt from a UTF-8 text file")
    p.add_argument("--raw", action="store_true", help="the text as it is, without the model's chat template")
    p.add_argument(
        "--max-new-tokens",
        type=int_range(1, MAX_NEW_TOKENS),
        default=32,
        help="tokens to generate at most (default 32)",
    )
    p.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    p.add_argument("--seed", type=int_range(0, 2**32 - 1), default=0, help="seed of sampling and sampling methods")
    p.add_argument(
        "--temperature",
        type=float_range(0.0, 100.0, lo_open=True),
        default=0.7,
        help="sampling temperature (default 0.7)",
    )
    p.add_argument(
        "--explain", metavar="M1,M2", help=f"prompt attribution methods, or all: {known_methods()} (described above)"
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--target-step", type=int, metavar="K", help="explain generated token K (0 = the first, -1 = the last)"
    )
    target.add_argument(
        "--target-text", metavar="TEXT", help="explain the first generated token(s) reading TEXT, e.g. ' Paris'"
    )
    target.add_argument(
        "--span", metavar="A:B", help="explain steps A to B-1 together (their log-probabilities summed)"
    )
    p.add_argument("--contrast", metavar="TEXT", help="explain log p(target) − log p(this one token) instead")
    p.add_argument(
        "--metrics",
        action="store_true",
        help="also score each method's order by deleting and inserting prompt features (AUCs beside random orders)",
    )
    p.add_argument("--unit", choices=["token", "word"], default="token", help="prompt features: tokens or words")
    p.add_argument(
        "--include-template", action="store_true", help="count the chat template's and special tokens as features too"
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="METHOD.NAME=VALUE",
        help="method parameter, repeatable; NAME=VALUE sets it for every chosen method that has it",
    )
    p.add_argument(
        "--sae",
        metavar="SAE_ID",
        help="also list which features of this SAE (xaidash sae list) drove the target: activation x gradient",
    )
    p.add_argument("--out", metavar="DIR", help="write report.json, attributions/*.npy and matrix/* here")
    p.add_argument("--report", metavar="FILE.html", help="also write the report as one self-contained HTML page")
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument(
        "--batch-size",
        type=int_range(1, MAX_BATCH_SIZE),
        default=DEFAULT_BATCH,
        help=f"model rows per forward pass (default {DEFAULT_BATCH}; halved on out-of-memory)",
    )
    p.set_defaults(func=_cmd_generate)
