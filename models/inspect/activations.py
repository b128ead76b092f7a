"""Reading what a model computes inside: a layer's activations over many samples, feature maps
of one input, and the first layer's filters.

Activations of N samples are computed in batches on the model's device and cached on disk under
the run folder as safetensors (never pickle), one file per layer, split, N and reduction. The
file records a digest of the weights, so a run trained further (or a bundle of another epoch)
never reads activations of other weights.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from xaidash.data.atomic import atomic_write
from xaidash.data.registry import Split, load_split
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect._trace import example_input, first_tensor, trace
from xaidash.models.registry import ModelError

PENULTIMATE = "penultimate"
Reduce = Literal["auto", "flatten", "mean"]
REDUCES: tuple[str, ...] = ("auto", "flatten", "mean")
MAX_FLAT = 4096  # 'auto' flattens conv maps up to this many values per sample, else averages over positions
Progress = Callable[[int, int], object]  # progress(done, total); what it returns is ignored
CACHE_FOLDER = "inspect"


# ---- which layers ------------------------------------------------------------------------
def classifier_layer(model: nn.Module, x: torch.Tensor) -> str:
    """The path of the last nn.Linear a forward pass calls: the classifier head."""
    linears = [
        c.path for c in trace(model, x[:1] if isinstance(x, torch.Tensor) else x) if isinstance(c.module, nn.Linear)
    ]
    if not linears:
        raise ModelError(f"{type(model).__name__} calls no linear layer: there is no penultimate layer to read.")
    return linears[-1]


def _block_of(path: str) -> str:
    """The numbered block (an item of a ModuleList/Sequential) a module sits in: 'encoder.blocks.0.attn' -> 'encoder.blocks.0'."""
    parts = path.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].isascii() and parts[i].isdigit():  # '²'.isdigit() is True, and no module index
            return ".".join(parts[: i + 1])
    return path


def embedding_layers(bundle: ModelBundle) -> list[str]:
    """Layers whose activations the Embeddings page offers: the penultimate layer (the input of the
    classifier head) first, then the spec's conv layers and the transformer blocks, input to output."""
    out = [PENULTIMATE, *bundle.spec.conv_layers]
    for path in bundle.spec.attention:
        block = _block_of(path)
        if block not in out:
            out.append(block)
    return out


def describe_layer(bundle: ModelBundle, layer: str) -> str:
    if layer == PENULTIMATE:
        return f"penultimate (input of {classifier_layer(bundle.model, example_input(bundle))})"
    return layer


# ---- reading one layer ---------------------------------------------------------------------
def _reduce(t: torch.Tensor, reduce: str, token_mask: torch.Tensor | None) -> torch.Tensor:
    """(N, ...) -> (N, D): flatten, or average over positions (conv maps) / tokens (sequences)."""
    t = t.detach().float()
    if t.dim() == 2:
        return t
    if t.dim() == 3:  # (N, T, D) token states: a mean over the real tokens (lengths vary between batches)
        if reduce == "flatten" and token_mask is not None:
            raise ModelError(
                "Token activations of text cannot be flattened (texts differ in length); use reduce='mean'."
            )
        if reduce == "flatten":
            return t.flatten(1)
        if token_mask is not None and token_mask.shape == t.shape[:2]:
            m = token_mask.to(t.dtype).unsqueeze(-1)
            return (t * m).sum(1) / m.sum(1).clamp_min(1.0)
        return t.mean(1)
    if reduce == "flatten" or (reduce == "auto" and t[0].numel() <= MAX_FLAT):
        return t.flatten(1)
    return t.flatten(2).mean(-1)  # (N, C, H, W) -> (N, C)


class _Reader:
    """Captures one module's output (or, for the penultimate layer, the classifier's input) during forward."""

    def __init__(self, model: nn.Module, layer: str, classifier: str | None):
        self.value: torch.Tensor | None = None
        if layer == PENULTIMATE:
            module = model.get_submodule(classifier or "")
            self.handle = module.register_forward_pre_hook(self._pre)
        else:
            try:
                module = model.get_submodule(layer)
            except AttributeError:
                raise ModelError(f"{type(model).__name__} has no layer {layer!r}.") from None
            self.handle = module.register_forward_hook(self._post)

    def _pre(self, module: nn.Module, inputs: Any) -> None:
        self.value = first_tensor(inputs)

    def _post(self, module: nn.Module, inputs: Any, output: Any) -> None:
        self.value = first_tensor(output)

    def captured(self, layer: str, model_name: str) -> torch.Tensor:
        """The tensor the last forward pass gave the layer; ModelError when the pass did not reach it."""
        if self.value is None:
            raise ModelError(f"Layer {layer!r} was not called in the forward pass of {model_name}.")
        return self.value

    def remove(self) -> None:
        self.handle.remove()


@dataclass
class Activations:
    """features (N, D) float32 for the samples `indices` of `split`, with true and predicted labels."""

    features: np.ndarray
    labels: np.ndarray
    preds: np.ndarray
    indices: np.ndarray
    layer: str
    split: str
    reduce: Reduce
    from_cache: bool = False
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.indices)


