"""A detector or segmenter of one's own (`xaidash scenes import --module FILE.py:FACTORY --output FORMAT`): the user's
nn.Module, built by their factory, wrapped so that it answers as every scene model here does (a detector: torchvision's
list of dicts; a segmenter: (B, C + 1, H, W) logits), whatever output format it declares.

The output formats are declared, not guessed: `OUTPUT_FORMATS` says what each one means, and a probe pass at import
checks that the model gives what it declares (one line naming what came instead). The user's model reads images as
(3, H, W) float in [0, 1] (it normalises inside, as torchvision's detection models do). The run records where the
code is (models/external/module_source.py's record) and imports it again whenever the run is loaded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.models.external.module_source import build_user_module
from xaidash.models.registry import ModelError
from xaidash.models.scenes.zoo import SceneModelSpec, SceneTask


@dataclass(frozen=True)
class OutputFormat:
    """One declared output format: the task it is for and what the model must return, in words."""

    id: str
    task: SceneTask
    returns: str


OUTPUT_FORMATS = {
    f.id: f
    for f in (
        OutputFormat(
            "torchvision",
            "detect",
            "model(list of (3, H, W) images) returns one dict per image with boxes (K, 4) as x0, y0, x1, y1 in "
            "pixels, labels (K,) from 1 (0 is the background) and scores (K,): torchvision's detection models",
        ),
        OutputFormat(
            "xyxy_score_class",
            "detect",
            "model((B, 3, H, W)) returns (B, K, 6) or a list of (K, 6) rows x0, y0, x1, y1, score, class index "
            "from 0, after non-maximum suppression (the YOLO style)",
        ),
        OutputFormat(
            "logits", "segment", "model((B, 3, H, W)) returns (B, C + 1, H, W) logits, channel 0 the background"
        ),
        OutputFormat(
            "torchvision_out",
            "segment",
            "model((B, 3, H, W)) returns a dict whose 'out' is (B, C + 1, H, W) logits: torchvision's segmentation "
            "models",
        ),
    )
}


class OwnSceneModel(nn.Module):
    """The user's model (`net`) answering in the scene models' format. Explainers hook `net.<layer>`; every score
    they take stays differentiable (boxes, scores and logits are sliced, never copied out of the graph)."""

    def __init__(self, net: nn.Module, output: str) -> None:
        super().__init__()
        self.net, self.output = net, output

    def forward(self, images: torch.Tensor | Sequence[torch.Tensor]) -> Any:
        items = list(images.unbind(0)) if isinstance(images, torch.Tensor) else list(images)
        if self.output == "torchvision":
            return self.net(items)
        batch = images if isinstance(images, torch.Tensor) else torch.stack(items)
        out = self.net(batch)
        if self.output == "torchvision_out":
            return out["out"] if isinstance(out, dict) else out
        if self.output == "logits":
            return out
        return [_dict_of_rows(rows) for rows in out]


def _dict_of_rows(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """(K, 6) rows x0, y0, x1, y1, score, class from 0 -> torchvision's dict (labels from 1)."""
    return {"boxes": rows[:, :4], "scores": rows[:, 4], "labels": rows[:, 5].round().long() + 1}


def own_spec(record: dict[str, Any]) -> SceneModelSpec:
    """The spec of an imported module: built from the run's record (the code's place, factory and options, the
    output format and the CAM layer inside the user's model). It is never registered: it has no recipe, and only its
    run knows it."""
    output = OUTPUT_FORMATS[str(record["output"])]
    factory = str(record["factory"])

    def build(num_classes: int, image_size: int) -> nn.Module:
        return OwnSceneModel(build_user_module(record), output.id).eval()

    return SceneModelSpec(
        id=f"module:{factory}",
        label=f"{factory} (your module)",
        task=output.task,
        build=build,
        cam_layer=f"net.{record['cam_layer']}",
        description=f"Your {factory} from {record.get('file') or record.get('module')}: {output.returns}.",
        recipe=None,
    )


def check_layer(net: nn.Module, layer: str) -> None:
    """One line when `layer` is not a module path of the user's model, naming its convolution layers."""
    try:
        net.get_submodule(layer)
    except AttributeError:
        convs = [n for n, m in net.named_modules() if isinstance(m, nn.Conv2d)][-6:]
        raise ModelError(
            f"Your model has no layer {layer!r} for the CAMs: give --cam-layer a module path, such as one of its last "
            f"convolutions ({', '.join(convs) or 'none found'})."
        ) from None


def check_output(model: OwnSceneModel, image_size: int, num_classes: int) -> None:
    """One probe pass on a grey image: the output is what the declared format promises (one line when it is not)."""
    output = OUTPUT_FORMATS[model.output]
    try:
        with torch.no_grad():
            got = model([torch.full((3, image_size, image_size), 0.5)])
    except Exception as err:  # noqa: BLE001 - the user's code: its error in one line
        called = "a list of (3, H, W) images" if output.id == "torchvision" else "a (B, 3, H, W) tensor"
        raise ModelError(
            f"Your model failed on a {image_size} px image passed as declared --output {output.id} passes it "
            f"({called}): {plain_message(err)}"
        ) from None
    if output.task == "detect":
        problem = _detection_problem(got, num_classes)
    else:
        problem = _segmentation_problem(got, num_classes, image_size)
    if problem:
        raise ModelError(f"Declared --output {output.id} ({output.returns}), but {problem}.")


def _detection_problem(got: Any, num_classes: int) -> str | None:
    if not isinstance(got, (list, tuple)) or len(got) != 1 or not isinstance(got[0], dict):
        return f"it returned {_shape_words(got)} for one image"
    missing = [k for k in ("boxes", "labels", "scores") if k not in got[0]]
    if missing:
        return f"its dict lacks {', '.join(missing)}"
    boxes, labels = got[0]["boxes"], got[0]["labels"]
    if boxes.dim() != 2 or boxes.shape[-1] != 4 or len(labels) != len(boxes):
        return f"its boxes are {tuple(boxes.shape)} for {len(labels)} labels"
    if len(labels) and not (int(labels.min()) >= 1 and int(labels.max()) <= num_classes):
        return f"its labels run {int(labels.min())}..{int(labels.max())}, not 1..{num_classes}"
    return None


def _segmentation_problem(got: Any, num_classes: int, size: int) -> str | None:
    expected = (1, num_classes + 1, size, size)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != expected:
        return f"it returned {_shape_words(got)}, not logits of shape {expected} (the classes and the background)"
    return None


def _shape_words(got: Any) -> str:
    if isinstance(got, torch.Tensor):
        return f"a tensor of shape {tuple(got.shape)}"
    if isinstance(got, (list, tuple)):
        return f"a {type(got).__name__} of {len(got)} {type(got[0]).__name__ if got else 'items'}"
    return f"a {type(got).__name__}"
