"""Settling what an imported model reads and predicts: its input shape, class names, normalisation, and the
data set it is linked to (`--dataset`).

A data set fits when it holds the model's kind of input, the same number of classes, the same names in
the same order when both name them (a model whose labels are placeholders takes the data set's), and
images of the model's input shape. Images are never resized behind the user's back: a data set of
another size is refused with what to do (an image folder takes `?size=`), except for models that
accept any size (CNNs with global pooling) imported without `--input-shape`, which are then fed the
data set's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, get_info
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import Loaded
from xaidash.models.registry import ModelError

NO_DATASET = "no data set"  # the name an unlinked model's DatasetInfo carries (shown as "on no data set")


def linked_info(options: ImportOptions) -> DatasetInfo | None:
    """The registered data set `--dataset` names (DatasetError with the known names otherwise)."""
    return get_info(options.dataset) if options.dataset else None


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def image_probe(shape: tuple[int, ...], n: int = 2) -> torch.Tensor:
    """A seeded batch of normalised-looking images for probe passes."""
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(0)) * 0.5


def text_probe(tokenizer: object) -> torch.Tensor:
    encode: Callable[[list[str]], torch.Tensor] = getattr(tokenizer, "encode")  # noqa: B009 - the Tokenizer protocol
    return encode(["a short example", "another example text, a little longer"])


@torch.no_grad()
def output_width(model: nn.Module, x: torch.Tensor, what: str) -> int:
    """The number of logits the model returns for probe inputs `x`, or why it cannot be used."""
    try:
        out = model.eval()(x)
    except Exception as e:  # noqa: BLE001 - whatever the model raises, the user must see it
        raise ModelError(f"The model does not run on {what}: {plain_message(e, first_line=True)}") from None
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != len(x):
        shown = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ModelError(f"The model returned {shown} for {what}: it must return logits of shape (N, classes).")
    if not torch.isfinite(out).all():
        raise ModelError(f"The model's logits for {what} are not finite (NaN or inf): check the weights.")
    return int(out.shape[1])


def settle_shape(
    loaded: Loaded, options: ImportOptions, linked: DatasetInfo | None
) -> tuple[tuple[int, ...], list[str]]:
    """The image input shape the run uses, and notes; refuses a linked data set of another shape."""
    shape = tuple(loaded.input_shape)
    notes: list[str] = []
    if linked is None or modality_of(linked.modality).same_inputs(linked.input_shape, shape):
        return shape, notes
    wanted = tuple(linked.input_shape)
    advice = (
        f"link a data set of {shape_text(shape)} images (an image folder: imagefolder:PATH?size={shape[-1]}), "
        "or import the model for the data set's size with --input-shape"
    )
    if options.input_shape:
        raise ModelError(
            f"Data set {linked.name} holds {shape_text(wanted)} images but --input-shape says {shape_text(shape)}: {advice}."
        )
    try:
        output_width(loaded.model, image_probe(wanted), f"{shape_text(wanted)} images")
    except ModelError as e:
        raise ModelError(
            f"Data set {linked.name} holds {shape_text(wanted)} images, the model reads {shape_text(shape)} "
            f"and does not run on the data set's size ({e}). To link them, {advice}."
        ) from None
    notes.append(
        f"fed {shape_text(wanted)} images as data set {linked.name} holds (its own config says {shape_text(shape)})"
    )
    return wanted, notes


def _same(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return [x.strip().lower() for x in a] == [x.strip().lower() for x in b]


def settle_classes(width: int, loaded: Loaded, options: ImportOptions, linked: DatasetInfo | None) -> tuple[str, ...]:
    """The run's class names: given, the model's own, or the linked data set's; refused when they contradict."""
    if options.classes and len(options.classes) != width:
        raise ModelError(
            f"The model has {width} outputs but {len(options.classes)} class names were given "
            f"({', '.join(options.classes)}): give exactly {width}."
        )
    names = options.classes or loaded.classes
    if names is not None and len(names) != width:
        names = None  # the source's names were for another head
    if linked is not None:
        if linked.regression is not None and width != 1:
            raise ModelError(
                f"Data set {linked.name} has a number to predict ({linked.regression.name}) but the model has {width} "
                "outputs: a model of a number has one output, the predicted value in the target's units."
            )
        if linked.num_classes != width:
            raise ModelError(
                f"Data set {linked.name} has {linked.num_classes} classes ({', '.join(linked.classes)}) but the model "
                f"has {width} outputs: link a data set with the model's classes."
            )
        if names and not _same(tuple(names), tuple(linked.classes)):
            order = (
                " (the same names in another order: class i of the model must be class i of the data)"
                if sorted(n.lower() for n in names) == sorted(n.lower() for n in linked.classes)
                else ""
            )
            raise ModelError(
                f"The model's classes and data set {linked.name}'s differ{order}:\n"
                f"  model:    {', '.join(names)}\n  data set: {', '.join(linked.classes)}\n"
                "Link a data set with these classes, or give the model's names with --classes if its labels are wrong."
            )
        return tuple(linked.classes)
    return tuple(names) if names else tuple(str(i) for i in range(width))


def check_normalisation(mean: tuple[float, ...], std: tuple[float, ...], channels: int) -> None:
    if bool(mean) != bool(std):
        raise ModelError("Give both --mean and --std (one value per channel), or neither.")
    for what, values in (("--mean", mean), ("--std", std)):
        if values and len(values) != channels:
            raise ModelError(f"{what} has {len(values)} values but the images have {channels} channels.")
    if std and min(std) <= 0:
        raise ModelError(f"--std values must be positive, got {std}.")


@dataclass(frozen=True)
class Inputs:
    """What the run's DatasetInfo says: the linked data set's, or the model's own description of its inputs."""

    info: DatasetInfo
    has_dataset: bool


def run_info(loaded: Loaded, classes: tuple[str, ...], shape: tuple[int, ...], linked: DatasetInfo | None) -> Inputs:
    if linked is not None:
        return Inputs(replace(linked, classes=classes), True)
    info = DatasetInfo(
        name=NO_DATASET,
        modality=loaded.modality,
        classes=classes,
        input_shape=shape,
        mean=loaded.mean,
        std=loaded.std,
        description=f"the inputs of {loaded.name}: no data set linked (uploads and typed text only)",
    )
    return Inputs(info, False)
