"""Write the manual's lists of methods, models and data sets from the registries.

    python scripts/gen_docs.py           # rewrite every generated block in docs/*.md
    python scripts/gen_docs.py --check   # change nothing; exit 1 naming each stale file

A generated block lies between two markers, each on a line of its own, in a page of docs/:

    <!-- BEGIN GENERATED: methods -->
    ...
    <!-- END GENERATED: methods -->

Its name says what fills it (methods, models, datasets); everything between the markers is replaced, and
everything outside them is left as written. Each block must appear in at least one page.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Markers count on a line of their own (a page may quote one in running text).
BLOCK = re.compile(
    r"^(?P<begin><!-- BEGIN GENERATED: (?P<name>[\w-]+) -->\n)(?P<body>.*?)^(?P<end><!-- END GENERATED: (?P=name) -->)$",
    re.S | re.M,
)
MARKER = re.compile(r"^<!-- (BEGIN|END) GENERATED: ([\w-]+) -->$", re.M)

# What attributions add up to, f(x) - f(reference), per declared reference (explainers/registry.py: Reference).
REFERENCES = {
    "baseline": "f(baseline)",
    "background": "E f(background)",
    "hidden": "f(all superpixels hidden)",
    "padding_embedding": "f(padding embeddings)",
    "padding_tokens": "f(all padding)",
    "zero": "0",
}
MODALITIES = {"image": "Image", "text": "Text", "table": "Table", "series": "Series", "graph": "Graph"}


def registries() -> tuple[Any, Any, Any]:
    """The three registry modules, with every data set, model and method registered (the packages register
    their members on import)."""
    for package in ("xaidash.data", "xaidash.models", "xaidash.explainers"):
        importlib.import_module(package)
    return (
        importlib.import_module("xaidash.data.registry"),
        importlib.import_module("xaidash.models.registry"),
        importlib.import_module("xaidash.explainers.registry"),
    )


def oneline(text: object) -> str:
    return " ".join(str(text).split())


def cell(text: object) -> str:
    """Text for one table cell: on one line, pipes escaped."""
    return oneline(text).replace("|", "\\|")


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def number(value: float) -> str:
    return f"{value:g}"


# --- methods --------------------------------------------------------------------------------------------------


def describe_param(p: Any) -> str:
    """'`steps`: integer from 2 to 1000, default 50. Points on the path ...' from a Param schema."""
    kind = {"int": "integer", "float": "number"}.get(p.kind, p.kind)
    if p.kind in ("int", "float"):
        if p.min is not None and p.max is not None:
            what = f"{kind} from {number(p.min)} to {number(p.max)}"
        elif p.min is not None:
            what = f"{kind} ≥ {number(p.min)}"
        elif p.max is not None:
            what = f"{kind} ≤ {number(p.max)}"
        else:
            what = kind
    elif p.kind == "choice":
        what = "one of " + ", ".join(f"`{c}`" for c in p.choices)
    elif p.kind == "bool":
        what = "true or false"
    elif p.kind == "layer":
        what = "a layer of the model"
    else:
        what = p.kind
    if p.kind == "layer" and p.default is None:
        default = "default: the model's own (its spec's `last_conv`)"
    else:
        default = f"default `{p.default}`"
    help_text = f" {p.help}" if p.help else ""
    return f"`{p.name}`: {what}, {default}.{help_text}"


def background_rule(spec: Any) -> str:
    """When a method compares against training samples, worked out from its `needs_background` rule by trying
    its defaults and every value of its choice and bool parameters."""
    defaults = {p.name: p.default for p in spec.params}
    base = bool(spec.needs_background(defaults))
    tries = [
        (p.name, value)
        for p in spec.params
        for value in (p.choices if p.kind == "choice" else (True, False) if p.kind == "bool" else ())
    ]
    flips = [
        f"`{name}={value}`" for name, value in tries if bool(spec.needs_background({**defaults, name: value})) != base
    ]
    if not flips:
        return "yes" if base else "no"
    return ("yes, unless " if base else "with ") + " or ".join(flips)


def sums_to(spec: Any) -> str:
    c = spec.completeness
    if c is None:
        return "nothing declared"
    reference = REFERENCES.get(c.reference, f"f({c.reference})")
    gap = f" (gap: `{c.diagnostic}`)" if c.diagnostic else ""
    return f"f(x) − {reference}, one value per {c.unit}{gap}"


def explains(spec: Any) -> str:
    none = {"attention": "attention weights (no output)", "activations": "layer activations (no output, no class)"}
    return none.get(spec.output, spec.output)


def methods_block() -> str:
    _, _, methods = registries()
    lines: list[str] = []
    for modality, title in MODALITIES.items():
        specs = sorted(methods.list_methods(modality), key=lambda s: s.id)
        if not specs:
            continue
        lines += [f"**{title} methods** ({len(specs)})", ""]
        lines += table(
            ["id", "method", "family", "explains", "attributions sum to", "signed", "needs training samples"],
            (
                [
                    f"`{s.id}`",
                    s.label,
                    s.family,
                    explains(s),
                    sums_to(s),
                    "yes" if s.signed else "no",
                    background_rule(s),
                ]
                for s in specs
            ),
        )
        lines += ["", f"{title} methods and their parameters:", ""]
        for s in specs:
            lines.append(f"- **`{s.id}`** ({s.label}): {oneline(s.description) or 'no description.'}")
            lines += [f"    - {oneline(describe_param(p))}" for p in s.params]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --- models ---------------------------------------------------------------------------------------------------


def recipes_text(spec: Any) -> str:
    """Data sets the model has a recipe for, with the accuracy (or R²) the recipe reached when tested; bold where the
    recipe is the data set's recommended one. The generic recipe (keyed by modality) is listed last."""
    out, generic = [], []
    for key, recipe in spec.recipes.items():
        if key in MODALITIES:
            generic.append(f"any other {key} data (generic)")
            continue
        acc = getattr(recipe, "expected_acc", None)
        name = f"**{key}**" if getattr(recipe, "recommended", False) else key
        r2 = getattr(recipe, "expected_r2", None)  # a number to predict: its test R²
        score = f"{100 * acc:.1f}%" if acc is not None else f"R² {r2:.3f}" if r2 is not None else "not measured"
        out.append(f"{name} ({score})")
    return ", ".join(out + generic) or "none"


