"""What the table methods share (registers no method): the baseline and background parameters, the reference rows a
hidden column takes its values from, and rows with some columns hidden, built on the device.

A column is hidden by giving it the reference row's value (in the column's own units, a category's code). Since the
model's input is prepared column by column, that is done on prepared rows: the row and the references are prepared
once and a hidden column takes all its positions from the reference (`positions`), so a category column is hidden as a
whole one-hot group, never one position of it; tests compare with rows mixed in raw space and prepared again."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.data.modalities.table import feature_mask
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


def positions(ctx: MethodContext, shown: torch.Tensor) -> torch.Tensor:
    """A per-column 0/1 choice (R, F) spread over the model's input positions (R, D): a category column's choice
    covers its whole one-hot group. Preparation is column by column, so mixing prepared rows by it equals
    preparing rows mixed in raw space, without encoding every perturbed row again."""
    return shown.bool()[:, feature_mask(ctx.bundle.info).to(shown.device)]
