"""Which scene methods explain the targets, and their parameters: the methods registered for the model's task
(`SCENE_METHODS`), the featured ones first chosen, each one's parameters built from its `Param`s."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import streamlit as st

from xaidash.dashboard.components.params import param_controls
from xaidash.explainers.scenes import api  # noqa: F401 - registers every scene method
from xaidash.explainers.scenes.registry import SCENE_METHODS, SceneMethodSpec, SceneModelLike, layer_choices

DEFAULT_COUNT = 3  # methods chosen when a task is first seen


@dataclass
class MethodChoice:
    """The chosen methods (ids, in the registry's order), their specs and their parameters."""

    methods: list[str]
    specs: dict[str, SceneMethodSpec]
    params: dict[str, dict[str, Any]]

    def key(self, method: str) -> str:
        """A method's parameters as text (part of its results' cache key)."""
        return json.dumps(self.params.get(method, {}), sort_keys=True, default=str)


def methods_for_task(task: str) -> list[SceneMethodSpec]:
    """The methods for `task`, the featured ones first (by rank), then the others in registration order."""
    found = SCENE_METHODS.all(lambda m: m.applies(task))
    return sorted(found, key=lambda m: (m.featured is None, m.featured or 0))


def pick_methods(bundle: SceneModelLike) -> MethodChoice:
    """The methods multiselect (kept per task: a detector's choice never replaces a segmenter's) and each chosen
    method's parameters in an expander."""
    task = bundle.task
    specs = {m.id: m for m in methods_for_task(task)}
    ids = list(specs)
    key = f"scenes_methods_{task}"
    kept = st.session_state.get(f"{key}_kept")  # Streamlit drops an undrawn widget's state: keep our own copy
    if key not in st.session_state:
        featured = [m.id for m in SCENE_METHODS.featured(lambda m: m.applies(task), limit=DEFAULT_COUNT)]
        st.session_state[key] = [m for m in (kept or featured or ids[:DEFAULT_COUNT]) if m in ids]
    chosen = st.multiselect(
        "Methods",
        ids,
        format_func=lambda i: specs[i].label,
        key=key,
        help="the explanation methods for this model's task; each explains every chosen target",
    )
    st.session_state[f"{key}_kept"] = list(chosen)
    chosen = [m for m in ids if m in chosen]  # one order (featured first), whatever order they were ticked in
    params: dict[str, dict[str, Any]] = {}
    if chosen:
        cols = st.columns(min(3, len(chosen)))
        for j, m in enumerate(chosen):
            with cols[j % len(cols)].expander(f"{specs[m].label} parameters"):
                params[m] = param_controls(specs[m], "scenes", layer_choices(bundle))
                if specs[m].reference:
                    st.caption(f"Matches: {specs[m].reference}")
    return MethodChoice(chosen, specs, params)
