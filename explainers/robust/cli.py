"""`xaidash attack` (an attack within a pixel budget, and how the chosen methods' maps move under it) and
`xaidash counterfactual` (the smallest change that makes the model answer a chosen class: for images a minimal
adversarial example, or with `--search patch` a patch counterfactual a person can see; for text word edits).

`attack --out DIR` writes attack.json, original.png and perturbed.png (the images at the model's size, 8-bit),
perturbation.png (the perturbation with its colour bar in grey levels) and, per --explain method,
maps/<method>_before.png and maps/<method>_after.png (each with its colour bar, one shared scale).
`counterfactual --out DIR` writes counterfactual.json, and for images the same three PNGs. Both JSON files are
result documents (explainers/figures/result_json.py): every field of the result, the run, input and parameters,
and the arrays (the images, the maps) as arrays/*.npy."""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from xaidash.data.argtypes import int_range
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.figures.result_json import (
    check_out_folder,
    make_out_folder,
    parameters_of,
    result_document,
    write_result,
)
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.attack import AttackResult, attack, class_index
from xaidash.explainers.robust.counterfactual import (
    DEFAULT_BUDGET,
    DEFAULT_CANDIDATES,
    DEFAULT_EDITS,
    DEFAULT_STEPS,
    Counterfactual,
    counterfactual,
    counterfactual_attacks,
)
from xaidash.explainers.robust.registry import EPSILON, AttackSpec, check_epsilon, get_attack, list_attacks, text_note
from xaidash.explainers.robust.searches import COLUMNS, PATCH, PERTURBATION, SEARCHES, searches
from xaidash.explainers.robust.table_counterfactual import DEFAULT_CHANGES
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import device_arg


def parse_budget(text: str, name: str = "--epsilon") -> float:
    """'0.03' or '8/255' as a float in (0, 1]; ExplainError otherwise."""
    try:
        value = float(Fraction(str(text).strip()))
    except (ValueError, ZeroDivisionError):
        raise ExplainError(
            f"{name} {text!r}: give a number in (0, 1] such as 0.03, or grey levels such as 8/255."
        ) from None
    return check_epsilon(value, name)


def attack_params(spec: AttackSpec, items: list[str] | None, steps: int | None) -> dict[str, Any]:
    """--param NAME=VALUE pairs (and --steps) for the attack; ExplainError for a name it does not declare."""
    declared = {p.name: p for p in spec.params}
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name not in declared:
            raise ExplainError(
                f"--param {item!r}: {spec.label} takes {', '.join(f'{n}=VALUE' for n in declared) or 'no parameters'}."
            )
        out[name] = declared[name].match_choice(value)
    if steps is not None:
        if "steps" not in declared:
            raise ExplainError(f"--steps: {spec.label} takes one step; leave --steps out or use an iterative attack.")
        out["steps"] = steps
    return out


def _load(args: argparse.Namespace) -> tuple[Any, ModelBundle, Any]:
    from xaidash.explainers.inputs import resolve_sample
    from xaidash.models.runs.store import load_bundle, resolve_run, weights_problem

    if args.out is not None:
        check_out_folder(Path(args.out).expanduser())  # before a model is loaded: a bad --out is said at once
    run = resolve_run(args.run)
    if problem := weights_problem(run):
        raise ExplainError(f"{problem} Not attacked: the answer of a broken model means nothing.")
    bundle = load_bundle(run, device=args.device)
    return run, bundle, resolve_sample(args.input, bundle)


def _write_images(out: Path, result: AttackResult) -> None:
    from xaidash.data.atomic import atomic_write_bytes
    from xaidash.explainers.figures.png import input_png
    from xaidash.explainers.robust.figures import perturbation_figure

    atomic_write_bytes(out / "original.png", input_png(result.original))
    atomic_write_bytes(out / "perturbed.png", input_png(result.perturbed))
    fig = perturbation_figure(result)
    if fig.figure_png is not None:
        atomic_write_bytes(out / "perturbation.png", fig.figure_png)


