"""Finding the layers explainers need in a model xaidash did not build.

One probe pass (forward hooks on every module, then the gradients of a random mix of the logits)
tells, for each module, what it read and returned and whether the output reaches the logits:

- feature layers for CAM methods, as `ModelSpec.conv_layers` with a `FeatureLayout` where needed:
  - convolutional maps, (N, C, h, w) or Swin's channels-last (N, h, w, C): per resolution of the
    map, the module that finishes last at that resolution and crosses at most one step of
    resolution (a stage such as `layer4` or `stages.3`, not the whole trunk, not a bare ReLU);
  - transformer tokens (N, T, C) whose T is a patch grid of the input plus a few leading class or
    distillation tokens: the blocks (items of a ModuleList or Sequential), keeping only those whose
    patch tokens reach the logits (a classifier that reads the class token sees nothing of the
    last block's patch tokens, so Grad-CAM there is zero);
  the default CAM layer is the last of them;
- the classifier after global average pooling (CAM): a linear layer that gives the model's logits
  exactly from the spatial mean of the default layer's maps, checked numerically on the probe. When the
  pooling reads the maps after a parameter-free module that follows the last stage (an `nn.ReLU()` after
  the last convolution, as in `conv -> ReLU -> AdaptiveAvgPool2d(1) -> Flatten -> Linear`), that module
  becomes the default layer; when it reads maps no module returns (a functional `F.relu` after the last
  layer), `Layers.cam_note` says which layer is missing and how to name it with `--layer gradcam=...`;
- for text, the token embedding (the first nn.Embedding that reads the token ids);
- attention modules: the modules returning the attention weights `forward_with_attention` hands back.

Written by hand: torchcam's `locate_candidate_layer` finds one candidate conv layer, but neither it,
captum nor pytorch-grad-cam finds transformer blocks or checks which outputs reach the logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from xaidash.models.registry import FeatureLayout, ModelError

MAX_PREFIX_TOKENS = 8  # class + distillation + register tokens


@dataclass
class Layers:
    """The layers found (or declared) for one model, as config.json stores them."""

    conv_layers: list[str] = field(default_factory=list)
    last_conv: str | None = None
    layouts: dict[str, FeatureLayout] = field(default_factory=dict)  # only those that are not (N, C, h, w)
    gap_classifier: str | None = None
    embedding: str | None = None
    attention: list[str] = field(default_factory=list)
    cam_note: str | None = None  # why no CAM classifier was found and what to do, when an image model has maps

    def to_json(self) -> dict[str, Any]:
        return {
            **({"cam_note": self.cam_note} if self.cam_note else {}),
            "conv_layers": self.conv_layers,
            "last_conv": self.last_conv,
            "layouts": {p: {"kind": v.kind, "prefix": v.prefix, "grid": list(v.grid)} for p, v in self.layouts.items()},
            "gap_classifier": self.gap_classifier,
            "embedding": self.embedding,
            "attention": self.attention,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Layers:
        layouts = {
            p: FeatureLayout(v["kind"], int(v.get("prefix", 0)), (int(v["grid"][0]), int(v["grid"][1])))
            for p, v in (obj.get("layouts") or {}).items()
        }
        return cls(
            conv_layers=list(obj.get("conv_layers") or []),
            last_conv=obj.get("last_conv"),
            layouts=layouts,
            gap_classifier=obj.get("gap_classifier"),
            embedding=obj.get("embedding"),
            attention=list(obj.get("attention") or []),
            cam_note=obj.get("cam_note"),
        )


@dataclass
class _Call:
    path: str
    module: nn.Module
    start: int
    end: int = -1
    in_hw: tuple[int, int] | None = None
    inp: torch.Tensor | None = None  # the first tensor it read
    out: torch.Tensor | None = None  # the output when it is one tensor (tuples and ModelOutputs: None)
    tensors: list[torch.Tensor] = field(default_factory=list)  # every tensor of the output
    grad: torch.Tensor | None = None
    layout: FeatureLayout | None = None


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _record(model: nn.Module, run: Callable[[], Any]) -> tuple[list[_Call], Any]:
    """Every module's first call during `run()`, in the order calls start, and what `run` returned."""
    calls: dict[int, _Call] = {}
    clock = [0]
    handles = []
    for path, module in model.named_modules():
        if not path:
            continue

        def pre(m: nn.Module, args: Any, path: str = path) -> None:
            if id(m) not in calls:
                first = next(iter(_tensors(args)), None)
                hw = (int(first.shape[-2]), int(first.shape[-1])) if first is not None and first.dim() == 4 else None
                calls[id(m)] = _Call(path, m, clock[0], in_hw=hw, inp=first)
            clock[0] += 1

        def post(m: nn.Module, args: Any, output: Any) -> None:
            call = calls.get(id(m))
            if call is not None and call.end < 0:
                call.end = clock[0]
                call.out = output if isinstance(output, torch.Tensor) else None
                call.tensors = _tensors(output)
            clock[0] += 1

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        result = run()
    finally:
        for h in handles:
            h.remove()
    return sorted(calls.values(), key=lambda c: c.start), result


