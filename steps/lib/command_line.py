"""What every step shares: one-line errors with exit code 2, and outputs that appear whole or not at all."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from steps.lib.errors import StepError

EXIT_BAD_INPUT = 2
MAX_SEED = 2**32 - 1  # what numpy's and Keras's global seeds accept
MAX_JSON_BYTES = 1 << 20  # a stats file, metrics or a settings object is a few KiB
UMASK = os.umask(0o022)  # read once (the call sets it), then restored
os.umask(UMASK)


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
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def seed(text: str) -> int:
    """argparse type: a random seed, 0 … 2**32 - 1."""
    value = _integer(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text[:40]}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {value}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text[:40]}")
    return value


def require_file(path: Path, what: str) -> Path:
    """Fail with a clear line unless `path` is an existing regular file."""
    if not path.is_file():
        raise StepError(f"{what} not found: {path}")
    return path


def open_regular(path: Path | str, what: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file; StepError for anything else, found without
    blocking on it (opening a FIFO waits for a writer, without O_NONBLOCK). OSError passes through."""
    stream = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb")
    if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
        stream.close()
        raise StepError(f"{what} is not a regular file: {path}")
    return stream


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


MAX_EXACT = 2**53  # the largest integer a float holds exactly


def is_number(value: object) -> bool:
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


MAX_NAME_BYTES = 255  # a file name's limit on Linux file systems


def _refuse_folder(final: Path) -> None:
    """Refuse an output path that cannot become a file: a folder, or a name too long to exist."""
    if len(final.name.encode()) > MAX_NAME_BYTES:
        raise StepError(f"output file name longer than {MAX_NAME_BYTES} bytes: {final.name[:60]}…")
    if final.is_dir():
        raise StepError(f"output path is a folder: {final}")


def _make_parent(final: Path) -> list[Path]:
    """Create `final`'s missing parent folders; return those created, deepest first."""
    created = [parent for parent in final.parents if not parent.exists()]
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StepError(f"cannot create {final}: a parent is a file") from None
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            raise StepError(f"output path too long: {str(final)[:80]}…") from None
        raise
    return created


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed step created, deepest first, where they are still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _temporary_file(final: Path) -> tuple[Path, list[Path]]:
    """An empty file beside `final`, keeping its suffix (Keras chooses a format by it), and the
    folders created for it."""
    _refuse_folder(final)
    created = _make_parent(final)
    try:
        handle, name = tempfile.mkstemp(
            prefix=f".{final.stem[:40]}.", suffix=final.suffix[:16], dir=final.parent
        )
    except NotADirectoryError:
        raise StepError(f"cannot create {final}: a parent is a file") from None
    os.close(handle)
    os.chmod(name, 0o666 & ~UMASK)  # mkstemp's 0600 would carry over to the output
    return Path(name), created


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside `final` that becomes `final` only if the block succeeds.

    The temporary name keeps `final`'s suffix, since some writers (Keras) choose a format by it.
    """
    final = Path(final)
    temporary, created = _temporary_file(final)
    try:
        yield temporary
        _refuse_folder(final)
        os.replace(temporary, final)
        created.clear()
    finally:
        temporary.unlink(missing_ok=True)
        _remove_empty(created)


def _replace_folder(temporary: Path, final: Path) -> None:
    """Put the folder `temporary` at `final`; an existing folder there is moved aside, then removed."""
    if final.exists() and not final.is_dir():
        raise StepError(f"output folder is a file: {final}")
    old = None
    if final.is_dir():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name[:40]}.old.", dir=final.parent))
        os.replace(final, old / final.name)
    os.replace(temporary, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class StagedOutputs:
    """A step's outputs, written under temporary names and renamed into place together at the end.

    Register every output before the work starts, so a bad output path fails before anything is
    done; outputs are renamed in the order they were registered, so the last one is the commit
    record (a reader that finds it can trust the others are there).
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path, bool]] = []  # (temporary, final, is a folder)
        self._created: list[Path] = []  # folders made for the outputs, removed again on failure

    def file(self, final: Path) -> Path:
        """A temporary file path that becomes `final`."""
        temporary, created = _temporary_file(Path(final))
        self._created[:0] = created
        self._staged.append((temporary, Path(final), False))
        return temporary

    def folder(self, final: Path) -> Path:
        """A temporary, empty folder that becomes the folder `final`."""
        final = Path(final)
        if len(final.name.encode()) > MAX_NAME_BYTES:
            raise StepError(f"output folder name longer than {MAX_NAME_BYTES} bytes")
        if final.exists() and not final.is_dir():
            raise StepError(f"output folder is a file: {final}")
        self._created[:0] = _make_parent(final)
        temporary = Path(tempfile.mkdtemp(prefix=f".{final.name[:40]}.", dir=final.parent))
        temporary.chmod(0o777 & ~UMASK)  # mkdtemp's 0700 would carry over to the output
        self._staged.append((temporary, final, True))
        return temporary

    def commit(self) -> None:
        for _, final, is_folder in self._staged:  # check every target before the first rename
            if not is_folder:
                _refuse_folder(final)
            elif final.exists() and not final.is_dir():
                raise StepError(f"output folder is a file: {final}")
        for temporary, final, is_folder in self._staged:
            if is_folder:
                _replace_folder(temporary, final)
            else:
                os.replace(temporary, final)
        self._staged.clear()
        self._created.clear()

    def discard(self) -> None:
        for temporary, _, is_folder in self._staged:
            if is_folder:
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                temporary.unlink(missing_ok=True)
        self._staged.clear()
        _remove_empty(sorted(set(self._created), key=lambda p: len(p.parts), reverse=True))
        self._created.clear()


@contextlib.contextmanager
def staged_outputs() -> Iterator[StagedOutputs]:
    """Outputs that appear together when the block succeeds, and not at all when it fails."""
    outputs = StagedOutputs()
    try:
        yield outputs
        outputs.commit()
    finally:
        outputs.discard()


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text)
