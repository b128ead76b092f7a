"""Explain on the Scenes page: every (target, method) pair through `explain_scene`, each method run once on the
targets the cache lacks (a CAM then shares one forward pass among the boxes), with a progress bar."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard.components.scene_cache import keep, model_lock, stored
from xaidash.dashboard.components.scene_inputs import Scene
from xaidash.dashboard.components.scene_methods import MethodChoice
from xaidash.dashboard.components.scene_targets import target_key
from xaidash.explainers.scenes.api import SceneExplanation, explain_scene
from xaidash.explainers.scenes.targets import SceneTargetSpec
from xaidash.models.scenes.bundle import SceneBundle

Results = dict[int, list[SceneExplanation]]  # target index -> its explanations, in the methods' order


def _result_key(
    key: str, scene: Scene, target: SceneTargetSpec, method: str, choice: MethodChoice, metrics: bool
) -> tuple[object, ...]:
    return ("explain", key, scene.key, target_key(target), method, choice.key(method), metrics)


def request_key(key: str, scene: Scene, targets: list[SceneTargetSpec], choice: MethodChoice, metrics: bool) -> str:
    """What a set of results depends on: the model's weights, the scene, the targets, methods, parameters, metrics."""
    parts = (key, scene.key, [target_key(t) for t in targets], [(m, choice.key(m)) for m in choice.methods], metrics)
    return repr(parts)


def stored_results(
    key: str, scene: Scene, targets: list[SceneTargetSpec], choice: MethodChoice, metrics: bool
) -> Results | None:
    """The results of this request from the cache; None when any pair is missing (evicted: Explain again)."""
    out: Results = {}
    for i, t in enumerate(targets):
        row = [stored(_result_key(key, scene, t, m, choice, metrics)) for m in choice.methods]
        if any(e is None for e in row):
            return None
        out[i] = [e for e in row if isinstance(e, SceneExplanation)]
    return out


def explain_all(
    key: str, bundle: SceneBundle, scene: Scene, targets: list[SceneTargetSpec], choice: MethodChoice, metrics: bool
) -> Results:
    """Compute what the cache lacks, method by method; the request's results."""
    truth = scene.truth if metrics else None
    bar = st.progress(0.0, text="Explaining…")
    for j, method in enumerate(choice.methods):
        label = choice.specs[method].label
        missing = [t for t in targets if stored(_result_key(key, scene, t, method, choice, metrics)) is None]
        if not missing:
            continue
        base, share = j / len(choice.methods), 1 / len(choice.methods)

        def progress(fraction: float, text: str, base: float = base, share: float = share, label: str = label) -> None:
            bar.progress(min(1.0, base + share * max(0.0, min(1.0, fraction))), text=f"{label}: {text}")

        bar.progress(base, text=f"{label} on {len(missing)} target{'s' if len(missing) > 1 else ''}…")
        with model_lock(key):
            made = explain_scene(
                bundle,
                scene.image,
                missing,
                [method],
                params={method: choice.params.get(method, {})},
                truth=truth,
                metrics=metrics,
                progress=progress,
            )
        by_target = {target_key(e.target): e for e in made}
        for t in missing:
            e = by_target.get(target_key(t))
            if e is not None:
                keep(_result_key(key, scene, t, method, choice, metrics), e)
    bar.empty()
    found = stored_results(key, scene, targets, choice, metrics)
    return found if found is not None else {}
