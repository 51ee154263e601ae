""".npz files from untrusted hands: every member's declared dtype, shape and size is checked before a byte
is allocated for it, so a zip bomb or a header declaring a huge array is refused, not loaded."""

from __future__ import annotations

import math
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from steps.lib.errors import StepError

READ_BYTES = 1 << 20
MAX_DIRECTORY_BYTES = 64 << 10  # about 1000 entries; a checkpoint, the largest .npz here, has ~30
MAX_HEADER_BYTES = 4096  # an .npy header is a short dict literal; numpy's own limit is 10000
ALLOWED_COMPRESSION = (
    zipfile.ZIP_STORED,
    zipfile.ZIP_DEFLATED,
)  # what np.savez(_compressed) writes
# zipfile's errors for a damaged archive, beyond BadZipFile: a corrupt deflate stream (zlib.error),
# a truncated one (EOFError), an encrypted member (RuntimeError), a method it lacks (NotImplementedError)
ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    RuntimeError,
    NotImplementedError,
    struct.error,
)


@dataclass(frozen=True)
class ArraySpec:
    """What a member must be: its dtype (or, for text, a dtype kind and item size bound), and its
    shape with None for a dimension of at most `max_rows`."""

    dtype: np.dtype | None
    shape: tuple[int | None, ...]
    max_rows: int = 0
    kind: str = ""  # with dtype None: a dtype kind such as "U", items of at most max_itemsize bytes
    max_itemsize: int = 0

    def check(self, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
        """Why a member with this declared shape and dtype does not fit, or None when it does."""
        if self.dtype is not None and dtype != self.dtype:
            return f"dtype must be {self.dtype}, got {dtype}"
        if self.dtype is None and (dtype.kind != self.kind or dtype.itemsize > self.max_itemsize):
            return f"dtype must be of kind {self.kind} (at most {self.max_itemsize} bytes), got {dtype}"
        sizes = ["n" if size is None else str(size) for size in self.shape]
        pattern = f"({', '.join(sizes)}{',' if len(sizes) == 1 else ''})"
        if len(shape) != len(self.shape) or any(
            want is not None and have != want for have, want in zip(shape, self.shape, strict=True)
        ):
            return f"must have shape {pattern}, has {shape}"
        if any(
            have > self.max_rows
            for have, want in zip(shape, self.shape, strict=True)
            if want is None
        ):
            return f"shape {shape}: more than {self.max_rows} rows"
        return None


def _check_directory(path: Path) -> None:
    """Refuse an archive whose central directory is larger than MAX_DIRECTORY_BYTES, before zipfile
    reads it: zipfile builds an object of about 600 bytes for each 46-byte entry, all of them before
    a member is opened, and its entries may all point at the same member (a million cost 635 MB).

    The size is read from the end record zipfile itself uses (zipfile._EndRecData, ZIP64 included),
    so the check and the reader cannot disagree about which record counts.
    """
    with path.open("rb") as stream:
        # private, so typeshed's zipfile leaves them out
        end = zipfile._EndRecData(stream)  # type: ignore[attr-defined]
    if end is None:
        return  # not an archive; ZipFile says so below
    directory_bytes = end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    if directory_bytes > MAX_DIRECTORY_BYTES:
        raise StepError(
            f"{path}: its central directory is {directory_bytes} bytes, more than "
            f"{MAX_DIRECTORY_BYTES} (an .npz of a few arrays has a directory of a few hundred bytes)"
        )


def read_arrays(path: Path, specs: Mapping[str, ArraySpec]) -> dict[str, np.ndarray]:
    """Read the members named in `specs` from the .npz at `path`; StepError if any is missing or off."""
    try:
        _check_directory(path)
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            names = sorted(name.removesuffix(".npy") for name in members)
            missing = [key for key in specs if f"{key}.npy" not in members]
            if missing:
                raise StepError(f"{path}: missing keys {missing} (has {names[:20]})")
            return {
                key: _read_member(archive, members[f"{key}.npy"], spec, f"{path}: {key}")
                for key, spec in specs.items()
            }
    except (*ARCHIVE_ERRORS, ValueError) as error:
        reason = " ".join(str(error).split())[:160] or type(error).__name__
        raise StepError(f"{path}: not a readable .npz file ({reason})") from None


# what numpy's header parser (ast.literal_eval of a dict literal) raises for a damaged header
HEADER_ERRORS = (
    ValueError,
    SyntaxError,
    tokenize.TokenError,
    TypeError,
    RecursionError,
    MemoryError,
)


def _read_header(stream, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """An .npy header: (shape, Fortran order, dtype), versions 1.0 and 2.0 only."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(stream, max_header_size=MAX_HEADER_BYTES)
        if version == (2, 0):
            return np.lib.format.read_array_header_2_0(stream, max_header_size=MAX_HEADER_BYTES)
    except HEADER_ERRORS as error:
        reason = " ".join(str(error).split())[:120] or type(error).__name__
        raise StepError(f"{where}: not an .npy header ({reason})") from None
    raise StepError(f"{where}: .npy format {version} is not supported")


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, spec: ArraySpec, where: str
) -> np.ndarray:
    if info.compress_type not in ALLOWED_COMPRESSION:
        raise StepError(f"{where}: compression method {info.compress_type} is not allowed")
    with archive.open(info) as opened:
        # ZipFile.open for reading returns a ZipExtFile, a BufferedIOBase (zipfile's docs); typeshed
        # says IO[bytes], which has no readinto
        stream = cast(zipfile.ZipExtFile, opened)
        shape, fortran_order, dtype = _read_header(stream, where)
        problem = spec.check(tuple(shape), dtype)
        if problem:
            raise StepError(f"{where}: {problem}")
        if fortran_order:
            raise StepError(f"{where}: Fortran-ordered arrays are not supported")
        size = math.prod(shape) * dtype.itemsize
        if info.file_size != stream.tell() + size:  # the archive must declare exactly the array
            raise StepError(
                f"{where}: archive declares {info.file_size} bytes for a {size}-byte array"
            )
        array = np.empty(shape, dtype)
        view = array.reshape(-1).view(np.uint8).data  # a memoryview of the array's bytes
        filled = 0
        while filled < size:  # in bounded pieces: one read of it all would hold a second copy
            count = stream.readinto(view[filled : filled + READ_BYTES])
            if not count:
                raise StepError(f"{where}: truncated ({filled} of {size} bytes)")
            filled += count
        if stream.read(1):  # also reaches the end of the member, where zipfile checks its CRC
            raise StepError(f"{where}: trailing bytes after the array")
    return array
