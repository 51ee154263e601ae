"""steps.lib.npz's rules one by one, with exact messages, and hostile archives refused at a small cost."""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from steps.lib import npz
from steps.lib.npz import MAX_DIRECTORY_BYTES, ArraySpec, read_arrays
from tests.support.steps import (
    corrupt_deflate_npz,
    npy_header,
    peak_memory_mb,
    raw_zip,
    refused,
    wide_directory_npz,
    write_npz,
    zip_bomb_npz,
)

IMAGES = ArraySpec(np.dtype(np.uint8), (None, 2), max_rows=3)
NAMES = ArraySpec(None, (None,), max_rows=3, kind="U", max_itemsize=8)
FIXED = ArraySpec(np.dtype(np.float32), (2, 3))
READ_SHARD = (
    "from pathlib import Path\nfrom steps.lib.errors import StepError\n"
    "from steps.lib.shards import read_shard\ntry:\n    read_shard(Path('{}'))\n"
    "except StepError as error:\n    print(error)"
)


@pytest.mark.parametrize(
    ("spec", "shape", "dtype", "problem"),
    [
        (IMAGES, (3, 2), "uint8", None),
        (IMAGES, (0, 2), "uint8", None),
        (IMAGES, (3, 2), "int8", "dtype must be uint8, got int8"),
        (IMAGES, (4, 2), "uint8", "shape (4, 2): more than 3 rows"),
        (IMAGES, (3, 3), "uint8", "must have shape (n, 2), has (3, 3)"),
        (IMAGES, (3,), "uint8", "must have shape (n, 2), has (3,)"),
        (IMAGES, (3, 2, 1), "uint8", "must have shape (n, 2), has (3, 2, 1)"),
        (NAMES, (3,), "<U2", None),
        (NAMES, (3,), "<U1", None),
        (NAMES, (3,), "|S2", "dtype must be of kind U (at most 8 bytes), got |S2"),
        (NAMES, (3,), "<U3", "dtype must be of kind U (at most 8 bytes), got <U3"),
        (NAMES, (4,), "<U1", "shape (4,): more than 3 rows"),
        (NAMES, (3, 1), "<U1", "must have shape (n,), has (3, 1)"),
        (FIXED, (2, 3), "float32", None),
        (FIXED, (3, 2), "float32", "must have shape (2, 3), has (3, 2)"),
    ],
)
def test_a_members_dtype_and_shape_are_checked_against_its_spec(
    spec: ArraySpec, shape: tuple, dtype: str, problem: str | None
) -> None:
    assert spec.check(shape, np.dtype(dtype)) == problem


