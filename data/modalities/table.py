"""Tables: a raw row is one float per column, each in its own units (a categorical column as its category's code);
the model reads the row standardised (numeric columns, with the training split's mean and std) and one-hot encoded
(categorical columns). A map scores columns: methods that work on the model's input sum each column's positions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.base import MODALITIES, Modality, cut
from xaidash.data.registry import DatasetInfo, Split, TableColumn, TableSplit


def prepared_width(info: DatasetInfo) -> int:
    """How many numbers the model reads per row: one per numeric column, one per category of a categorical one."""
    return sum(c.width for c in info.columns)


def column_slices(info: DatasetInfo) -> list[slice]:
    """Each column's positions in the model's input, in column order."""
    out, start = [], 0
    for column in info.columns:
        out.append(slice(start, start + column.width))
        start += column.width
    return out


def feature_mask(info: DatasetInfo) -> torch.Tensor:
    """(D,) long: the column each position of the model's input belongs to (captum's `feature_mask`)."""
    return torch.cat(
        [torch.full((c.width,), i, dtype=torch.long) for i, c in enumerate(info.columns)]
        or [torch.zeros(0, dtype=torch.long)]
    )


def to_columns(values: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """(N, D) values over the model's input -> (N, F): each column's positions summed (one-hot groups merged)."""
    index = feature_mask(info).to(values.device)
    out = torch.zeros(values.shape[0], len(info.columns), dtype=values.dtype, device=values.device)
    return out.index_add_(1, index, values)


def _encode(rows: torch.Tensor, columns: Sequence[TableColumn]) -> torch.Tensor:
    parts = []
    for i, column in enumerate(columns):
        value = rows[:, i]
        if column.categorical:
            codes = value.round().long().clamp(0, len(column.categories) - 1)
            parts.append(torch.nn.functional.one_hot(codes, len(column.categories)).to(rows.dtype))
        else:
            parts.append(((value - column.mean) / (column.std or 1.0)).unsqueeze(1))
    return torch.cat(parts, dim=1) if parts else rows[:, :0]


@dataclass(frozen=True)
class TableModality(Modality):
    def batch(self, raws: Sequence[Any]) -> torch.Tensor:
        if not raws:
            raise ExplainError("No rows to explain: pick at least one.")
        return torch.stack([torch.as_tensor(r, dtype=torch.float32).reshape(-1) for r in raws])

    def as_batch(self, inputs: Any) -> torch.Tensor:
        x = torch.as_tensor(inputs, dtype=torch.float32)
        return x.unsqueeze(0) if x.dim() == 1 else x

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> torch.Tensor:
        rows = self.as_batch(inputs).to(device)
        if rows.dim() != 2 or rows.shape[1] != len(info.columns):
            raise ExplainError(
                f"A row of {info.name} has {len(info.columns)} values (one per column); got shape {tuple(rows.shape)}."
            )
        return _encode(rows, info.columns)

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> torch.Tensor:
        """Typical rows: every column at its median (a categorical column at its most frequent category)."""
        return torch.tensor([[c.median for c in info.columns]] * n, dtype=torch.float32)

    def describe(self, input_shape: Sequence[int]) -> str:
        return f"rows of {input_shape[0]} columns" if input_shape else "table rows"

    def one_line(self, raw: Any, info: DatasetInfo, chars: int = 200) -> str:
        """'mean radius 17.99, mean texture 10.38, …': each column's value in its own units (a category by name)."""
        values = self.as_batch(raw)[0].tolist()
        return cut(", ".join(f"{c.name} {c.value_text(v)}" for c, v in zip(info.columns, values, strict=False)), chars)

    def same_inputs(self, a: Sequence[int], b: Sequence[int]) -> bool:
        return tuple(a) == tuple(b)

    def item(self, split: Split, index: int) -> torch.Tensor:
        assert isinstance(split, TableSplit)
        return split.rows[index].float()

    def items(self, split: Split, indices: Sequence[int]) -> torch.Tensor:
        assert isinstance(split, TableSplit)
        return split.rows[torch.as_tensor([int(i) for i in indices], dtype=torch.long)].float()

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, TableSplit):
            raise self.wrong_split(dataset)


TABLE = MODALITIES.register(
    TableModality(
        id="table",
        label="rows",
        unit="column",
        units="columns",
        sample="row",
        generic_training=(("epochs", 60), ("batch_size", 64), ("lr", 3e-3), ("weight_decay", 1e-4)),
        sources=("values", "rows file"),  # typed comma-separated values; a CSV file of rows
        upload_types=("csv",),
    )
)
