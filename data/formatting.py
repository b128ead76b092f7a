"""Numbers as people read them, the same on every page, in every command's output and in every report: a share as
a percentage, a value with a sensible number of digits, a duration. One formatter per kind of number, so the same
accuracy never reads 99.53% in one place and 99.5% in another."""

from __future__ import annotations

import math

MISSING = "–"  # a value that is not there (no accuracy measured, a metric that does not apply)


def percent(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.9953 -> '99.5%'; None or NaN -> '–'."""
    if value is None or not math.isfinite(float(value)):
        return MISSING
    return f"{100 * float(value):.{digits}f}%"


def measured_text(value: float) -> str:
    """A measured value in its units, to four significant digits, large ones with separators rather than in
    scientific notation: 0.01234 -> '0.01234', 152.34 -> '152.3', 61250 -> '61,250'."""
    v = float(value)
    if math.isfinite(v) and 1e4 <= abs(v) < 1e15:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def r2_text(value: float | None) -> str:
    """A coefficient of determination: 0.4237 -> 'R² 0.42'; None or NaN -> '–'."""
    if value is None or not math.isfinite(float(value)):
        return MISSING
    return f"R² {float(value):.2f}"


def score_text(summary: dict, split: str) -> str:
    """A run's headline score on `split` ('val', 'test') from its summary: its accuracy as a percentage, or R² for
    a number to predict (a summary with `{split}_r2`), or '–'."""
    r2 = summary.get(f"{split}_r2")
    return r2_text(r2) if r2 is not None else percent(summary.get(f"{split}_acc"))


def fmt_number(v: float | int | None, digits: int = 3) -> str:
    """A value as people read it: counts (whole numbers) without decimals, others to `digits` decimals,
    very small or large ones in scientific notation, missing ones as '–' (pages, tables and the HTML report)."""
    if v is None:
        return MISSING
    f = float(v)
    if not math.isfinite(f):
        return MISSING
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    if f != 0 and (abs(f) < 10 ** (-digits) or abs(f) >= 1e6):
        return f"{f:.2e}"
    return f"{f:.{digits}f}"


def seconds_text(seconds: float) -> str:
    """A duration measured by the code: '0.42 s', '<0.01 s'."""
    return f"{seconds:.2f} s" if seconds >= 0.01 else "<0.01 s"


def duration_text(seconds: float | None) -> str:
    """A longer duration, as an estimate or a time left reads: '45s', '3m 05s', '1h 02m'; None -> '–'."""
    if seconds is None:
        return MISSING
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


def plural(n: int, word: str) -> str:
    """'1 run', '3 runs'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
