"""A step's outputs appear whole or not at all: each is written under a temporary name beside it and
renamed into place once the step has succeeded."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from steps.lib.errors import StepError

UMASK = os.umask(0o022)  # read once (the call sets it), then restored
os.umask(UMASK)
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
        # A read-only or full file system, no permission: the same place fails again.
        raise StepError(f"cannot create {final}: {error.strerror or error}") from None
    return created


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed step created, deepest first, where they are still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _affixes(final: Path) -> tuple[str, str]:
    """The prefix and suffix of `final`'s temporaries: hidden, its suffix kept."""
    return f".{final.stem[:40]}.", final.suffix[:16]


def temporaries_of(name: str) -> re.Pattern[str]:
    """The names of the temporaries of a file named `name` (fullmatch): the affixes around the eight
    characters mkstemp draws (CPython Lib/tempfile.py, _RandomNameSequence: a-z, 0-9 and _)."""
    prefix, suffix = _affixes(Path(name))
    return re.compile(rf"{re.escape(prefix)}[a-z0-9_]{{8}}{re.escape(suffix)}")


def _temporary_file(final: Path) -> tuple[Path, list[Path]]:
    """An empty file beside `final`, keeping its suffix (Keras chooses a format by it), and the
    folders created for it."""
    _refuse_folder(final)
    created = _make_parent(final)
    prefix, suffix = _affixes(final)
    try:
        handle, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=final.parent)
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
