"""`explain()`: one entry point for every method, image or text."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import MAX_BATCH_SIZE, ExplainError, check_text_length
from xaidash.explainers.registry import MethodContext, MethodOutput, get_method
from xaidash.explainers.samples import resolve_background
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import synchronize


def predicted_targets(bundle: ModelBundle, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """The predicted class of each prepared input, (N,) long on the device."""
    return bundle.logits(x, batch_size).argmax(1)


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """The model in eval mode (dropout off, batch-norm statistics fixed) inside, every module's
    train/eval flag as the caller left it afterwards."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """torch's generators seeded inside; the caller's torch and NumPy random states restored afterwards
    (shap reseeds NumPy's global generator)."""
    devices = [device] if device.type == "cuda" else []
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield
    finally:
        np.random.set_state(numpy_state)


def _as_targets(
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None, n: int, bundle: ModelBundle, x: torch.Tensor
) -> torch.Tensor:
    if targets is None:
        return predicted_targets(bundle, x)
    t = torch.as_tensor([targets] * n if isinstance(targets, (int, np.integer)) else list(targets), dtype=torch.long)
    if len(t) != n:
        raise ExplainError(f"Got {len(t)} targets for {n} inputs.")
    if ((t < 0) | (t >= bundle.info.num_classes)).any():
        raise ExplainError(f"Target classes must lie in 0..{bundle.info.num_classes - 1}.")
    return t.to(x.device)


def _image_maps(attr: torch.Tensor, hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray | None]:
    """(N, C, H, W) -> channel sum; (N, h, w) coarse maps -> bilinear upsampling to the input size."""
    attr = torch.as_tensor(attr).detach().float()
    channels = None
    if attr.dim() == 4 and attr.shape[1] == 1 and attr.shape[-2:] != hw:
        attr = attr[:, 0]
    if attr.dim() == 4:
        channels = attr.cpu().numpy()
        attr = attr.sum(1)
    if attr.shape[-2:] != hw:
        attr = F.interpolate(attr.unsqueeze(1), size=hw, mode="bilinear", align_corners=False)[:, 0]
    return attr.cpu().numpy().astype(np.float32), channels


def _text_maps(bundle: ModelBundle, texts: list[str], out: MethodOutput) -> tuple[list[np.ndarray], list[list[str]]]:
    """Per-token scores -> per-word scores (word pieces summed), with the words they belong to."""
    from xaidash.data.tokenizer import split_words

    if out.words is not None:
        return [np.asarray(a, dtype=np.float32) for a in out.attributions], out.words
    per_token = torch.as_tensor(out.attributions).detach().float()
    if per_token.dim() == 3:
        per_token = per_token.sum(-1)
    attr = per_token.cpu().numpy()
    maps: list[np.ndarray] = []
    words: list[list[str]] = []
    for i, text in enumerate(texts):
        word_ids = bundle.tokenizer.word_ids(text)
        tokens = bundle.tokenizer.tokens(text)
        ws = split_words(text)
        if all(w is None for w in word_ids) or not ws:
            maps.append(attr[i, : len(tokens)])
            words.append(tokens)
            continue
        scores = np.zeros(max(w for w in word_ids if w is not None) + 1, dtype=np.float32)
        for pos, w in enumerate(word_ids):
            if w is not None and pos < attr.shape[1]:
                scores[w] += attr[i, pos]
        maps.append(scores)
        words.append(ws[: len(scores)])
    return maps, words


def _checked_inputs(bundle: ModelBundle, inputs: torch.Tensor | Sequence[str] | str) -> torch.Tensor | list[str]:
    """Texts as a list, images as (N, C, H, W) float: refused with a message when they cannot be explained."""
    if bundle.modality == "text":
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
        if not texts or any(not t.strip() for t in texts):
            raise ExplainError("Text input is empty: type or upload some text.")
        check_text_length(texts)  # before any method builds perturbed copies of it
        return texts
    images = torch.as_tensor(inputs, dtype=torch.float32)
    images = images.unsqueeze(0) if images.dim() == 3 else images
    if images.dim() != 4 or tuple(images.shape[1:]) != tuple(bundle.info.input_shape):
        raise ExplainError(
            f"Images must have shape {tuple(bundle.info.input_shape)} for this model, got {tuple(images.shape)}; "
            "convert them with xaidash.explainers.inputs.load_image first."
        )
    return images


def explain(
    bundle: ModelBundle,
    inputs: torch.Tensor | Sequence[str] | str,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    method: str = "saliency",
    *,
    batch_size: int = 256,
    background: torch.Tensor | None = None,
    seed: int = 0,
    **params: Any,
) -> Explanation:
    """Explain `inputs` (images (N, C, H, W) or (C, H, W) in [0, 1], or texts) for `targets`
    (default: the predicted classes) with one registered method.

    `background`: prepared training samples for methods that need them (SHAP's gradient/deep
    explainers, the 'mean' baseline); without it such a method gets `samples.default_background`.
    The model is explained in eval mode and left in the mode it was in; randomness comes from `seed`
    alone and the caller's random state is left as it was."""
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ExplainError(f"batch_size={batch_size}: it must be between 1 and {MAX_BATCH_SIZE}.")
    spec = get_method(method, bundle.modality)
    spec.check(bundle)
    resolved = spec.resolve_params(bundle, params)
    raw = _checked_inputs(bundle, inputs)
    background = resolve_background(bundle, spec.needs_background(resolved), background)
    with evaluating(bundle.model), seeded(seed, bundle.device):
        x = bundle.prepare(raw)
        t = _as_targets(targets, len(x), bundle, x)
        ctx = MethodContext(
            bundle=bundle, x=x, targets=t, raw=raw, batch_size=batch_size, background=background, seed=seed
        )
        synchronize(x.device)
        start = time.perf_counter()
        out = spec.compute(ctx, resolved)
        synchronize(x.device)
        seconds = time.perf_counter() - start
    tokens, channels = None, None
    attributions: np.ndarray | list[np.ndarray]
    if isinstance(raw, list):
        attributions, tokens = _text_maps(bundle, raw, out)
    else:
        hw = (int(bundle.info.input_shape[1]), int(bundle.info.input_shape[2]))
        attributions, channels = _image_maps(out.attributions, hw)
    return Explanation(
        method=spec.id,
        params=resolved,
        targets=t.cpu().numpy(),
        attributions=attributions,
        seconds=seconds,
        device=str(x.device),
        modality=bundle.modality,
        tokens=tokens,
        channel_attributions=channels,
        diagnostics={k: [float(v) for v in vals] for k, vals in out.diagnostics.items()},
        segments=None if out.segments is None else np.asarray(out.segments),
    )
