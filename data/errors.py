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


UNEXPECTED_THEN = "try other settings, and report it if it happens again"


def plain_message(err: BaseException, limit: int = 500, first_line: bool = False) -> str:
    """An exception's own message on one line, without Python's class name ('it gave no message' when empty): what a
    run's summary, a refusal or a log line quotes of a library's complaint. `first_line`: only its first line (a
    compiler's or a library's report can run for pages)."""
    text = str(err).strip()
    if first_line:
        text = text.splitlines()[0] if text else ""
    return " ".join(text.split())[:limit] or "it gave no message"


def error_text(err: BaseException, where: str = "", then: str = UNEXPECTED_THEN) -> str:
    """The one line a user reads for `err`. One of ours (a XaidashError) already says what went wrong and what to
    do: its message alone. Anything else (a bug, a library's complaint) is worded 'an unexpected error in <where>:
    <its message>; <then>'. Never Python's class name or a source location: a log keeps the traceback."""
    if isinstance(err, XaidashError):
        return str(err)
    message = plain_message(err)
    return f"an unexpected error{f' in {where}' if where else ''}: {message}; {then}"
