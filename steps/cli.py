"""What every step shares: one-line errors with exit code 2, and outputs that appear whole or not at all."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

EXIT_BAD_INPUT = 2


class StepError(Exception):
    """Bad input or a failed precondition, reported as one line on stderr with exit code 2."""


def run(
    main: Callable[[argparse.Namespace], None],
    parser: argparse.ArgumentParser,
    argv: list[str] | None = None,
) -> int:
    """Parse `argv`, run `main`, and turn a StepError into one line on stderr and exit code 2."""
    args = parser.parse_args(argv)
    try:
        main(args)
    except StepError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def require_file(path: Path, what: str) -> Path:
    """Fail with a clear line unless `path` is an existing file."""
    if not path.is_file():
        raise StepError(f"{what} not found: {path}")
    return path


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside `final` that becomes `final` only if the block succeeds.

    The temporary name keeps `final`'s suffix, since some writers (Keras) choose a format by it.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{final.stem}.", suffix=final.suffix, dir=final.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temporary directory beside `final` that replaces `final` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield temporary
        if final.exists():
            shutil.rmtree(final)
        os.replace(temporary, final)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text)
