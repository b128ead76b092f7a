"""Registry of the methods that explain a detector's box or a segmenter's region.

A scene method is one module of this package that calls `register(SceneMethodSpec(...))`; `api.py` imports every
such module, so whoever reads `SCENE_METHODS` with its entries imports `xaidash.explainers.scenes.api` first. A
method's `compute(ctx, params)` gets the model, one image and the explained outputs (`BoxTarget`s or
`RegionTarget`s) and returns one signed map per target, (K, H, W) at the image's size; `api.explain_scene` does the
rest (timing, one failing method reported in one line, scoring against the ground truth).

What a method is (the tasks it applies to, its parameters, what its values mean, the library call it matches) is
declared on its spec; nothing else decides by a method's id."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, get_args

import torch
import torch.nn.functional as F

from xaidash.data.errors import ExplainError
from xaidash.data.specs import LayerChoices, Param, Registry, Spec
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.models.scenes.zoo import SceneTask

Task = SceneTask  # the models' vocabulary: a scene model detects or segments
TASKS: tuple[Task, ...] = get_args(SceneTask)
SceneProgress = Callable[[float, str], object]  # (fraction done, message), as a session's progress


class _SceneSpecLike(Protocol):
    @property
    def cam_layer(self) -> str: ...


class SceneModelLike(Protocol):
    """What a scene method reads of a model: M's `SceneBundle` is one (tests may pass a stand-in)."""

    @property
    def model(self) -> torch.nn.Module: ...

    @property
    def spec(self) -> _SceneSpecLike: ...

    @property
    def task(self) -> str: ...

    @property
    def classes(self) -> tuple[str, ...]: ...

    @property
    def device(self) -> torch.device: ...


@dataclass
class SceneMethodContext:
    """What a scene method computes on: the model (eval mode, on its device), one image (3, H, W) float in [0, 1]
    on that device, the outputs to explain (all BoxTargets for a detector, all RegionTargets for a segmenter), how
    many images go through the model in one pass (masks, IG steps, ablated channels), progress, and a seed."""

    bundle: SceneModelLike
    image: torch.Tensor
    targets: Sequence[BoxTarget | RegionTarget]
    batch_size: int = 32
    progress: SceneProgress | None = None
    seed: int = 0

    @property
    def model(self) -> torch.nn.Module:
        return self.bundle.model

    @property
    def size(self) -> tuple[int, int]:
        return int(self.image.shape[-2]), int(self.image.shape[-1])

    def layer(self, path: str) -> torch.nn.Module:
        """The model's module at `path` (a CAM's layer); ExplainError naming the path when there is none."""
        try:
            return self.model.get_submodule(path)
        except AttributeError:
            raise ExplainError(f"The model has no layer {path!r}.") from None

    def tell(self, fraction: float, message: str) -> None:
        if self.progress is not None:
            self.progress(fraction, message)


Compute = Callable[[SceneMethodContext, dict[str, Any]], torch.Tensor]