def explainer_facts(spec: Any) -> str:
    facts = []
    if spec.last_conv:
        facts.append(f"Grad-CAM on `{spec.last_conv}`")
    if spec.gap_classifier:
        facts.append(f"CAM (`{spec.gap_classifier}` after global average pooling)")
    if spec.attention:
        facts.append(f"attention in {len(spec.attention)} layer{'s' if len(spec.attention) != 1 else ''}")
    if spec.embedding:
        facts.append(f"embedding `{spec.embedding}`")
    facts.append("DeepLift and DeepSHAP" if spec.deeplift_ok else "no DeepLift or DeepSHAP")
    return "; ".join(facts)


def models_block() -> str:
    _, models, _ = registries()
    specs = sorted(models.list_models(), key=lambda s: (list(MODALITIES).index(s.modality), s.name))
    lines = table(
        ["model", "modality", "takes", "what explainers read", "pretrained", "recipes (tested accuracy)"],
        (
            [
                f"`{s.name}`",
                s.modality,
                s.input_note or "see its description",
                explainer_facts(s),
                "yes" if s.pretrained else "no",
                recipes_text(s),
            ]
            for s in specs
        ),
    )
    lines += ["", "Bold: the data sets for which the model is the recommended one.", ""]
    lines += [f"- **`{s.name}`**: {oneline(s.description)}" for s in specs]
    return "\n".join(lines) + "\n"


# --- data sets ------------------------------------------------------------------------------------------------


def classes_text(info: Any) -> str:
    if getattr(info, "regression", None) is not None:
        return f"a number: {info.regression.name}"
    if len(info.classes) <= 10:
        return f"{len(info.classes)}: " + ", ".join(info.classes)
    return str(len(info.classes))


def ground_truth(info: Any) -> str:
    if info.has_masks:
        return "pixel masks"
    if info.has_rationales:  # the indices that set the label: words of a text, time steps of a series
        from xaidash.data.modalities import modality_of

        return f"rationale {modality_of(info.modality).units}"
    if info.truth_columns:
        return "the columns that set the label: " + ", ".join(f"`{c}`" for c in info.truth_columns)
    return "none"


