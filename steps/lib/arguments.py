"""The steps' flags: argparse types, each refusing a bad value with one line before the step starts, and
the flags whose default is the pipeline's own (steps.lib.defaults)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any, TypeVar

from steps.lib import defaults

MAX_SEED = 2**32 - 1  # what numpy's and Keras's global seeds accept
Number = TypeVar("Number", int, float)


def _converted(text: str, convert: Callable[[str], Number], what: str) -> Number:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text[:40]!r}") from None


def _at_least(text: str, low: int) -> int:
    value = _converted(text, int, "an integer")
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    return _at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    return _at_least(text, 0)


def seed(text: str) -> int:
    """argparse type: a random seed, 0 … 2**32 - 1."""
    value = _converted(text, int, "an integer")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text[:40]}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0."""
    value = _converted(text, float, "a number")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {value}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    value = _converted(text, float, "a number")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text[:40]}")
    return value


def add_pipeline_flag(
    parser: argparse.ArgumentParser, flag: str, help: str, shown: str = "", **options: Any
) -> None:
    """A flag the pipeline sets from its setting of the same name: its default is that setting's own
    (steps.lib.defaults, `--learning-rate` → LEARNING_RATE), and its help shows it (or `shown`)."""
    default = getattr(defaults, flag.removeprefix("--").replace("-", "_").upper())
    parser.add_argument(
        flag, default=default, help=f"{help} (default: {shown or default})", **options
    )


def add_source_argument(parser: argparse.ArgumentParser) -> None:
    """`--source` for the tools run by hand (the page's samples, the benchmark): env MNIST_SOURCE, else
    the pipeline's default, the Keras download."""
    parser.add_argument(
        "--source",
        default=os.environ.get(defaults.SOURCE_ENV) or defaults.SOURCE,
        help=f"mnist.npz: path, URL or gs:// URI (default: env {defaults.SOURCE_ENV}, else the "
        "Keras URL)",
    )
