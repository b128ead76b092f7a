"""`zoo:NAME --weights FILE`: a zoo architecture trained elsewhere (another machine's xaidash run, or your own
training loop around `xaidash.models.build_model`).

The zoo spec is kept as it is (its layers, DeepLift support, normalisation), so everything the zoo
model supports applies. Image models are built for `--input-shape` (or the linked data set's shape);
text models trained from scratch need the word vocabulary they were trained with (`--vocab
vocab.json`, the file their run folder holds), minilm brings its own tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo
from xaidash.data.tokenizer import WordVocab
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.external.weights import class_count, load_state, read_state_dict
from xaidash.models.registry import ModelError, ModelSpec, get_spec

VOCAB_FILE = "vocab.json"  # as a run trained here keeps it
SET_BY_IMPORT = ("vocab_size", "pad_id")  # build options the import sets from --vocab, not checked as the user's


def _info(spec: ModelSpec, classes: tuple[str, ...], shape: tuple[int, ...]) -> DatasetInfo:
    return DatasetInfo(name=f"zoo:{spec.name}", modality=spec.modality, classes=classes, input_shape=shape)


def _tokenizer(spec: ModelSpec, vocab: Path | None) -> tuple[Any, dict[str, Any]]:
    """(tokenizer, build options) of a text zoo model."""
    if spec.tokenizer is not None:
        return spec.tokenizer(), {}
    if vocab is None:
        raise ModelError(
            f"zoo:{spec.name} reads word ids of the vocabulary it was trained with: give --vocab vocab.json "
            "(the file its run folder holds)."
        )
    try:
        tokenizer = WordVocab.load(Path(vocab).expanduser())
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(f"--vocab {vocab}: not a vocabulary xaidash wrote ({e}).") from None
    return tokenizer, {"vocab_size": len(tokenizer), "pad_id": tokenizer.pad_id}


def check(argument: str, options: ImportOptions) -> None:
    """The builder options given, against the zoo model's declared options and their ranges (as for training)."""
    get_spec(argument).check_options({k: v for k, v in options.model_options.items() if k not in SET_BY_IMPORT})


def load(argument: str, options: ImportOptions) -> Loaded:
    spec = get_spec(argument)
    if options.weights is None:
        raise ModelError(f"zoo:{argument} needs --weights FILE: the weights it was trained to elsewhere.")
    state, notes = read_state_dict(options.weights)
    what = f"Weights file {Path(options.weights).name} for zoo {spec.name}"
    classes = options.classes_or_linked()
    n = class_count(state, classes, None, what)
    names = classes or tuple(str(i) for i in range(n))
    tokenizer, build_options = None, dict(options.model_options)
    if spec.pretrained and spec.tokenizer is None:
        build_options.setdefault("pretrained", False)  # the imported weights replace them: nothing to download
    shape: tuple[int, ...] = ()
    if modality_of(spec.modality).tokenized:
        tokenizer, extra = _tokenizer(spec, options.vocab)
        build_options.update(extra)
    else:
        shape = options.shape_or_linked()
        if not shape:
            raise ModelError(
                f"zoo:{spec.name}: give --input-shape (e.g. 3x32x32) or --dataset: the size it was trained at."
            )
    info = _info(spec, names, shape)
    spec.check_fits(info)
    model = spec.build(info, **build_options).eval()
    load_state(model, state, what)
    files = []
    if isinstance(tokenizer, WordVocab):
        files.append(lambda run: tokenizer.save(run / VOCAB_FILE))
    return Loaded(
        model=model,
        modality=spec.modality,
        name=options.name or f"zoo:{spec.name}",
        num_classes=n,
        record={"name": spec.name, "build_options": build_options, "classes": list(names), "input_shape": list(shape)},
        input_shape=shape,
        mean=options.mean or spec.input_mean,
        std=options.std or spec.input_std,
        tokenizer=tokenizer,
        files=files,
        notes=notes,
        spec=spec,
        description=f"{spec.description} Imported with weights trained elsewhere.",
    )


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    spec = get_spec(record["name"])
    info = _info(spec, tuple(record["classes"]), tuple(record.get("input_shape") or ()))
    model = spec.build(info, **dict(record.get("build_options") or {})).eval()
    tokenizer = None
    if modality_of(spec.modality).tokenized:
        tokenizer = spec.tokenizer() if spec.tokenizer is not None else WordVocab.load(run_dir / VOCAB_FILE)
    return Rebuilt(model, tokenizer=tokenizer, spec=spec)


register(
    ImportSource(
        prefix="zoo",
        label="zoo architecture",
        argument="NAME",
        help="a zoo model (xaidash models) trained elsewhere, with --weights FILE; text models trained from scratch "
        "also need --vocab vocab.json",
        load=load,
        rebuild=rebuild,
        needs_weights=True,
        check=check,
    )
)
