"""Parsers of flag values that argparse cannot express by type alone (it names the flag in the
error it prints)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from rlsched.seeds import MAX_SEED


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """A parser of integers >= ``low`` (and <= ``high``, if given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f">= {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return positive_float(text)


#: Characters an idempotency key's prefix may hold: ``/`` separates the parts a key is made of.
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")
#: Its longest: the task's key (prefix, app, stream, chunk) stays under the API's 200 characters.
MAX_KEY_PREFIX = 120


def idempotency_prefix(text: str) -> str:
    """An idempotency key's prefix: 1 to 120 letters, digits and ``_.:-``."""
    if not 0 < len(text) <= MAX_KEY_PREFIX or not set(text) <= _KEY_CHARS:
        raise argparse.ArgumentTypeError(
            f"expected 1 to {MAX_KEY_PREFIX} letters, digits and _.:- , got {text!r}"
        )
    return text


def fraction(text: str) -> float:
    """A share in (0, 1]."""
    value = positive_float(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text}")
    return value


#: numpy's seed range, as a scenario file's ``seed``.
SEED = int_at_least(0, MAX_SEED)
COUNT = int_at_least(1)
STEPS = int_at_least(0)
