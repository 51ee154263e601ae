"""JSON in and out of the steps: untrusted text parsed within bounds, and only standard JSON written."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TypeGuard

from steps.lib.errors import StepError
from steps.lib.input_files import read_small_file

MAX_JSON_BYTES = 1 << 20  # a stats file, metrics or a settings object is a few KiB
MAX_EXACT = 2**53  # the largest integer a float holds exactly


def parse_json(text: str | bytes, what: str, limit: int = MAX_JSON_BYTES) -> object:
    """JSON from untrusted text: size-bounded, UTF-8, no NaN/Infinity, any nesting refused cleanly."""
    if len(text) > limit:
        raise StepError(f"{what}: longer than {limit} bytes")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise StepError(f"{what}: not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise StepError(f"{what}: JSON nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, and ints of more than 4300 digits
        raise StepError(f"{what}: not valid JSON ({str(error)[:120]})") from None


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number a float holds: a finite float, or an integer of at most 2**53 (not a bool).

    A huge integer is never converted: math.isfinite(10**400) raises OverflowError.
    """
    if type(value) is int:
        return abs(value) <= MAX_EXACT
    return type(value) is float and math.isfinite(value)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def read_json_file(path: Path, what: str, limit: int = MAX_JSON_BYTES) -> object:
    """parse_json of a regular file's bytes."""
    return parse_json(read_small_file(path, what, limit), f"{what} {path}", limit)


def to_json(value: object, **options) -> str:
    """json.dumps that refuses NaN and infinities: what the steps write is standard JSON."""
    return json.dumps(value, allow_nan=False, **options)