def _document(command: str, args: argparse.Namespace, run: Any, sample: Any, result: Any, **extra: Any) -> Any:
    return result_document(
        command,
        result,
        run=run.id,
        inputs={"input": args.input, "description": sample.description},
        parameters=parameters_of(args, leave_out=("run", "input")),
        extra={"run": run.id, "input": sample.description, **extra},
    )


def _attack(args: argparse.Namespace) -> int:
    from xaidash.data.atomic import atomic_write_bytes
    from xaidash.explainers.robust.explanation_change import TOP_SHARE, explanation_change

    run, bundle, sample = _load(args)
    if not adapter_of(bundle.modality).attackable:
        raise ExplainError(
            f"{text_note(bundle.modality)} (xaidash counterfactual --run {args.run} --input ... --to CLASS)"
        )
    spec = get_attack(args.attack, bundle.modality)
    eps = parse_budget(args.epsilon)
    params = {"epsilon": eps, **attack_params(spec, args.param, args.steps)}
    target = None if args.target is None else class_index(bundle, args.target, "--target")
    methods = [m.strip() for m in (args.explain or "").split(",") if m.strip()]
    if methods:
        from xaidash.explainers.registry import get_method

        for m in methods:
            get_method(m, bundle.modality).check(bundle)  # an unknown or inapplicable method is said before attacking
    result = attack(bundle, sample.raw, target, spec.id, params, seed=args.seed)
    print(f"{sample.description}: {result.summary()}")
    changes = explanation_change(bundle, result, methods, seed=args.seed) if methods else []
    for c in changes:
        if c.error:
            print(f"{c.method}: failed: {c.error}", file=sys.stderr)
        else:
            print(
                f"{c.method}: map of {result.classes[c.target]} before/after: Spearman {c.spearman:.3f}, "
                f"top {TOP_SHARE:.0%} overlap {c.top_k:.0%} ({c.k} pixels)"
            )
    if args.out is not None:
        out = Path(args.out).expanduser()
        make_out_folder(out)
        try:
            _write_images(out, result)
            if changes:
                from xaidash.explainers.robust.figures import change_figures

                (out / "maps").mkdir(exist_ok=True)
                for c in changes:
                    figs = change_figures(c, result, result.classes)
                    for name, fig in zip(("before", "after"), figs or (), strict=False):
                        if fig.figure_png is not None:
                            atomic_write_bytes(out / "maps" / f"{c.method}_{name}.png", fig.figure_png)
            write_result(
                out,
                "attack.json",
                *_document("attack", args, run, sample, result, library=spec.library, explanations=changes),
            )
        except OSError as err:
            raise ExplainError(f"Cannot write into {out}: {err.strerror or err}.") from None
        print(f"written to {out}")
    return 0


def _value_counterfactual(args: argparse.Namespace, run: Any, bundle: Any, sample: Any) -> int:
    """A row of a model that predicts a number: --to is the range to reach ('at most 100', or 'default': past the
    training median), the fewest changed columns found (explainers/robust/table_value_counterfactual.py)."""
    from xaidash.explainers.robust.table_value_counterfactual import table_value_counterfactual

    changes = DEFAULT_CHANGES if args.budget is None else _changes(args.budget, len(bundle.info.columns))
    goal = None if args.to.strip().lower() == "default" else args.to
    cf = table_value_counterfactual(bundle, sample.raw, goal, fixed=tuple(args.fixed or ()), max_changes=changes)
    print(f"{sample.description}: {cf.summary()}")
    if cf.row is not None:
        print("changed row: " + adapter_of(bundle.modality).one_line(cf.row, bundle.info))
    if cf.note:
        print(f"note: {cf.note}", file=sys.stderr)
    if args.out is not None:
        out = Path(args.out).expanduser()
        make_out_folder(out)
        try:
            write_result(out, "counterfactual.json", *_document("counterfactual", args, run, sample, cf))
        except OSError as err:
            raise ExplainError(f"Cannot write into {out}: {err.strerror or err}.") from None
        print(f"written to {out}")
    return 0 if cf.found else 1


