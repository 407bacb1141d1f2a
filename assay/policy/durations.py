"""Durations in a policy file (docs/policy.md, "Durations"): ``per: 60s``, ``approval_timeout: 2m``.

A duration is a non-negative number of seconds (``90``, ``1.5``) or a string: a number followed
by one unit, ``ms``, ``s``, ``m`` or ``h`` (``250ms``, ``60s``, ``5m``, ``1h``), with no spaces.
Booleans, negative numbers, NaN, infinities and anything else are refused. Sans-IO.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["DurationError", "parse_duration", "MAX_DURATION_S"]

MAX_DURATION_S = 366 * 24 * 3600.0  # a year: longer is a typo, and keeps clock arithmetic exact

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_TEXT = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")


class DurationError(ValueError):
    """Not a duration; ``str(e)`` says what a duration looks like."""


def parse_duration(value: Any) -> float:
    """Seconds, as a float, of a policy duration (number of seconds, or ``<number><unit>``)."""
    if isinstance(value, bool):
        raise DurationError("expected a duration such as 60s, 5m or a number of seconds, got a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = _TEXT.fullmatch(value)
        if m is None:
            raise DurationError(f"expected a duration such as 60s, 250ms, 5m or 1h, got {value!r}")
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise DurationError("expected a duration such as 60s, 5m or a number of seconds")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError("a duration must be a finite number of seconds, zero or more")
    if seconds > MAX_DURATION_S:
        raise DurationError("a duration may be at most a year (31622400 seconds)")
    return seconds
