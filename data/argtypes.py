"""argparse types that check a number's range while the command line is parsed, so `--batch-size 0` is refused
with a one-line usage error (exit 2) before a model is loaded or a folder written. argparse has `choices` for
names but nothing for numeric ranges: these few lines fill that gap."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse `type=`: a whole number in [lo, hi] (no upper bound when hi is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < lo or (hi is not None and value > hi):
            allowed = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            raise argparse.ArgumentTypeError(f"{value} is out of range: it must be {allowed}")
        return value

    parse.__name__ = "int"
    return parse


def float_range(lo: float, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse `type=`: a finite number in [lo, hi] ((lo, hi] when lo_open)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        too_low = value <= lo if lo_open else value < lo
        if not math.isfinite(value) or too_low or (hi is not None and value > hi):
            left = "(" if lo_open else "["
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: it must be in {left}{lo}, {hi if hi is not None else '∞'}]"
            )
        return value

    parse.__name__ = "float"
    return parse
