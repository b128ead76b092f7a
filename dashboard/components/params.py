"""Widgets for declared parameters (`data.specs.Param`): the one control of a parameter wherever a page offers it,
for classifier and prompt methods, attacks and projections alike."""

from __future__ import annotations

from typing import Any, Protocol

import streamlit as st

from xaidash.data.specs import LayerChoices, Param


class ParamSpec(Protocol):
    """What `param_controls` reads of a spec (a classifier or a prompt method)."""

    @property
    def id(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def params(self) -> tuple[Param, ...]: ...


def _number_bounds(p: Param, cast: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if p.min is not None:
        out["min_value"] = cast(p.min)
    if p.max is not None:
        out["max_value"] = cast(p.max)
    return out


def param_widget(p: Param, key: str, layers: LayerChoices | None = None) -> Any:
    """One widget for one parameter; returns its value. A 'layer' parameter picks one of `layers` (the model's),
    its widget kept per model so that another run's model never inherits the choice."""
    label = p.name.replace("_", " ")
    if p.kind == "int":
        return int(
            st.number_input(label, value=int(p.default), step=1, help=p.help or None, key=key, **_number_bounds(p, int))
        )
    if p.kind == "float":
        step = 0.01 if abs(float(p.default)) < 1 else 0.1
        return float(
            st.number_input(
                label,
                value=float(p.default),
                step=step,
                format="%.4g",
                help=p.help or None,
                key=key,
                **_number_bounds(p, float),
            )
        )
    if p.kind == "bool":
        return bool(st.checkbox(label, value=bool(p.default), help=p.help or None, key=key))
    if p.kind == "choice":
        choices = list(p.choices)
        index = choices.index(p.default) if p.default in choices else 0
        return st.selectbox(label, choices, index=index, help=p.help or None, key=key)
    if p.kind == "layer":
        if layers is None:
            raise ValueError(f"parameter {p.name!r} picks a layer: pass the model's LayerChoices")
        paths = list(layers.paths)
        default = p.default or layers.default
        index = paths.index(default) if default in paths else max(0, len(paths) - 1)
        return st.selectbox(label, paths, index=index, help=p.help or None, key=f"{key}_{layers.owner}")
    raise ValueError(f"unknown parameter kind {p.kind!r}")


def param_controls(spec: ParamSpec, key: str, layers: LayerChoices | None = None) -> dict[str, Any]:
    """Widgets for every parameter of `spec` (call inside an expander); {name: value}. `layers`: what a 'layer'
    parameter may take on the model (`explainers.registry.layer_choices`)."""
    if spec.description:
        st.caption(spec.description)
    if not spec.params:
        st.caption("This method has no parameters.")
        return {}
    return {p.name: param_widget(p, f"{key}_{spec.id}_{p.name}", layers) for p in spec.params}
