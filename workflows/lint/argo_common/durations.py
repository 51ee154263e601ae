"""Durations as Argo reads them: Go's time.ParseDuration ("90s", "1m30s", "1.5h"), or bare seconds ("30")
(wfv1.ParseStringToDuration)."""

from __future__ import annotations

import re

from workflows.lint.argo_common.numbers import atoi

UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")  # ASCII digits, as Go


class DurationError(ValueError):
    """Not a duration Argo accepts."""


def parse_duration(text: str | int | float) -> float:
    """Seconds in `text`; raise DurationError for anything Go's parser would refuse."""
    value = str(text)  # Go trims nothing
    if (whole := atoi(value)) is not None:  # strconv.Atoi first: whole seconds
        return float(whole)
    sign = -1.0 if value.startswith("-") else 1.0
    body = value[1:] if value[:1] in ("+", "-") else value  # one sign at most
    seconds, position = 0.0, 0
    while position < len(body):
        match = PART.match(body, position)
        if not match:
            raise DurationError(f"time: invalid duration {value!r}")
        seconds += float(match.group(1)) * UNITS[match.group(2)]
        position = match.end()
    if not body:
        raise DurationError(f"time: invalid duration {value!r}")
    return sign * seconds


def deadline_seconds(value: str | int | None) -> float | None:
    """An activeDeadlineSeconds (an int, or a string holding one) in seconds; None when unset."""
    if value is None or value == "":
        return None
    whole = atoi(str(value))  # JSON true reads "True": no number
    if whole is None:
        raise DurationError(f"activeDeadlineSeconds must be a number of seconds, got {value!r}")
    return float(whole)