def factory_syntax(prefix: str, factory: Callable[..., Any]) -> str:
    """'imagefolder:<path>[?size=N]' from the factory's docstring, else 'prefix:<path>'."""
    found = re.search(rf"'({re.escape(prefix)}:[^']*)'", factory.__doc__ or "")
    return found.group(1) if found else f"{prefix}:<path>"


def datasets_block() -> str:
    data, _, _ = registries()
    infos = sorted(data.list_datasets(), key=lambda i: (not i.builtin, list(MODALITIES).index(i.modality), i.name))
    lines = table(
        ["data set", "modality", "classes", "input", "ground truth", "offline", "what it is"],
        (
            [
                f"`{i.name}`",
                i.modality,
                classes_text(i),
                "x".join(map(str, i.input_shape)) if i.input_shape else "text",
                ground_truth(i),
                "built in" if i.builtin else "under the data root, or downloaded",
                i.description + (f" [Source]({i.source_url})." if i.source_url else ""),
            ]
            for i in infos
        ),
    )
    own = [f"`{factory_syntax(p, data.FACTORIES.get(p).build)}`" for p in data.list_factories()]
    if own:
        lines += ["", "Your own data, read from a path: " + ", ".join(own) + "."]
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "methods": methods_block,
    "models": models_block,
    "datasets": datasets_block,
}


# --- pages ----------------------------------------------------------------------------------------------------


def pages(docs: Path = DOCS) -> list[Path]:
    return sorted(docs.glob("*.md"))


def body(block: str) -> str:
    """What stands between a block's markers: the generated text with a blank line either side."""
    return "\n" + block + "\n"


def render(text: str, blocks: dict[str, str], where: str = "page") -> str:
    """`text` with every generated block's body replaced; ValueError for an unknown or unpaired marker."""
    found = [m.group(2) for m in MARKER.finditer(text)]
    paired = [m.group("name") for m in BLOCK.finditer(text)]
    if len(found) != 2 * len(paired):
        raise ValueError(f"{where}: a generated block's BEGIN and END markers do not pair up")
    unknown = sorted(set(paired) - set(blocks))
    if unknown:
        raise ValueError(f"{where}: unknown generated block(s) {', '.join(unknown)}; known: {', '.join(blocks)}")
    return BLOCK.sub(lambda m: m.group("begin") + body(blocks[m.group("name")]) + m.group("end"), text)


def generate(docs: Path = DOCS) -> list[tuple[Path, str, str, list[str]]]:
    """(page, its text, its text with every generated block up to date, the names of the blocks that were
    stale) for every page holding a generated block; ValueError for a broken marker or a missing block."""
    blocks = {name: make() for name, make in GENERATORS.items()}
    out = []
    seen: set[str] = set()
    for page in pages(docs):
        text = page.read_text(encoding="utf-8")
        if not MARKER.search(text):
            continue
        wanted = render(text, blocks, str(page.relative_to(docs.parent)))
        held = [(m.group("name"), m.group("body")) for m in BLOCK.finditer(text)]
        seen |= {name for name, _ in held}
        changed = [name for name, current in held if current != body(blocks[name])]
        out.append((page, text, wanted, changed))
    missing = sorted(set(GENERATORS) - seen)
    if missing:
        raise ValueError(f"no page under {docs} holds the generated block(s) {', '.join(missing)}")
    return out


def stale(docs: Path = DOCS) -> list[str]:
    """One message per page whose generated blocks differ from what the registries say (empty: all current)."""
    return [
        f"{page.relative_to(docs.parent)}: generated block(s) {', '.join(changed)} out of date with the registries; "
        "run python scripts/gen_docs.py"
        for page, _, _, changed in generate(docs)
        if changed
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale page")
    ap.add_argument("--docs", type=Path, default=DOCS, help="the folder of pages (default: docs/)")
    args = ap.parse_args(argv)
    try:
        if args.check:
            messages = stale(args.docs)
            for message in messages:
                print(message, file=sys.stderr)
            return 1 if messages else 0
        for page, current, wanted, _ in generate(args.docs):
            if current != wanted:
                page.write_text(wanted, encoding="utf-8")
                print(f"rewrote {page.relative_to(args.docs.parent)}")
    except ValueError as e:
        print(f"gen_docs: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