def weights_digest(model: nn.Module) -> str:
    """A short hash of every parameter and buffer: the cache key part that ties files to weights."""
    h = hashlib.blake2b(digest_size=12)
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def sample_indices(total: int, n: int, seed: int = 0) -> np.ndarray:
    """`n` of `total` sample indices, a seeded random subset (sorted) so small N still mixes classes; all when n >= total."""
    if n <= 0:
        raise ModelError(f"Ask for at least one sample (got N={n}).")
    if n >= total:
        return np.arange(total, dtype=np.int64)
    gen = torch.Generator().manual_seed(seed)
    return np.sort(torch.randperm(total, generator=gen)[:n].numpy()).astype(np.int64)


def load_samples(bundle: ModelBundle, split: str = "test") -> Split:
    try:
        return load_split(bundle.info.name, split)  # type: ignore[arg-type]
    except Exception as e:  # DatasetError and I/O errors alike: say which data set failed
        raise ModelError(f"Cannot load the {split} split of {bundle.info.name}: {e}") from e


def raw_batch(bundle: ModelBundle, split: Split, indices: np.ndarray) -> Any:
    """These samples of a split as one batch of raw inputs, as the model's adapter reads them (images (B, C, H, W)
    in [0, 1], texts, table rows (B, F))."""
    return bundle.adapter.items(split, [int(i) for i in indices])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def cache_path(run_dir: Path, layer: str, split: str, n: int, reduce: str) -> Path:
    return Path(run_dir) / CACHE_FOLDER / "activations" / f"{_slug(layer)}-{split}-n{n}-{reduce}.safetensors"


def _read_cache(path: Path, digest: str) -> dict[str, torch.Tensor] | None:
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            if (f.metadata() or {}).get("weights") != digest:
                return None
            return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has keys() but no __iter__
    except (SafetensorError, OSError, ValueError):
        return None  # a torn or foreign file: compute again and overwrite it


def _write_cache(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    from safetensors.torch import save_file

    atomic_write(
        path, lambda tmp: save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)
    )


def _check_request(bundle: ModelBundle, layer: str, reduce: str, batch_size: int) -> None:
    """ModelError for an unknown reduction or layer, or a batch size below one."""
    if reduce not in REDUCES:
        raise ModelError(f"Unknown reduction {reduce!r}: choose one of {', '.join(REDUCES)}.")
    if batch_size < 1:
        raise ModelError("Batch size must be at least 1.")
    if layer not in embedding_layers(bundle) and layer != PENULTIMATE:
        try:
            bundle.model.get_submodule(layer)
        except AttributeError:
            raise ModelError(
                f"{bundle.spec.name} has no layer {layer!r}; pick one of {', '.join(embedding_layers(bundle))}."
            ) from None