@dataclass(frozen=True)
class SceneMethodSpec(Spec):
    """One scene method. `tasks`: which models it explains ("detect": boxes, "segment": regions). `compute` returns
    (K, H, W) float, one signed map per target, at the image's size. `units` says what a map's values are (the colour
    bar's label) and `signed` whether they can be negative; `reference` the library call it matches (or the paper it follows); `featured` its rank among the
    methods a user gets without choosing (None: never by default)."""

    id: str = ""
    label: str = ""
    tasks: tuple[Task, ...] = ("detect",)
    params: tuple[Param, ...] = ()
    compute: Compute | None = None
    description: str = ""
    reference: str = ""
    units: str = "attribution"
    signed: bool = True  # False: the maps are never negative (CAMs after ReLU): drawn dark to bright from 0
    featured: int | None = None

    def applies(self, task: str) -> bool:
        return task in self.tasks

    def run(self, ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
        """`compute` on `ctx` with `params` resolved, checked to give one map per target at the image's size."""
        if not self.applies(ctx.bundle.task):
            raise ExplainError(f"{self.label} does not explain a {TASK_WORDS.get(ctx.bundle.task, 'model')}.")
        if not ctx.targets:
            raise ExplainError("Nothing to explain: pick a box or a region.")
        if ctx.bundle.task == "detect":
            box_targets(ctx.targets)
        elif ctx.bundle.task == "segment":
            region_targets_of(ctx.targets)
        resolved = self.resolve_params(params, layer_choices(ctx.bundle))
        assert self.compute is not None
        maps = self.compute(ctx, resolved)
        if maps.shape != (len(ctx.targets), *ctx.size):
            raise RuntimeError(f"{self.id} gave maps of shape {tuple(maps.shape)} for {len(ctx.targets)} targets")
        return maps


TASK_WORDS = {"detect": "detector", "segment": "segmenter"}


def _check(spec: SceneMethodSpec) -> None:
    if not spec.id or spec.compute is None:
        raise ValueError("a scene method needs an id and a compute function")
    if not spec.tasks or any(t not in TASKS for t in spec.tasks):
        raise ValueError(f"scene method {spec.id!r}: tasks must be among {TASKS}")


SCENE_METHODS: Registry[SceneMethodSpec] = Registry(
    "scene method",
    error=ExplainError,
    unknown=lambda key, known: f"Unknown scene method {key!r}. Known: {', '.join(known) or 'none'}.",
    check=_check,
)


def register(spec: SceneMethodSpec) -> SceneMethodSpec:
    return SCENE_METHODS.register(spec)


def scene_methods(task: str | None = None) -> list[SceneMethodSpec]:
    """The registered methods, those that explain `task` when given (in registration order)."""
    return SCENE_METHODS.all(None if task is None else (lambda s: s.applies(task)))


def get_scene_method(method_id: str) -> SceneMethodSpec:
    return SCENE_METHODS.get(method_id)


def conv_paths(model: torch.nn.Module) -> tuple[str, ...]:
    """Module paths of the model's conv layers (and their blocks' activations), what a CAM's layer may be."""
    return tuple(
        name
        for name, m in model.named_modules()
        if name and isinstance(m, (torch.nn.Conv2d, torch.nn.ConvTranspose2d, torch.nn.ReLU, torch.nn.Sequential))
    )


def layer_choices(bundle: SceneModelLike) -> LayerChoices:
    """A CAM 'layer' parameter's choices on this model: its conv-like modules, the spec's `cam_layer` by default."""
    paths = conv_paths(bundle.model)
    default = bundle.spec.cam_layer
    return LayerChoices(paths if default in paths else (*paths, default), default, "the model")


def to_image_size(maps: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """(K, h, w) maps bilinearly resized to (K, H, W) (align_corners=False, as pytorch-grad-cam's cv2 resize of a
    coarse map), float32 on the CPU."""
    maps = maps.detach().float()
    if tuple(maps.shape[-2:]) != tuple(size):
        maps = F.interpolate(maps[:, None], size=size, mode="bilinear", align_corners=False)[:, 0]
    return maps.cpu()


def box_targets(targets: Sequence[BoxTarget | RegionTarget]) -> list[BoxTarget]:
    """The targets, refused in one line unless every one is a box."""
    if not all(isinstance(t, BoxTarget) for t in targets):
        raise ExplainError("This method explains detected boxes; a segmenter's regions are explained by others.")
    return [t for t in targets if isinstance(t, BoxTarget)]


def region_targets_of(targets: Sequence[BoxTarget | RegionTarget]) -> list[RegionTarget]:
    """The targets, refused in one line unless every one is a region."""
    if not all(isinstance(t, RegionTarget) for t in targets):
        raise ExplainError("This method explains a segmenter's regions; a detector's boxes are explained by others.")
    return [t for t in targets if isinstance(t, RegionTarget)]
