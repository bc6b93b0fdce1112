"""argparse ``type=`` converters for numbers, shared by the CLI's command modules; each
rejects bad values with a message argparse turns into a usage error (exit 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["non_negative", "positive_float", "positive_int", "probability"]


def _number(
    kind: type[float] | type[int], accept: Callable[[float], bool], wording: str
) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wording}, got {text!r}") from None
        if not (math.isfinite(value) and accept(value)):
            raise argparse.ArgumentTypeError(f"must be {wording}, got {text!r}")
        return value

    return convert


positive_int = _number(int, lambda v: v > 0, "a positive integer")
positive_float = _number(float, lambda v: v > 0, "a positive number")
probability = _number(float, lambda v: 0 < v < 1, "a number between 0 and 1")
non_negative = _number(float, lambda v: v >= 0, "a number that is not negative")