def test_members_are_read_whole_and_only_those_asked_for(tmp_path: Path) -> None:
    big = np.arange(3 * (1 << 20) // 8 + 5, dtype=np.int64)  # more than one READ_BYTES piece
    path = write_npz(tmp_path / "a.npz", x=np.ones((3, 2), np.uint8), big=big, other=np.zeros(2))
    spec = ArraySpec(np.dtype(np.int64), (None,), max_rows=len(big))
    arrays = read_arrays(path, {"x": IMAGES, "big": spec})
    assert sorted(arrays) == ["big", "x"]
    assert np.array_equal(arrays["big"], big) and arrays["x"].tolist() == [[1, 1]] * 3


def test_missing_members_are_named_with_what_there_is(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "a.npz", **{f"k{i:02}": np.zeros(1) for i in range(25)})
    shown = [f"k{i:02}" for i in range(20)]
    assert refused(read_arrays, path, {"x": IMAGES, "k03": IMAGES, "y": IMAGES}) == (
        f"{path}: missing keys ['x', 'y'] (has {shown})"
    )


def test_a_file_that_is_not_an_archive_says_why(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    path.write_text("not a zip")
    assert refused(read_arrays, path, {"x": IMAGES}) == (
        f"{path}: not a readable .npz file (File is not a zip file)"
    )


def test_a_directory_of_exactly_the_bound_is_read_and_a_byte_more_is_not(tmp_path: Path) -> None:
    entry = 46 + len("x.npy")  # a central directory entry: 46 bytes and the name
    fits = wide_directory_npz(tmp_path / "fits.npz", MAX_DIRECTORY_BYTES // entry)
    read_arrays(fits, {"x": ArraySpec(np.dtype(np.uint8), (8,))})
    over = wide_directory_npz(tmp_path / "over.npz", MAX_DIRECTORY_BYTES // entry + 1)
    size = (MAX_DIRECTORY_BYTES // entry + 1) * entry
    assert refused(read_arrays, over, {"x": IMAGES}) == (
        f"{over}: its central directory is {size} bytes, more than {MAX_DIRECTORY_BYTES} "
        "(an .npz of a few arrays has a directory of a few hundred bytes)"
    )


def member(path: Path, body: bytes, *, method: int = zipfile.ZIP_STORED, size: int = -1) -> Path:
    """An .npz of one member `x` whose stored bytes are `body` (declared `size`, by default its own)."""
    data = body
    if method == zipfile.ZIP_DEFLATED:
        compressor = zlib.compressobj(9, 8, -15)
        data = compressor.compress(body) + compressor.flush()
    return raw_zip(
        path, {"x.npy": (data, method, len(body) if size < 0 else size, zlib.crc32(body))}
    )


UINT8S = ArraySpec(np.dtype(np.uint8), (None,), max_rows=100)


def test_a_stored_or_deflated_member_of_npy_version_1_or_2_is_read(tmp_path: Path) -> None:
    for method, version in [(zipfile.ZIP_STORED, (1, 0)), (zipfile.ZIP_DEFLATED, (2, 0))]:
        body = npy(np.arange(1, 5, dtype=np.uint8), version)
        path = member(tmp_path / f"{method}.npz", body, method=method)
        assert read_arrays(path, {"x": UINT8S})["x"].tolist() == [1, 2, 3, 4]


def test_a_member_cut_short_of_what_it_declares_is_truncated(tmp_path: Path) -> None:
    header = npy_header((4,))
    path = member(tmp_path / "a.npz", header + bytes(2), size=len(header) + 4)
    message = refused(read_arrays, path, {"x": UINT8S})
    assert message.startswith(f"{path}: ")
    assert "truncated (2 of 4 bytes)" in message or "not a readable .npz file" in message


def npy(array: np.ndarray, version: tuple[int, int] = (1, 0)) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


SQUARE = ArraySpec(np.dtype(np.uint8), (2, 2))
HEADER = npy_header((2, 2))
DECLARES = "archive declares {} bytes for a 4-byte array"
OFF_THE_FORMAT = {  # (the member's bytes, its compression method, the problem)
    "bzip2": (HEADER + bytes(4), zipfile.ZIP_BZIP2, "compression method 12 is not allowed"),
    "longer": (HEADER + bytes(5), 0, DECLARES.format(len(HEADER) + 5)),
    "shorter": (HEADER + bytes(3), 0, DECLARES.format(len(HEADER) + 3)),
    "fortran": (
        npy(np.ones((2, 2), np.uint8, order="F")),
        0,
        "Fortran-ordered arrays are not supported",
    ),
    "npy 3.0": (npy(np.ones((2, 2), np.uint8), (3, 0)), 0, ".npy format (3, 0) is not supported"),
}


@pytest.mark.parametrize("case", list(OFF_THE_FORMAT))
def test_a_member_off_the_format_is_refused(tmp_path: Path, case: str) -> None:
    body, method, problem = OFF_THE_FORMAT[case]
    path = member(tmp_path / "a.npz", body, method=method)
    assert refused(read_arrays, path, {"x": SQUARE}) == f"{path}: x: {problem}"


def test_a_damaged_header_says_why(tmp_path: Path) -> None:
    body = npy_header((4,)).replace(b"'shape'", b"'shapf'") + bytes(4)
    path = member(tmp_path / "a.npz", body)
    message = refused(read_arrays, path, {"x": UINT8S})
    assert message.startswith(f"{path}: x: not an .npy header (")
    assert "shapf" not in message or len(message) < 300


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_header_longer_than_max_header_bytes_is_refused_with_numpys_reason(
    tmp_path: Path, version: tuple[int, int]
) -> None:
    """numpy's own bound is 10000 bytes; steps.lib.npz asks for MAX_HEADER_BYTES (4096)."""
    text = repr({"descr": "|u1", "fortran_order": False, "shape": (4,)})
    length = 5000
    text = text + " " * (length - len(text) - 1) + "\n"
    prefix = b"\x93NUMPY" + bytes(version)
    prefix += length.to_bytes(2 if version == (1, 0) else 4, "little")
    path = member(tmp_path / "a.npz", prefix + text.encode() + bytes(4))
    reason = "Header info length (5000) is large and may not be safe to load securely. To allow"
    message = refused(read_arrays, path, {"x": UINT8S})
    assert message.startswith(f"{path}: x: not an .npy header ({reason}")
    inside = message[len(f"{path}: x: not an .npy header (") : -1]
    assert len(inside) == 120 and message.endswith(")")


# what a newer zipfile, zlib or numpy may raise, raised in their place: one line, or the error's type
@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (zipfile.BadZipFile("a \n reason,   " + "x" * 200), "a reason, " + "x" * 150),
        (EOFError(), "EOFError"),
    ],
    ids=["long, spaced text", "no text"],
)
def test_an_archive_error_is_quoted_in_one_line_of_at_most_160_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, reason: str
) -> None:
    def raise_it(path: Path) -> None:
        raise error

    monkeypatch.setattr(npz, "_check_directory", raise_it)
    path = write_npz(tmp_path / "a.npz", x=np.zeros(4, np.uint8))
    assert (
        refused(read_arrays, path, {"x": UINT8S}) == f"{path}: not a readable .npz file ({reason})"
    )


def test_a_header_error_without_text_is_named_by_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def raise_it(stream: object) -> None:
        raise MemoryError

    monkeypatch.setattr(np.lib.format, "read_magic", raise_it)
    path = write_npz(tmp_path / "a.npz", x=np.zeros(4, np.uint8))
    assert (
        refused(read_arrays, path, {"x": UINT8S}) == f"{path}: x: not an .npy header (MemoryError)"
    )


def test_a_zip_bomb_is_refused_from_its_header_at_a_small_peak(tmp_path: Path) -> None:
    bomb = zip_bomb_npz(tmp_path / "bomb.npz", rows=1_000_000)  # 0.8 MB declaring 784 MB
    assert bomb.stat().st_size < 1 << 20
    peak, output = peak_memory_mb(READ_SHARD.format(bomb))
    assert "more than 250000 rows" in output
    assert peak < 200, f"peak {peak:.0f} MB"


def test_a_wide_central_directory_is_refused_before_one_entry_is_parsed(tmp_path: Path) -> None:
    wide = wide_directory_npz(tmp_path / "wide.npz", 300_000)  # a million cost 635 MB and 10.6 s
    peak, output = peak_memory_mb(
        "import zipfile\n"
        "entries = []\n"
        "make_entry = zipfile.ZipInfo.__init__\n"
        "zipfile.ZipInfo.__init__ = lambda self, *a, **k: entries.append(1) or make_entry(self, *a, **k)\n"
        f"{READ_SHARD.format(wide)}\n"
        "print(len(entries))\n"
    )
    message, entries = output.splitlines()
    assert peak < 80, f"peak {peak:.0f} MB"  # 176 MB before the directory was bounded
    assert entries == "0" and "central directory is 15300000 bytes" in message


def test_a_corrupt_deflate_stream_is_not_a_readable_npz(tmp_path: Path) -> None:
    path = corrupt_deflate_npz(tmp_path / "corrupt.npz")
    assert "not a readable .npz file" in refused(
        read_arrays, path, {"x": ArraySpec(np.dtype(np.uint8), (None, 28, 28), max_rows=200)}
    )
