"""Model-parameter randomisation test (Adebayo et al. 2018, "Sanity checks for saliency maps").

Cascading randomisation: on a deep copy of the model, the weight layers are re-initialised one
at a time from the output layer down to the input; after each step every method's map is
recomputed and compared with the map of the trained model. A method whose maps stay similar
while the weights it explains are destroyed is not explaining the model.

Similarity is the Spearman rank correlation per input, averaged over the inputs, on absolute
values by default (as in the paper's figures: sign flips after randomisation are common and not
what the test is about); `absolute=False` compares signed maps. SSIM on maps scaled to [0, 1]
is added for images when asked (`ssim=True`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.data.errors import error_text
from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import map_ssim, nanmean, spearman
from xaidash.explainers.metrics.spread import is_constant, spread
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

_NORM_LAYERS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm)


@dataclass
class SanityResult:
    """rows: one dict per (method, step): method, step, layer, spearman (the mean over the inputs whose maps
    rank something), spearman_std, ssim (or None), and the spread over the inputs: n (inputs), constant (how
    many of them had a constant map, trained or randomised, so no correlation: they are counted here, not
    silently dropped), spearman_low/spearman_high (95% interval of the mean), spearman_min/spearman_max,
    values (the per-input correlations, NaN for a constant map) and ssim_values.
    Step 0 is the trained model; step k has the top k layers randomised, `layer` the last one re-initialised.
    maps[method][k] holds the maps after step k (maps[method][0]: the trained model's)."""

    rows: list[dict[str, Any]]
    layers: list[str]
    maps: dict[str, list[Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)


def weight_layers(model: nn.Module, example: torch.Tensor, include_norm: bool = False) -> list[str]:
    """Names of the modules holding parameters of their own, in the order a forward pass first calls them."""
    order: list[str] = []
    hooks = []
    for name, module in model.named_modules():
        if not name or not list(module.parameters(recurse=False)):
            continue
        if not include_norm and isinstance(module, _NORM_LAYERS):
            continue
        hooks.append(
            module.register_forward_hook(lambda m, i, o, name=name: order.append(name) if name not in order else None)
        )
    try:
        with torch.no_grad():
            model(example)
    finally:
        for h in hooks:
            h.remove()
    return order


def _reinit(module: nn.Module) -> None:
    """The layer's own initialisation (PyTorch's default for it), or N(0, 0.02) where it has none."""
    reset = getattr(module, "reset_parameters", None)
    if callable(reset):
        reset()
        return
    for p in module.parameters(recurse=False):
        nn.init.normal_(p, std=0.02)


def _maps_for(explanation: Any, absolute: bool) -> list[np.ndarray]:
    maps = [np.asarray(explanation.item(i), dtype=np.float32) for i in range(len(explanation))]
    return [np.abs(m) for m in maps] if absolute else maps


@dataclass(frozen=True)
class _Cascade:
    """What every step of one test shares: the inputs, their fixed targets, each method's parameters and how maps
    are kept and compared."""

    raw: Any
    targets: list[int]
    params: dict[str, dict[str, Any]]
    absolute: bool
    ssim: bool
    keep_maps: bool
    batch_size: int
    seed: int

    def explain(self, bundle: ModelBundle, method: str) -> Explanation:
        kw = self.params.get(method, {})
        return explain(bundle, self.raw, self.targets, method, batch_size=self.batch_size, seed=self.seed, **kw)

    def maps(self, explanation: Explanation) -> list[np.ndarray]:
        return _maps_for(explanation, self.absolute)


def cascading_randomization(
    bundle: ModelBundle,
    inputs: torch.Tensor | np.ndarray | Sequence[str],
    methods: Sequence[str],
    targets: int | Sequence[int] | None = None,
    *,
    params: dict[str, dict[str, Any]] | None = None,
    absolute: bool = True,
    ssim: bool = False,
    include_norm: bool = False,
    max_steps: int | None = None,
    keep_maps: bool = True,
    batch_size: int = 256,
    seed: int = 0,
    trained: dict[str, Any] | None = None,
) -> SanityResult:
    """Run the cascading randomisation test for `methods` on a few inputs (images in [0, 1] or texts).

    Targets default to the trained model's predictions and stay fixed through the cascade.
    `max_steps` evaluates only that many evenly spread steps (the cascade itself always
    randomises every layer above). A method that fails is reported in `errors`, not raised.
    Normalisation layers are left alone unless `include_norm` (the paper randomises weights).
    `trained` may hold {method: Explanation} already computed on the same inputs, targets, parameters and
    seed (the Compare page's): step 0 then reuses them instead of explaining again.
    The model's train/eval flags are as the caller left them afterwards.
    """
    raw = adapter_of(bundle.modality).metric_inputs(bundle, inputs)
    with evaluating(bundle.model):
        x = bundle.prepare(raw)
        if targets is None:
            fixed = [int(v) for v in bundle.predicted(x, batch_size).tolist()]
        else:
            fixed = [int(v) for v in ([targets] * len(x) if isinstance(targets, int) else list(targets))]
        layers = weight_layers(bundle.model, x[:1], include_norm)
        if not layers:
            raise ExplainError(f"{bundle.spec.name} has no weight layers to randomise.")
        cascade = _Cascade(raw, fixed, params or {}, absolute, ssim, keep_maps, batch_size, seed)
        result = SanityResult(rows=[], layers=layers[::-1])
        originals = _trained_maps(result, bundle, methods, cascade, trained or {})
        _randomise(result, bundle, _steps(len(layers), max_steps), originals, cascade)
    return result


def _steps(layers: int, max_steps: int | None) -> list[int]:
    """The cascade steps evaluated: every one, or `max_steps` of them evenly spread."""
    steps = list(range(1, layers + 1))
    if max_steps is not None and max_steps < len(steps):
        steps = sorted({round(float(v)) for v in np.linspace(1, layers, max(1, max_steps))})
    return steps


def _trained_maps(
    result: SanityResult, bundle: ModelBundle, methods: Sequence[str], cascade: _Cascade, trained: dict[str, Any]
) -> dict[str, list[np.ndarray]]:
    """Step 0: each method's maps of the trained model (reused from `trained` where they match), as compared."""
    originals: dict[str, list[np.ndarray]] = {}
    for m in methods:
        try:
            given = trained.get(m)
            reuse = (
                given is not None
                and len(given) == len(cascade.raw)
                and list(map(int, given.targets)) == cascade.targets
            )
            e = given if given is not None and reuse else cascade.explain(bundle, m)
        except Exception as err:  # noqa: BLE001 - one method failing must not stop the others
            result.errors[m] = error_text(err, m, then="the other methods went on")
            continue
        originals[m] = cascade.maps(e)
        if cascade.keep_maps:
            result.maps[m] = [e.attributions]
        result.rows.append(_row(m, 0, "none (trained)", originals[m], originals[m], cascade.ssim))
    return originals


def _randomise(
    result: SanityResult,
    bundle: ModelBundle,
    steps: list[int],
    originals: dict[str, list[np.ndarray]],
    cascade: _Cascade,
) -> None:
    """Steps 1...: on a copy of the model, the layers re-initialised top down, each method's maps recomputed after
    each evaluated step and compared with the trained ones."""
    top_down = result.layers
    randomised = copy.deepcopy(bundle.model).eval()
    rb = replace(bundle, model=randomised)
    cuda = [bundle.device.index or 0] if bundle.device.type == "cuda" else []
    done = 0
    for step in steps:
        with torch.random.fork_rng(devices=cuda):  # reproducible weights without touching the caller's RNG
            for k in range(done, step):
                torch.manual_seed(cascade.seed + 1000 + k)
                _reinit(randomised.get_submodule(top_down[k]))
        done = step
        for m in list(originals):
            try:
                e = cascade.explain(rb, m)
            except Exception as err:  # noqa: BLE001
                result.errors[m] = (
                    f"step {step} ({top_down[step - 1]}): {error_text(err, m, then='the other methods went on')}"
                )
                continue
            if cascade.keep_maps:
                result.maps[m].append(e.attributions)
            result.rows.append(_row(m, step, top_down[step - 1], originals[m], cascade.maps(e), cascade.ssim))


def _row(
    method: str, step: int, layer: str, original: list[np.ndarray], current: list[np.ndarray], ssim: bool
) -> dict[str, Any]:
    rhos = [spearman(a, b) for a, b in zip(original, current, strict=True)]
    constant = sum(1 for a, b in zip(original, current, strict=True) if is_constant(a) or is_constant(b))
    s = spread(rhos)
    row: dict[str, Any] = {
        "method": method,
        "step": step,
        "layer": layer,
        "spearman": nanmean(rhos),
        "spearman_std": float(np.std([r for r in rhos if not np.isnan(r)])) if s.valid else float("nan"),
        "spearman_low": s.low,
        "spearman_high": s.high,
        "spearman_min": s.minimum,
        "spearman_max": s.maximum,
        "n": len(rhos),
        "constant": constant,
        "values": [float(r) for r in rhos],
        "ssim": None,
        "ssim_values": None,
    }
    if ssim:
        per = [map_ssim(a, b) for a, b in zip(original, current, strict=True)]
        values = [v for v in per if v is not None]
        row["ssim"] = float(np.mean(values)) if values else None
        row["ssim_values"] = [float("nan") if v is None else float(v) for v in per]
    return row
