"""Errors a user can act on: the message says what went wrong and what to do."""


class DatasetError(Exception):
    """A data set cannot be loaded (missing files, no network, bad user data)."""


class DatasetUnavailable(DatasetError):
    """The data set is neither under the data root nor downloadable right now."""
