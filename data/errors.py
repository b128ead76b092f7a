"""Errors a user can act on: the message says what went wrong and what to do.

`XaidashError` is the base of every such error in every layer (DatasetError and ExplainError here, ModelError in
xaidash.models), so a command line or a page catches one type. ExplainError lives here, not in the explainers, because
the declared parameters every registry checks (`data/specs.Param`) raise it.
"""


class XaidashError(Exception):
    """Something the user asked for cannot be done; the message says why and what to do instead."""


class DatasetError(XaidashError):
    """A data set cannot be loaded (missing files, no network, bad user data)."""


class DatasetUnavailable(DatasetError):
    """The data set is neither under the data root nor downloadable right now."""


class ExplainError(XaidashError):
    """An explanation (or another computation on a model: an attack, a projection) cannot be computed as asked;
    the message says why and what to do."""