def _counterfactual(args: argparse.Namespace) -> int:
    run, bundle, sample = _load(args)
    if bundle.regression is not None:
        return _value_counterfactual(args, run, bundle, sample)
    to = class_index(bundle, args.to, "--to")
    cf: Counterfactual
    if not searches(bundle.modality):
        raise ExplainError(
            f"Counterfactual searches are drawn for images, texts and table rows; not for {bundle.adapter.label}."
        )
    search = args.search or searches(bundle.modality)[0]
    if search not in searches(bundle.modality):
        raise ExplainError(
            f"--search {search}: {bundle.modality} models take "
            + ", ".join(f"{s} ({SEARCHES[s].name})" for s in searches(bundle.modality))
            + "."
        )
    if search == PATCH:
        attack_id = args.attack or counterfactual_attacks(bundle.modality)[0]
        share = None if args.budget is None else parse_budget(args.budget, "--budget")
        cf = counterfactual(
            bundle, sample.raw, to, budget=share, search=PATCH, attack_id=attack_id, steps=args.steps, seed=args.seed
        )
    elif search == PERTURBATION:
        budget_eps = DEFAULT_BUDGET if args.budget is None else parse_budget(args.budget, "--budget")
        attack_id = args.attack or counterfactual_attacks(bundle.modality)[0]
        cf = counterfactual(
            bundle, sample.raw, to, budget=budget_eps, attack_id=attack_id, steps=args.steps, seed=args.seed
        )
    elif search == COLUMNS:
        changes = None if args.budget is None else _changes(args.budget, len(bundle.info.columns))
        cf = counterfactual(bundle, sample.raw, to, budget=changes, search=COLUMNS, fixed=tuple(args.fixed or ()))
    else:
        budget = None if args.budget is None else _edits(args.budget)
        cf = counterfactual(
            bundle,
            sample.raw,
            to,
            budget=budget,
            candidates=args.candidates,
            deletions=not args.no_deletions,
            substitutions=not args.no_substitutions,
        )
    print(f"{sample.description}: {cf.summary()}")
    if cf.row is not None:
        print("changed row: " + adapter_of(bundle.modality).one_line(cf.row, bundle.info))
    if cf.text is not None:
        print(f"edited text: {cf.text}")
    if cf.note:
        print(f"note: {cf.note}", file=sys.stderr)
    if args.out is not None:
        out = Path(args.out).expanduser()
        make_out_folder(out)
        try:
            if cf.result is not None:
                _write_images(out, cf.result)
            write_result(out, "counterfactual.json", *_document("counterfactual", args, run, sample, cf))
        except OSError as err:
            raise ExplainError(f"Cannot write into {out}: {err.strerror or err}.") from None
        print(f"written to {out}")
    return 0 if cf.found else 1


def _changes(text: str, columns: int) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ExplainError(
            f"--budget {text!r}: for a table model give the most changed columns, a whole number."
        ) from None
    if not 1 <= n <= columns:
        raise ExplainError(f"--budget {n}: for this table allow between 1 and {columns} changed columns.")
    return n


def _edits(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ExplainError(
            f"--budget {text!r}: for a text model give the most word edits, a whole number 1..50."
        ) from None
    if not 1 <= n <= 50:
        raise ExplainError(f"--budget {n}: for a text model allow between 1 and 50 word edits.")
    return n


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="run id (xaidash runs), run folder, or 'latest'")
    p.add_argument(
        "--input",
        required=True,
        help="test:N or train:N (a sample of the run's data set; also dataset:N), an image path; for text models the text or a .txt file",
    )
    p.add_argument("--out", help="folder to write the JSON and PNGs into (created)")
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument("--seed", type=int_range(0, 2**32 - 1), default=0, help="seed for random starts (default 0)")


def _default_attack(attacks: list[AttackSpec]) -> str | None:
    """The first iterative attack (the stronger search), else the first one."""
    return next((s.id for s in attacks if s.iterative), attacks[0].id if attacks else None)


def add_commands(sub: argparse._SubParsersAction) -> None:
    _add_attack(sub)
    _add_counterfactual(sub)