def _on_grid(h: int, w: int, height: int, width: int) -> bool:
    """Whether an (h, w) map is the input (height, width) divided by one stride (floor or ceil, give or take
    the few pixels unpadded convolutions lose)."""
    if h < 2 or w < 2 or h > height or w > width:
        return False
    for stride in range(1, max(height, width) + 1):
        eh, ew = height / stride, width / stride
        if abs(h - eh) < 1 + 0.02 * eh and abs(w - ew) < 1 + 0.02 * ew:
            return True
        if eh < h - 1:
            break
    return False


def _token_grid(tokens: int, height: int, width: int, prefix_hint: int | None) -> tuple[int, tuple[int, int]] | None:
    """(leading tokens, (rows, cols) of patches) when `tokens` is a patch grid of the input plus a few tokens."""
    prefixes = [prefix_hint] if prefix_hint is not None else range(MAX_PREFIX_TOKENS + 1)
    for k in prefixes:
        n = tokens - k
        for stride in range(1, min(height, width) // 2 + 1):
            for gh, gw in ((height // stride, width // stride), (-(-height // stride), -(-width // stride))):
                if gh >= 2 and gw >= 2 and gh * gw == n:
                    return k, (gh, gw)
    return None


def layout_of(t: torch.Tensor, hw: tuple[int, int], batch: int, prefix_hint: int | None = None) -> FeatureLayout | None:
    """How an output tensor lies on a batch of `batch` inputs of size `hw`; None when it is no feature map of them
    (windowed attention's (N * windows, ...) tensors and pooled (N, C, 1) vectors included)."""
    height, width = hw
    if t.shape[0] != batch:
        return None
    if t.dim() == 4:
        if _on_grid(int(t.shape[2]), int(t.shape[3]), height, width):
            return FeatureLayout("nchw")
        if _on_grid(int(t.shape[1]), int(t.shape[2]), height, width):
            return FeatureLayout("nhwc")
    if t.dim() == 3 and t.is_floating_point() and t.shape[2] > 1:
        found = _token_grid(int(t.shape[1]), height, width, prefix_hint)
        if found is not None:
            return FeatureLayout("tokens", found[0], found[1])
    return None


def _map_hw(call: _Call) -> tuple[int, int]:
    assert call.out is not None and call.layout is not None
    shape = call.out.shape
    return (int(shape[1]), int(shape[2])) if call.layout.kind == "nhwc" else (int(shape[2]), int(shape[3]))


def _has_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _last_per_grid(calls: list[_Call]) -> list[_Call]:
    """Token layers with parameters: per patch grid, the one that finishes last."""
    best: dict[tuple[int, int], _Call] = {}
    for c in calls:
        if (
            c.layout is not None
            and _has_parameters(c.module)
            and (c.layout.grid not in best or c.end > best[c.layout.grid].end)
        ):
            best[c.layout.grid] = c
    return sorted(best.values(), key=lambda c: c.end)


def _grid_stages(calls: list[_Call], hw: tuple[int, int]) -> tuple[list[_Call], dict[str, _Call]]:
    """Per map resolution, the stage that finishes last there (see the module docstring); and every stage."""
    grid = [c for c in calls if c.layout is not None and c.layout.kind != "tokens" and _has_parameters(c.module)]
    levels = sorted({hw[0], *(_map_hw(c)[0] for c in grid)}, reverse=True)
    by_module = {id(c.module): c for c in grid}
    stages: dict[str, _Call] = {}
    for c in grid:
        out_h = _map_hw(c)[0]
        in_h = c.in_hw[0] if c.in_hw is not None and c.in_hw[0] in levels else out_h
        # A trunk (children at several resolutions, or a span of several steps) is left out: its stages are listed.
        if abs(levels.index(in_h) - levels.index(out_h)) <= 1 and not _is_trunk(c, by_module):
            stages[c.path] = c
    best: dict[int, _Call] = {}
    for c in stages.values():
        out_h = _map_hw(c)[0]
        # A stage that downsamples first holds modules still at the previous resolution: they are not stages.
        if any(_map_hw(a)[0] != out_h for a in _ancestors(c.path, stages)):
            continue
        if out_h not in best or c.end > best[out_h].end:
            best[out_h] = c
    return sorted(best.values(), key=lambda c: c.end), stages


def _is_trunk(c: _Call, by_module: dict[int, _Call]) -> bool:
    """Whether the module's sub-blocks (children that hold modules of their own, through ModuleLists) output maps
    at more than one resolution: a trunk of stages (Swin's `layers`), not a stage that downsamples first (whose
    norm and strided conv are single layers)."""
    children: list[nn.Module] = []
    for child in c.module.children():
        children += list(child) if isinstance(child, nn.ModuleList) else [child]  # a ModuleList is never called
    blocks = [m for m in children if id(m) in by_module and any(True for _ in m.children())]
    return len({_map_hw(by_module[id(m)])[0] for m in blocks}) > 1


def _ancestors(path: str, chosen: dict[str, _Call]) -> list[_Call]:
    parts = path.split(".")
    return [chosen[p] for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in chosen]


def _token_blocks(model: nn.Module, calls: list[_Call]) -> list[_Call]:
    """Token layers that are blocks (items of a ModuleList or Sequential); when the blocks return tuples (Hugging
    Face's Swin stages), per patch grid the token layer that finishes last."""
    tokens = [c for c in calls if c.layout is not None and c.layout.kind == "tokens"]
    blocks = []
    for c in tokens:
        parent = c.path.rpartition(".")[0]
        if parent and isinstance(model.get_submodule(parent), (nn.ModuleList, nn.Sequential)):
            blocks.append(c)
    return blocks or _last_per_grid(tokens)


def _reaches_logits(c: _Call) -> bool:
    """Whether the layer's output (its patch tokens, for token layers) changes the logits at all."""
    if c.grad is None:
        return False
    g = c.grad[:, c.layout.prefix :] if c.layout is not None and c.layout.kind == "tokens" else c.grad
    return bool(g.abs().sum() > 0)


def _gap_classifier(model: nn.Module, last: _Call, logits: torch.Tensor) -> str | None:
    """The linear layer that turns the spatial mean of `last`'s maps into the logits, if one does exactly."""
    assert last.out is not None and last.layout is not None
    pooled = last.layout.to_maps(last.out.detach()).float().mean(dim=(2, 3))
    for path, m in model.named_modules():
        if isinstance(m, nn.Linear) and m.in_features == pooled.shape[1] and m.out_features == logits.shape[1]:
            with torch.no_grad():
                guess = m(pooled.to(m.weight.dtype)).float()
            if torch.allclose(guess, logits.detach().float(), rtol=1e-3, atol=1e-4 * (1 + logits.abs().max().item())):
                return path
    return None


def _pooled_after(model: nn.Module, calls: list[_Call], last: _Call, logits: torch.Tensor) -> tuple[_Call, str] | None:
    """A module called after `last` that outputs maps of the same shape whose spatial mean a linear layer turns into
    the logits (an `nn.ReLU()` module after the last convolution), and that linear layer."""
    assert last.out is not None
    for c in sorted(calls, key=lambda c: c.end):
        if (
            c.end > last.end
            and c.out is not None
            and c.layout is not None
            and c.layout.kind == last.layout.kind  # type: ignore[union-attr]
            and c.out.shape == last.out.shape
        ):
            fc = _gap_classifier(model, c, logits)
            if fc is not None:
                return c, fc
    return None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.float(), b.float(), rtol=1e-3, atol=1e-4 * (1 + b.abs().max().item())
    )


FUNCTIONAL_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F.relu": torch.relu,
    "F.gelu": nn.functional.gelu,
    "F.silu": nn.functional.silu,
    "F.relu6": nn.functional.relu6,
    "torch.sigmoid": torch.sigmoid,
}


def _cam_note(calls: list[_Call], last: _Call, logits: torch.Tensor) -> str:
    """Why no linear layer reads the global average of maps a module returns, and what the user can do."""
    assert last.out is not None and last.layout is not None
    heads = [c for c in calls if isinstance(c.module, nn.Linear) and c.out is not None and _close(c.out, logits)]
    fix = (
        "give it a module of its own (e.g. `self.act = nn.ReLU()` in `__init__` and `x = self.act(x)` in `forward`), "
        "then import again: the maps are found by themselves, or name the module with `--layer gradcam=act` (the "
        "Import page's Grad-CAM layer field)"
    )
    if not heads:
        return (
            "CAM needs global average pooling followed by one linear layer that gives the logits; no nn.Linear module "
            "gives this model's logits. Grad-CAM works without it."
        )
    fc = heads[-1]
    pooled = fc.inp
    maps = last.layout.to_maps(last.out.detach()).float()
    if pooled is None or pooled.dim() != 2 or pooled.shape[1] != maps.shape[1]:
        read = "nothing" if pooled is None else f"{tuple(pooled.shape[1:])}-shaped input"
        return (
            f"CAM needs global average pooling followed by one linear layer: the classifier `{fc.path}` reads {read}, "
            f"not the global average of the {maps.shape[1]} maps of `{last.path}` (the last feature layer found). "
            "Grad-CAM works without it; if the pooled maps come from another module, name it with "
            "`--layer gradcam=PATH`."
        )
    for name, fn in FUNCTIONAL_ACTIVATIONS.items():
        if _close(fn(maps).mean(dim=(2, 3)), pooled):
            return (
                f"CAM: `{fc.path}` reads the global average of {name}(`{last.path}`'s output), a functional call that "
                f"no module returns, so CAM cannot read the maps it averages. To use CAM, {fix}."
            )
    pools = [
        c
        for c in calls
        if c.inp is not None
        and c.inp.dim() == 4
        and c.out is not None
        and _close(c.inp.mean(dim=(2, 3)).flatten(1), pooled)
    ]
    if pools:
        return (
            f"CAM: `{fc.path}` reads the global average of the maps `{pools[0].path}` pools, but no module returns "
            f"those maps (a functional operation after `{last.path}` computes them). To use CAM, {fix}."
        )
    return (
        f"CAM needs global average pooling followed by one linear layer: `{fc.path}` does not read the global "
        f"average of `{last.path}`'s maps (the last feature layer found). Grad-CAM works without it; if another "
        "module outputs the pooled maps, name it with `--layer gradcam=PATH`."
    )


def _probe(model: nn.Module, x: torch.Tensor, prefix_hint: int | None) -> tuple[list[_Call], torch.Tensor]:
    """Forward `x` with hooks, then the gradients of a random mix of the logits at every feature layer."""
    hw = (int(x.shape[-2]), int(x.shape[-1]))
    model.eval()
    with torch.enable_grad():
        x = x.detach().clone().requires_grad_(x.is_floating_point())
        calls, logits = _record(model, lambda: model(x))
        if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
            raise ModelError(f"The model's forward returned {type(logits).__name__}, not logits of shape (N, classes).")
        for c in calls:
            if c.out is not None and c.out.is_floating_point():
                c.layout = layout_of(c.out, hw, len(x), prefix_hint)
        watched = [c for c in calls if c.layout is not None and c.out is not None and c.out.requires_grad]
        outputs = [c.out for c in watched if c.out is not None]
        if watched:
            mix = torch.randn(logits.shape, generator=torch.Generator().manual_seed(0)).to(logits.device)
            grads = torch.autograd.grad((logits.float() * mix).sum(), outputs, allow_unused=True)
            for c, g in zip(watched, grads, strict=True):
                c.grad = None if g is None else g.detach()
    return calls, logits.detach()


def detect_image_layers(model: nn.Module, x: torch.Tensor) -> Layers:
    """Feature layers, the default CAM layer, the classifier after global average pooling, and the attention
    modules of an image model, from a probe batch `x` (normalised images of the model's input shape)."""
    prefix = getattr(model, "num_prefix_tokens", None)  # timm's vision transformers declare it
    calls, logits = _probe(model, x, prefix if isinstance(prefix, int) else None)
    hw = (int(x.shape[-2]), int(x.shape[-1]))
    best, all_stages = _grid_stages(calls, hw)
    stages = [c for c in best if _reaches_logits(c)]
    # Token layers inside a stage (the blocks of timm's channels-last Swin stages) are the stage's business.
    blocks = [c for c in _token_blocks(model, calls) if _reaches_logits(c) and not _ancestors(c.path, all_stages)]
    chosen = sorted(stages + blocks, key=lambda c: c.end)
    layers = Layers(
        conv_layers=[c.path for c in chosen],
        last_conv=chosen[-1].path if chosen else None,
        layouts={c.path: c.layout for c in chosen if c.layout is not None and c.layout.kind != "nchw"},
    )
    if chosen:
        layers.gap_classifier = _gap_classifier(model, chosen[-1], logits)
        if layers.gap_classifier is None:
            found = _pooled_after(model, calls, chosen[-1], logits)
            if found is not None:  # the maps the pooling reads: the last layer's, after a module such as nn.ReLU()
                after, layers.gap_classifier = found
                layers.conv_layers[-1] = layers.last_conv = after.path
            elif chosen[-1].layout is not None and chosen[-1].layout.kind != "tokens":
                layers.cam_note = _cam_note(calls, chosen[-1], logits)
    layers.attention = attention_modules(model, x)
    return layers


def feature_layout(model: nn.Module, x: torch.Tensor, path: str) -> FeatureLayout:
    """The layout of one named layer's output (a user's --layer gradcam=PATH), or why it is no feature map."""
    calls, _ = _probe(model, x, getattr(model, "num_prefix_tokens", None))
    call = next((c for c in calls if c.path == path), None)
    if call is None:
        raise ModelError(f"Layer {path!r} is not called by the model's forward pass.")
    if call.out is None:
        raise ModelError(f"Layer {path!r} returns several tensors; pick a module that returns one feature map.")
    if call.layout is None:
        raise ModelError(
            f"Layer {path!r} outputs {tuple(call.out.shape)}: not feature maps (N, C, h, w) or (N, h, w, C) of the "
            "input, nor transformer tokens on its patch grid."
        )
    return call.layout


def gap_classifier_for(model: nn.Module, x: torch.Tensor, path: str, layout: FeatureLayout) -> str | None:
    """The linear layer reading the spatial mean of `path`'s maps (see `detect_image_layers`), if one does exactly."""
    calls, logits = _probe(model, x, getattr(model, "num_prefix_tokens", None))
    call = next((c for c in calls if c.path == path and c.out is not None), None)
    if call is None:
        return None
    call.layout = layout
    return _gap_classifier(model, call, logits)


def detect_text_layers(model: nn.Module, ids: torch.Tensor) -> Layers:
    """The token embedding (the first nn.Embedding reading the ids) and the attention modules of a text model."""
    seen: list[str] = []
    handles = []
    for path, m in model.named_modules():
        if isinstance(m, nn.Embedding):

            def hook(mod: nn.Module, args: Any, path: str = path) -> None:
                first = next(iter(_tensors(args)), None)
                if first is not None and first.shape == ids.shape and torch.equal(first, ids):
                    seen.append(path)

            handles.append(m.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            model.eval()(ids)
    finally:
        for h in handles:
            h.remove()
    return Layers(embedding=seen[0] if seen else None, attention=attention_modules(model, ids))


def attention_modules(model: nn.Module, x: torch.Tensor) -> list[str]:
    """One module per layer whose output holds the attention weights `forward_with_attention` returns (the
    innermost such module); [] for models without it."""
    reader = getattr(model, "forward_with_attention", None)
    if not callable(reader):
        return []
    declared = getattr(reader, "module_paths", None)  # readers that hook known modules say which
    if declared:
        return list(declared)
    with torch.no_grad():
        calls, result = _record(model, lambda: reader(x))
    paths = []
    for a in result[1]:
        holders = [c for c in calls if any(t is a for t in c.tensors)]
        if holders:
            paths.append(max(holders, key=lambda c: c.start).path)
    return paths


@torch.no_grad()
def attention_grid(model: nn.Module, x: torch.Tensor) -> tuple[int, int] | None:
    """(rows, cols) of the patch grid behind the attention of an image model, from its token count."""
    reader = getattr(model, "forward_with_attention", None)
    if not callable(reader):
        return None
    _, weights = reader(x)
    found = _token_grid(
        int(weights[0].shape[-1]), int(x.shape[-2]), int(x.shape[-1]), getattr(model, "num_prefix_tokens", None)
    )
    return None if found is None else found[1]


def check_layer(model: nn.Module, path: str, what: str) -> None:
    """Refuse a module path the model does not have, suggesting near names."""
    try:
        model.get_submodule(path)
    except AttributeError:
        import difflib

        names = [n for n, _ in model.named_modules() if n]
        near = difflib.get_close_matches(path, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise ModelError(f"{what}: the model has no module {path!r}.{hint}") from None


def layout_summary(layout: FeatureLayout | None) -> str:
    """'tokens: 1 leading + 14x14 patches' / 'channels last' / 'feature maps' for messages and the Import page."""
    if layout is None or layout.kind == "nchw":
        return "feature maps"
    if layout.kind == "nhwc":
        return "channels-last feature maps"
    h, w = layout.grid
    lead = f"{layout.prefix} leading + " if layout.prefix else ""
    return f"tokens ({lead}{h}x{w} patches)"
