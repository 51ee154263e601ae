"""A step's input files: regular files only (never a FIFO or a device), read up to a bound."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from steps.lib.errors import StepError


def require_file(path: Path, what: str) -> Path:
    """Fail with a clear line unless `path` is an existing regular file."""
    if not path.is_file():
        raise StepError(f"{what} not found: {path}")
    return path


def open_regular(path: Path | str, what: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file; StepError for anything else, found without
    blocking on it (opening a FIFO waits for a writer, without O_NONBLOCK), and a terminal never becomes
    the process's own (O_NOCTTY). OSError passes through."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    if not stat.S_ISREG(
        os.fstat(descriptor).st_mode
    ):  # checked before fdopen, which refuses a folder
        os.close(descriptor)
        raise StepError(f"{what} is not a regular file: {path}")
    return os.fdopen(descriptor, "rb")


def read_small_file(path: Path, what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (never a FIFO or a device)."""
    try:
        with open_regular(path, what) as stream:
            data = stream.read(limit + 1)
    except FileNotFoundError:
        raise StepError(f"{what} not found: {path}") from None
    except OSError as error:
        raise StepError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if len(data) > limit:
        raise StepError(f"{what} {path} is larger than {limit} bytes")
    return data
