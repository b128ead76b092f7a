"""What a global-view request names, checked before any work: the model reads table rows, the columns and the pair
exist (a pair of two different columns), the target is one of the model's classes. Each refusal is one line."""

from __future__ import annotations

from collections.abc import Sequence

from xaidash.data.registry import TableColumn
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

LISTED = 12  # column names a refusal lists before "..."


def table_columns(bundle: ModelBundle) -> tuple[TableColumn, ...]:
    """The model's input columns; ExplainError when it does not read table rows or has no data set to sweep."""
    columns = tuple(bundle.info.columns)
    if not columns:
        raise ExplainError(
            f"{bundle.spec.name} on {bundle.info.name} does not read table rows, so it has no global view of "
            "columns: pick a run trained on a table (e.g. tabular_mlp on breast_cancer)."
        )
    if reason := bundle.no_dataset_reason("the global view (it sweeps the data set's rows)"):
        raise ExplainError(reason)
    return columns


def _known(columns: Sequence[TableColumn]) -> str:
    names = [c.name for c in columns]
    return ", ".join(names[:LISTED]) + (f", ... ({len(names)} in all)" if len(names) > LISTED else "")


def column_index(columns: Sequence[TableColumn], name: str) -> int:
    """The position of the column called `name`; ExplainError naming the known columns otherwise."""
    for j, column in enumerate(columns):
        if column.name == name:
            return j
    raise ExplainError(f"Unknown column {name!r}: the columns are {_known(columns)}.")


def column_indices(columns: Sequence[TableColumn], names: Sequence[str] | None) -> list[int] | None:
    """The positions of `names` (None when none are named), each once, in the order given."""
    if not names:
        return None
    return list(dict.fromkeys(column_index(columns, n.strip()) for n in names))


def pair_indices(columns: Sequence[TableColumn], names: Sequence[str] | None) -> tuple[int, int] | None:
    """The positions of a pair of two different columns, or None when no pair is named."""
    if not names:
        return None
    if len(names) != 2:
        raise ExplainError(f"A pair is two columns, not {len(names)}: give them as a,b.")
    a, b = (column_index(columns, n.strip()) for n in names)
    if a == b:
        raise ExplainError(f"A pair needs two different columns, not {columns[a].name!r} twice.")
    return a, b


def target_index(bundle: ModelBundle, target: str | int | None) -> int:
    """The class the partial dependence is shown for: by name or index; default the second class of two (the
    positive class, scikit-learn's choice for a binary classifier), else the first."""
    classes = list(bundle.info.classes)
    if target is None:
        return 1 if len(classes) == 2 else 0
    text = str(target).strip()
    if bundle.regression is not None and text not in (classes[0], "0"):
        raise ExplainError(
            f"This model predicts one number ({classes[0]}), so there is no class to choose: leave the target out."
        )
    if text in classes:
        return classes.index(text)
    try:
        k = int(text)
    except ValueError:
        raise ExplainError(
            f"Class {text!r} is not one of the model's classes ({', '.join(classes)}) nor an index 0..{len(classes) - 1}."
        ) from None
    if not 0 <= k < len(classes):
        raise ExplainError(f"Class index {k} is out of range: the model has classes 0..{len(classes) - 1}.")
    return k
