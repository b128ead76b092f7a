"""captum's infidelity (Yeh et al. 2019) and max-sensitivity, wired to `explain()`.

infidelity: E[(I . attr - (f(x) - f(x - I)))^2] over random perturbations I, with f the target
logit. Explanation maps are per pixel (channels summed), so the perturbation here is per pixel
too (the same noise on every channel, in the model's input units) and the map is spread evenly
over the channels: then I . attr is exactly the pixel-level dot product.
sensitivity_max: the largest relative change of the map when the image moves by at most
`radius` (uniform, L-infinity, in [0, 1] pixel units), recomputed with `explain()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from captum.metrics import infidelity, sensitivity_max

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import image_batch, image_maps, target_tensor
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


def _examples_per_batch(n: int, n_perturb_samples: int, batch_size: int) -> int:
    """captum's max_examples_per_batch counts inputs x samples and must lie in [n, n * samples]."""
    return int(min(max(batch_size, n), n * n_perturb_samples))


def _targets(bundle: ModelBundle, x: torch.Tensor, targets: Any, explanation: Any, batch_size: int) -> torch.Tensor:
    if targets is None and isinstance(explanation, Explanation):
        targets = explanation.targets
    t = target_tensor(targets, len(x), x.device)
    return bundle.predicted(x, batch_size) if t is None else t


def infidelity_score(
    bundle: ModelBundle,
    images: torch.Tensor | np.ndarray,
    attributions: Explanation | np.ndarray | torch.Tensor | None = None,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    method: str | None = None,
    params: dict[str, Any] | None = None,
    n_perturb_samples: int = 16,
    noise_std: float = 0.1,
    normalize: bool = True,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Infidelity per image (lower is better). Pass `attributions`, or `method` (+ `params`) to compute them.

    `normalize=True` rescales the map by the least-squares optimal factor first (captum's
    option), so methods with different units (CAM, gradients) compare fairly.
    """
    if not bundle.adapter.spatial:
        raise ExplainError("infidelity_score is for image models.")
    raw = image_batch(bundle, images)
    x = bundle.prepare(raw)
    if attributions is None:
        if method is None:
            raise ExplainError("Pass attributions or a method to compute them.")
        attributions = explain(bundle, raw, targets, method, batch_size=batch_size, seed=seed, **(params or {}))
    maps = torch.from_numpy(image_maps(attributions)).to(x.device)
    if maps.shape != (x.shape[0], *x.shape[2:]):
        raise ExplainError(f"Attributions have shape {tuple(maps.shape)}; images need {(x.shape[0], *x.shape[2:])}.")
    c = x.shape[1]
    spread = (maps.unsqueeze(1) / c).expand_as(x).contiguous()
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def perturb(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.randn((inputs.shape[0], 1, *inputs.shape[2:]), generator=gen) * noise_std
        noise = noise.to(inputs.device, inputs.dtype).expand_as(inputs)
        return noise, inputs - noise

    per_batch = _examples_per_batch(len(x), n_perturb_samples, batch_size)
    with evaluating(bundle.model):
        t = _targets(bundle, x, targets, attributions, batch_size)
        out = infidelity(
            bundle.model,
            perturb,
            x,
            spread,
            target=t,
            n_perturb_samples=n_perturb_samples,
            max_examples_per_batch=per_batch,
            normalize=normalize,
        )
    # A squared error: the normalised form can dip a rounding error below zero.
    return np.maximum(out.detach().float().cpu().numpy(), 0.0)


def sensitivity_max_score(
    bundle: ModelBundle,
    images: torch.Tensor | np.ndarray,
    method: str,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    params: dict[str, Any] | None = None,
    n_perturb_samples: int = 8,
    radius: float = 0.02,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Max-sensitivity per image (lower is more stable): ||map(x') - map(x)|| / ||map(x)||, max over x'.

    The targets stay fixed (those of x) so only the map's response to the input is measured.
    """
    if not bundle.adapter.spatial:
        raise ExplainError("sensitivity_max_score is for image models.")
    raw = image_batch(bundle, images)
    with evaluating(bundle.model):
        t = _targets(bundle, bundle.prepare(raw), targets, None, batch_size)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def perturb(inputs: torch.Tensor, perturb_radius: float) -> torch.Tensor:
        noise = (torch.rand(inputs.shape, generator=gen) * 2 - 1) * perturb_radius
        return (inputs + noise.to(inputs.device, inputs.dtype)).clamp(0.0, 1.0)

    def explanation_func(inputs: torch.Tensor | tuple[torch.Tensor], target: torch.Tensor) -> tuple[torch.Tensor]:
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs  # captum passes a tuple on its first call
        with torch.enable_grad():  # captum calls this under no_grad; gradient methods need autograd
            e = explain(bundle, inputs, target.tolist(), method, batch_size=batch_size, seed=seed, **(params or {}))
        return (torch.from_numpy(image_maps(e)).to(inputs.device),)  # a tuple: captum iterates over it

    per_batch = _examples_per_batch(len(raw), n_perturb_samples, batch_size)
    out = sensitivity_max(
        explanation_func,
        raw,
        perturb_func=perturb,
        perturb_radius=radius,
        n_perturb_samples=n_perturb_samples,
        max_examples_per_batch=per_batch,
        target=t,
    )
    return out.detach().float().cpu().numpy()
