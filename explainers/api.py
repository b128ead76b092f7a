"""`explain()`: one entry point for every method, image or text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext, MethodOutput, get_method
from xaidash.models.bundle import ModelBundle


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def predicted_targets(bundle: ModelBundle, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([bundle.model(x[i : i + batch_size]).argmax(1) for i in range(0, len(x), batch_size)])


def _as_targets(
    targets: int | Sequence[int] | torch.Tensor | None, n: int, bundle: ModelBundle, x: torch.Tensor
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
    attr = torch.as_tensor(out.attributions).detach().float()
    if attr.dim() == 3:
        attr = attr.sum(-1)
    attr = attr.cpu().numpy()
    maps, words = [], []
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


def explain(
    bundle: ModelBundle,
    inputs: torch.Tensor | Sequence[str] | str,
    targets: int | Sequence[int] | torch.Tensor | None = None,
    method: str = "saliency",
    *,
    batch_size: int = 256,
    background: torch.Tensor | None = None,
    seed: int = 0,
    **params: Any,
) -> Explanation:
    """Explain `inputs` (images (N, C, H, W) or (C, H, W) in [0, 1], or texts) for `targets`
    (default: the predicted classes) with one registered method."""
    spec = get_method(method, bundle.modality)
    spec.check(bundle)
    resolved = spec.resolve_params(bundle, params)
    if bundle.modality == "text":
        raw = [inputs] if isinstance(inputs, str) else list(inputs)
        if not raw or any(not str(t).strip() for t in raw):
            raise ExplainError("Text input is empty: type or upload some text.")
    else:
        raw = torch.as_tensor(inputs, dtype=torch.float32)
        raw = raw.unsqueeze(0) if raw.dim() == 3 else raw
        if raw.dim() != 4 or tuple(raw.shape[1:]) != tuple(bundle.info.input_shape):
            raise ExplainError(
                f"Images must have shape {tuple(bundle.info.input_shape)} for this model, got {tuple(raw.shape)}; "
                "convert them with xaidash.explainers.inputs.load_image first."
            )
    bundle.model.eval()
    x = bundle.prepare(raw)
    t = _as_targets(targets, len(x), bundle, x)
    ctx = MethodContext(bundle=bundle, x=x, targets=t, raw=raw, batch_size=batch_size, background=background, seed=seed)
    torch.manual_seed(seed)
    _sync(x.device)
    start = time.perf_counter()
    out = spec.compute(ctx, resolved)
    _sync(x.device)
    seconds = time.perf_counter() - start
    tokens, channels = None, None
    if bundle.modality == "text":
        attributions, tokens = _text_maps(bundle, raw, out)
    else:
        attributions, channels = _image_maps(out.attributions, tuple(bundle.info.input_shape[1:]))
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
    )
