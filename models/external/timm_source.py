"""`timm:NAME`: a timm architecture with the user's weights (`--weights FILE`), or timm's pretrained weights
when they are cached or downloadable.

`--option KEY=VALUE` passes keyword arguments to `timm.create_model` (e.g. `img_size=32` for a ViT
trained at another size): the architecture must be built as it was trained. The input size and
normalisation come from the model's pretrained config (`timm.data.resolve_model_data_config`), a
vision transformer's fixed `img_size` taking precedence over the config's size. Vision transformers'
attention is read from each block's attention module with timm's fused kernel switched off (it never
materialises the weights).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.paths import offline
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.external.weights import class_count, load_state, read_state_dict
from xaidash.models.registry import ModelError


class TimmAttentionReader:
    """`forward_with_attention` for timm vision transformers: the attention each block computes, read where
    it leaves its dropout (`attn_drop`); hooks live only during the call."""

    def __init__(self, model: Any, module_paths: list[str]):
        self.model = model
        self.module_paths = module_paths

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        found: list[torch.Tensor] = []
        handles = [
            self.model.get_submodule(p).attn_drop.register_forward_hook(lambda m, i, out: found.append(out))
            for p in self.module_paths
        ]
        try:
            logits = self.model(x)
        finally:
            for h in handles:
                h.remove()
        return logits, found


def _attention_paths(model: nn.Module) -> list[str]:
    """timm attention modules that can return their weights: they carry `fused_attn` and an `attn_drop`
    applied to the softmaxed weights (timm's Attention, used by ViT, DeiT, BEiT, EVA, ...)."""
    return [
        path
        for path, m in model.named_modules()
        if hasattr(m, "fused_attn") and isinstance(getattr(m, "attn_drop", None), nn.Module)
    ]


@torch.no_grad()
def attach_attention(model: Any, input_shape: tuple[int, ...]) -> bool:
    """Give a timm vision transformer `forward_with_attention` when every block's attention is global
    ((N, heads, T, T) over all tokens); Swin's windowed attention is left alone. Returns whether it did."""
    paths = _attention_paths(model)
    if not paths:
        return False
    modules: list[Any] = [model.get_submodule(p) for p in paths]
    for m in modules:
        m.fused_attn = False  # the eager path materialises the weights; same result
    reader = TimmAttentionReader(model, paths)
    probe = torch.zeros(2, *input_shape)
    _, weights = reader(probe)
    if len(weights) != len(paths) or any(w.dim() != 4 or w.shape[0] != 2 for w in weights):
        for m in modules:
            m.fused_attn = True
        return False
    model.forward_with_attention = reader  # plain attributes: no module, parameter or hook added
    grid = getattr(getattr(model, "patch_embed", None), "grid_size", None)
    if grid is not None:
        model.grid = tuple(int(g) for g in grid)  # the Attention page lays rollout out on it
    return True


def _create(name: str, pretrained: bool, num_classes: int | None, options: dict[str, Any]) -> nn.Module:
    import timm

    if not timm.is_model(name):
        near = difflib.get_close_matches(name, timm.list_models(), n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else " List them with timm.list_models()."
        raise ModelError(f"timm has no model {name!r}.{hint}")
    kwargs = dict(options)
    if num_classes is not None:
        kwargs["num_classes"] = num_classes
    try:
        return timm.create_model(name, pretrained=pretrained, **kwargs).eval()
    except TypeError as e:
        raise ModelError(f"timm.create_model({name!r}) refused the options {options}: {e}") from None
    except (RuntimeError, OSError, ValueError) as e:
        raise ModelError(f"timm could not build {name!r} (pretrained={pretrained}): {str(e).splitlines()[0]}") from None


def _pretrained_cached(name: str) -> bool:
    """Whether timm's pretrained weights for `name` are in the Hugging Face or torch hub cache."""
    import timm
    from huggingface_hub import try_to_load_from_cache

    cfg = timm.models.get_pretrained_cfg(name) or None
    if cfg is None:
        return False
    hub_id = getattr(cfg, "hf_hub_id", None)
    if hub_id:
        for filename in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin"):
            if isinstance(try_to_load_from_cache(hub_id, filename), str):
                return True
    url = getattr(cfg, "url", None)
    return bool(url) and (Path(torch.hub.get_dir()) / "checkpoints" / Path(str(url)).name).is_file()


def _imagenet_names(num_classes: int) -> tuple[str, ...] | None:
    from timm.data import ImageNetInfo

    if num_classes != 1000:
        return None
    return tuple(d.split(",")[0].strip() for d in ImageNetInfo().label_descriptions())


def _input(model: nn.Module, options: ImportOptions) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
    from timm.data import resolve_model_data_config

    data = resolve_model_data_config(model)
    shape = tuple(int(v) for v in data["input_size"])
    fixed = getattr(getattr(model, "patch_embed", None), "img_size", None)  # ViTs built for one size
    if fixed is not None and not getattr(getattr(model, "patch_embed", None), "dynamic_img_size", False):
        shape = (shape[0], int(fixed[0]), int(fixed[1]))
    return (
        options.input_shape or shape,
        options.mean or tuple(float(v) for v in data["mean"]),
        options.std or tuple(float(v) for v in data["std"]),
    )


def load(argument: str, options: ImportOptions) -> Loaded:
    name = argument
    notes: list[str] = []
    if options.weights is not None:
        state, notes = read_state_dict(options.weights)
        import timm

        cfg = timm.models.get_pretrained_cfg(name) if timm.is_model(name) else None
        head = getattr(cfg, "classifier", None)  # timm names each architecture's classifier
        num_classes = class_count(state, options.classes, head if isinstance(head, str) else None, f"timm {name}")
        model = _create(name, False, num_classes, options.model_options)
        load_state(model, state, f"Weights file {Path(options.weights).name} for timm {name}")
        pretrained = False
    else:
        if offline() and not _pretrained_cached(name):
            raise ModelError(
                f"timm:{name} without --weights needs timm's pretrained weights, which are not cached here while "
                "downloads are off (XAIDASH_OFFLINE / HF_HUB_OFFLINE). Give --weights FILE (your trained "
                "state dict), or download them once on a machine with network."
            )
        model = _create(name, True, None, options.model_options)
        pretrained = True
    num_classes = int(getattr(model, "num_classes", 0) or 0)
    if pretrained and options.classes and len(options.classes) != num_classes:
        raise ModelError(
            f"timm's pretrained {name} has {num_classes} classes, but --classes names {len(options.classes)}: "
            "give --weights with your fine-tuned state dict."
        )
    shape, mean, std = _input(model, options)
    attention = attach_attention(model, shape)
    record = {"name": name, "options": options.model_options, "num_classes": num_classes, "attention": attention}
    return Loaded(
        model=model,
        modality="image",
        name=options.name or f"timm:{name}",
        num_classes=num_classes,
        record=record,
        classes=_imagenet_names(num_classes) if pretrained else None,
        input_shape=shape,
        mean=mean,
        std=std,
        notes=notes + (["timm's pretrained ImageNet weights"] if pretrained else []),
        description=f"timm {name}"
        + (f" ({options.model_options})" if options.model_options else "")
        + (", timm's pretrained weights." if pretrained else ", with imported weights."),
    )


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    model = _create(record["name"], False, int(record["num_classes"]), dict(record.get("options") or {}))
    if record.get("attention"):
        attach_attention(model, tuple(record["input_shape"]))
    return Rebuilt(model)


register(
    ImportSource(
        prefix="timm",
        label="timm architecture",
        argument="NAME",
        help="a timm model name (resnet50, vit_base_patch16_224, convnext_tiny, swin_tiny_patch4_window7_224, ...) with "
        "--weights FILE, or timm's pretrained weights when cached or downloadable; --option KEY=VALUE for "
        "timm.create_model",
        load=load,
        rebuild=rebuild,
    )
)
