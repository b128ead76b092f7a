"""Widgets for a method's parameters, built from its declared schema (`explainers.params.Param`)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodSpec, layer_choices
from xaidash.models.bundle import ModelBundle


def _number_bounds(p: Param, cast: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if p.min is not None:
        out["min_value"] = cast(p.min)
    if p.max is not None:
        out["max_value"] = cast(p.max)
    return out


def param_widget(p: Param, bundle: ModelBundle, key: str) -> Any:
    """One widget for one parameter; returns its value."""
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
        layers = layer_choices(bundle)
        default = p.default or bundle.spec.last_conv
        index = layers.index(default) if default in layers else max(0, len(layers) - 1)
        return st.selectbox(label, layers, index=index, help=p.help or None, key=key)
    raise ValueError(f"unknown parameter kind {p.kind!r}")


def param_controls(method: MethodSpec, bundle: ModelBundle, key: str) -> dict[str, Any]:
    """Widgets for every parameter of `method` (call inside an expander); {name: value}."""
    if method.description:
        st.caption(method.description)
    if not method.params:
        st.caption("This method has no parameters.")
        return {}
    return {
        p.name: param_widget(p, bundle, _widget_key(p, bundle, f"{key}_{method.id}_{p.name}")) for p in method.params
    }


def _widget_key(p: Param, bundle: ModelBundle, key: str) -> str:
    """A layer is a name in one model: its choice is kept per model, so another run's model never inherits it."""
    return f"{key}_{bundle.spec.name}" if p.kind == "layer" else key