def _read_features(
    bundle: ModelBundle,
    data: Split,
    indices: np.ndarray,
    layer: str,
    reduce: Reduce,
    batch_size: int,
    progress: Progress | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(features (N, D) float, predicted classes (N,)) of the samples `indices`, `batch_size` at a time."""
    model = bundle.model
    classifier = classifier_layer(model, example_input(bundle)) if layer == PENULTIMATE else None
    reader = _Reader(model, layer, classifier)
    feats, preds = [], []
    try:
        for start in range(0, len(indices), batch_size):
            chunk = indices[start : start + batch_size]
            x = bundle.prepare(raw_batch(bundle, data, chunk))
            logits = model(x)
            value = bundle.adapter.input_rows(x, reader.captured(layer, bundle.spec.name))
            mask = bundle.adapter.padding_mask(x, bundle.tokenizer)
            feats.append(_reduce(value, reduce, mask).cpu())
            preds.append(logits.argmax(1).cpu())
            reader.value = None
            if progress:
                progress(min(start + batch_size, len(indices)), len(indices))
    finally:
        reader.remove()
    return torch.cat(feats).float(), torch.cat(preds).long()


@torch.no_grad()
def compute_activations(
    bundle: ModelBundle,
    layer: str = PENULTIMATE,
    n: int = 1000,
    split: str = "test",
    batch_size: int = 256,
    reduce: Reduce = "auto",
    progress: Progress | None = None,
    use_cache: bool = True,
    samples: Split | None = None,
) -> Activations:
    """Activations of `layer` for `n` samples of the run's `split` (all of it when n exceeds it).

    Conv maps are flattened when small (<= 4096 values) under reduce='auto', else averaged over
    positions; token states are averaged over the real (non-padding) tokens. `progress(done,
    total)` is called after every batch. With `use_cache` and a bundle loaded from a run, the
    result is read from / written to `<run>/inspect/activations/`.
    """
    _check_request(bundle, layer, reduce, batch_size)
    data = samples if samples is not None else load_samples(bundle, split)
    indices = sample_indices(len(data), n)
    model = bundle.model
    model.eval()
    digest = weights_digest(model)
    path = cache_path(bundle.run_dir, layer, split, len(indices), reduce) if bundle.run_dir is not None else None
    if use_cache and path is not None:
        cached = _read_cache(path, digest)
        if cached is not None and np.array_equal(cached["indices"].numpy(), indices):
            if progress:
                progress(len(indices), len(indices))
            return Activations(
                features=cached["features"].numpy(),
                labels=cached["labels"].numpy(),
                preds=cached["preds"].numpy(),
                indices=indices,
                layer=layer,
                split=split,
                reduce=reduce,
                from_cache=True,
                path=path,
            )
    features, pred = _read_features(bundle, data, indices, layer, reduce, batch_size, progress)
    labels = data.labels[torch.as_tensor(indices)].long().cpu()
    if path is not None and use_cache:
        _write_cache(
            path,
            {"features": features, "labels": labels, "preds": pred, "indices": torch.as_tensor(indices)},
            {"weights": digest, "layer": layer, "split": split, "reduce": reduce, "dataset": bundle.info.name},
        )
    return Activations(
        features=features.numpy(),
        labels=labels.numpy(),
        preds=pred.numpy(),
        indices=indices,
        layer=layer,
        split=split,
        reduce=reduce,
        from_cache=False,
        path=path,
    )


@torch.no_grad()
def input_activation(bundle: ModelBundle, raw: Any, layer: str = PENULTIMATE, reduce: Reduce = "auto") -> np.ndarray:
    """The same (1, D) features as `compute_activations` for one input (an image in [0, 1] or a text)."""
    model = bundle.model
    model.eval()
    classifier = classifier_layer(model, example_input(bundle)) if layer == PENULTIMATE else None
    reader = _Reader(model, layer, classifier)
    try:
        x = bundle.prepare([raw] if isinstance(raw, str) else raw)
        model(x)
        mask = bundle.adapter.padding_mask(x, bundle.tokenizer)
        value = bundle.adapter.input_rows(x, reader.captured(layer, bundle.spec.name))
        return _reduce(value, reduce, mask).cpu().numpy()
    finally:
        reader.remove()


# ---- one input's feature maps and the first filters ------------------------------------------
@dataclass
class FeatureMaps:
    path: str
    maps: np.ndarray  # (C, H, W) float32
    shortcut: bool  # on a residual shortcut branch


def _store_first_output(store: dict[str, np.ndarray], path: str) -> Callable[..., None]:
    """A forward hook that keeps the first sample's output of a layer under `path`."""

    def hook(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
        store[path] = output[0].detach().float().cpu().numpy()

    return hook


@torch.no_grad()
def feature_maps(bundle: ModelBundle, image01: torch.Tensor) -> list[FeatureMaps]:
    """The output of every Conv2d for one image (C, H, W) in [0, 1], in forward order."""
    if not bundle.adapter.spatial:
        raise ModelError(f"{bundle.spec.name} is a text model: feature maps are shown for image models.")
    x = bundle.prepare(image01)[:1]
    convs = [c for c in trace(bundle.model, x) if isinstance(c.module, nn.Conv2d)]
    if not convs:
        raise ModelError(f"{bundle.spec.name} has no convolution layer, so it has no feature maps.")
    wanted = {id(c.module): c.path for c in convs}
    captured: dict[str, np.ndarray] = {}
    handles = [
        m.register_forward_hook(_store_first_output(captured, wanted[id(m)]))
        for m in bundle.model.modules()
        if id(m) in wanted
    ]
    try:
        bundle.model.eval()
        bundle.model(x)
    finally:
        for h in handles:
            h.remove()
    return [
        FeatureMaps(c.path, captured[c.path], any(s in c.path.split(".") for s in ("shortcut", "downsample")))
        for c in convs
    ]


@dataclass
class Filters:
    path: str
    kind: str
    weights: np.ndarray  # (out, in, kh, kw)
    note: str


def first_layer_filters(bundle: ModelBundle) -> Filters:
    """The weights of the first layer that reads the image: conv kernels, or a linear layer's
    rows reshaped to the image (an MLP's templates)."""
    if not bundle.adapter.spatial:
        raise ModelError(
            f"{bundle.spec.name} reads token ids: its first layer is an embedding table, not filters on pixels."
        )
    calls = trace(bundle.model, example_input(bundle))
    for c in calls:
        if isinstance(c.module, nn.Conv2d):
            w = c.module.weight.detach().float().cpu().numpy()
            return Filters(c.path, "Conv2d", w, f"{w.shape[0]} filters of {w.shape[1]}x{w.shape[2]}x{w.shape[3]}")
        if isinstance(c.module, nn.Linear):
            shape = tuple(bundle.info.input_shape)
            if c.module.in_features != int(np.prod(shape)):
                break
            w = c.module.weight.detach().float().cpu().numpy().reshape(-1, *shape)
            return Filters(
                c.path,
                "Linear",
                w,
                f"{w.shape[0]} input weights, each reshaped to the {'x'.join(map(str, shape))} image",
            )
    raise ModelError(f"{bundle.spec.name}'s first layer is neither a convolution nor a linear layer on the pixels.")
