"""What the table methods share (registers no method): the baseline and background parameters, the reference rows a
hidden column takes its values from, and rows with some columns hidden, built on the device.

A column is hidden in raw space (its value in the column's own units, a category's code) and the row prepared again,
so a category column is hidden as a whole one-hot group, never one position of it."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.modalities.table_values import BASELINE_HELP, TABLE_BASELINES, background_reference
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext

BACKGROUND_SIZE = 20  # training rows a 'background' baseline averages over by default


def baseline_param(default: str) -> Param:
    return Param("baseline", "choice", default, BASELINE_HELP, choices=TABLE_BASELINES)


def background_size_param(default: int = BACKGROUND_SIZE) -> Param:
    return Param(
        "background_size",
        "int",
        default,
        "Training rows the 'background' baseline averages over (a seeded pick of the background).",
        min=1,
        max=500,
    )


def uses_background(params: dict[str, Any]) -> bool:
    return params.get("baseline") == "background"


def references(ctx: MethodContext, params: dict[str, Any]) -> torch.Tensor:
    """(B, F) raw reference rows on the device: the mean or median row, or up to `background_size` background rows
    (a seeded pick of the prepared background `explain` gave, turned back into raw values)."""
    size = int(params.get("background_size", BACKGROUND_SIZE))
    kind = str(params["baseline"])
    return background_reference(kind, ctx.bundle.info, ctx.background, size, ctx.seed).to(ctx.x.device)


def raw_inputs(ctx: MethodContext) -> torch.Tensor:
    """The explained rows, raw (N, F) float32 on the device."""
    return torch.as_tensor(ctx.raw, dtype=torch.float32).to(ctx.x.device)


def mixed(shown: torch.Tensor, rows: torch.Tensor, refs: torch.Tensor) -> torch.Tensor:
    """Rows (R, F) whose columns with `shown` 0 take the reference's value: shown (R, F) 0/1, rows and refs (R, F)."""
    return torch.where(shown.bool(), rows, refs)
