"""What the series models share (registers no model): the shape check every one of them declares as `fits`, and the
build options they take."""

from __future__ import annotations

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelOption


def series_problem(info: DatasetInfo) -> str | None:
    """None when `info` describes series of (channels, steps), else the reason in one line."""
    shape = tuple(info.input_shape)
    if len(shape) != 2 or min(shape, default=0) < 1:
        return f"needs series of (channels, steps); the data set's inputs are {shape or 'not series'}"
    if shape[1] < 2:
        return "needs series of at least 2 time steps"
    return None


def int_option(low: int, high: int, what: str) -> ModelOption:
    """A whole-number option (channels, hidden units, steps) in [low, high]."""
    return ModelOption("int", low, high, help=what)


def same_padding(kernel: int) -> nn.ConstantPad1d:
    """Zeros around a series so that a Conv1d of `kernel` gives one output per time step: kernel // 2 after each step,
    the rest before. Its own module rather than Conv1d's padding="same", which warns and copies the input for an
    even kernel (the FCN's 8)."""
    before = (kernel - 1) // 2
    return nn.ConstantPad1d((before, kernel - 1 - before), 0.0)