def _add_attack(sub: argparse._SubParsersAction) -> None:
    attacks = list_attacks()
    listing = "; ".join(f"{s.id}: {s.label}, {s.description} [{'/'.join(s.modalities)}; {s.library}]" for s in attacks)
    p = sub.add_parser(
        "attack",
        help="attack one image within a pixel budget and see how its prediction and explanations change",
        description="Perturbs one input within an L-infinity budget (pixel units, before normalisation) and prints "
        "the prediction before and after; --explain METHODS compares each method's map before and after (Spearman "
        f"rank correlation, overlap of the top 5 percent). Attacks: {listing}. Text models: {text_note()}",
    )
    _common(p)
    p.add_argument(
        "--attack",
        choices=[s.id for s in attacks],
        default=_default_attack(attacks),
        help="which attack (default %(default)s)",
    )
    p.add_argument(
        "--epsilon",
        default=f"{round(EPSILON.default * 255)}/255",
        help="the budget: the most any pixel value (0..1) may change, as 0.03 or 8/255 (default %(default)s)",
    )
    p.add_argument("--steps", type=int_range(1, 500), help="gradient steps, for attacks that take several (PGD: 10)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="an attack parameter, repeatable")
    p.add_argument("--target", help="aim at this class (index or name) instead of away from the prediction")
    p.add_argument(
        "--explain", metavar="METHODS", help="comma-separated method ids whose maps are compared before/after"
    )
    p.set_defaults(func=lambda a: one_line_errors(_attack, a))


def _add_counterfactual(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "counterfactual",
        help="the smallest change that makes the model predict a class you pick (images: a minimal adversarial "
        "example, or a patch counterfactual you can see)",
        description="Images, --search perturbation (default): a minimal adversarial example: a targeted attack with "
        "a bisection over epsilon gives the smallest budget (pixel units) found at which the model predicts --to, "
        "usually a change of every pixel too small to see (the summary says whether any pixel moved by 16/255 or "
        "more). Images, --search patch: a patch counterfactual: the same attack with no limit on the pixel values "
        "but confined to one square patch where the class's gradient is largest, grown until the model predicts "
        "--to (--budget: the largest patch side as a share of the image's, default 0.5). Text: the fewest word "
        "deletions or substitutions from the model's vocabulary (greedy), or none within --budget edits. Table rows: "
        "the fewest changed columns (a beam search over values the training rows take), --budget the most changed "
        "columns, --fixed COLUMN left as it is; a model that predicts a number: --to is the range of values to reach "
        "('at most 100', 'at least 200', 'between 100 and 150', or 'default': past the training median to the "
        "other side). Exit code 1 when none was found.",
    )
    _common(c)
    c.add_argument(
        "--to",
        required=True,
        help="the class to reach (index or name); for a model that predicts a number the range of values to reach "
        "('at most 100', 'at least 200', 'between 100 and 150', or 'default': past the training median)",
    )
    c.add_argument(
        "--budget",
        help=f"images: the largest epsilon tried, as 0.1 or 25/255 (default {DEFAULT_BUDGET}); with --search patch "
        f"the largest patch side as a share of the image's (default 0.5); text: the most word edits (default "
        f"{DEFAULT_EDITS}); tables: the most changed columns (default {DEFAULT_CHANGES})",
    )
    c.add_argument(
        "--search",
        choices=[PERTURBATION, PATCH],
        help="images: perturbation (a minimal adversarial example, the default) or patch (a patch counterfactual)",
    )
    c.add_argument(
        "--attack", choices=counterfactual_attacks("image"), help="images: the targeted attack (default: PGD)"
    )
    c.add_argument(
        "--steps", type=int_range(1, 500), default=DEFAULT_STEPS, help="images: steps per attack (default %(default)s)"
    )
    c.add_argument(
        "--candidates",
        type=int_range(1, 1000),
        default=DEFAULT_CANDIDATES,
        help="text: vocabulary words tried at each position (default %(default)s)",
    )
    c.add_argument("--no-deletions", action="store_true", help="text: substitutions only")
    c.add_argument("--no-substitutions", action="store_true", help="text: deletions only")
    c.add_argument(
        "--fixed",
        action="append",
        metavar="COLUMN",
        help="tables: a column the counterfactual leaves as it is (repeatable)",
    )
    c.set_defaults(func=lambda a: one_line_errors(_counterfactual, a))
