"""What one upload may cost the page (its pod: 1 CPU, 2 GiB): refused from its header when too costly,
else bounded in memory and in what Pillow decodes, counted in a fresh process."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageFile

from tests.support.page import (
    cost_of_prepare,
    encode,
    gif_of_comment_blocks,
    jpeg_of_empty_segments,
    lossless_webp,
    png_16bit_rgba,
    png_of_empty_chunks,
    progressive_jpeg,
    rle8_bmp,
    with_mpf,
)
from ui.images import decode as decoding
from ui.images.decode import (
    MAX_CONCURRENT_DECODES,
    MAX_DECODED_BYTES,
    MAX_PIXELS,
    MAX_RLE_BYTES,
    MAX_RLE_PIXELS,
    MAX_SCANS,
    TOO_COSTLY,
    WEBP_COPIES,
    ImageRejected,
    decode,
)

MAX_MEGABYTES = 300


@pytest.fixture
def pillow_unused(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if Pillow is asked to parse the file: it must be refused from its markers."""

    def opened(*args: object, **kwargs: object) -> None:
        raise AssertionError("Pillow opened the file")

    monkeypatch.setattr(Image, "open", opened)
    yield


@pytest.fixture
def nothing_decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if Pillow is asked to decode the file: it must be refused from its header."""

    def loaded(self: ImageFile.ImageFile) -> None:
        raise AssertionError(f"Pillow decoded {self.width}x{self.height} pixels")

    monkeypatch.setattr(ImageFile.ImageFile, "load", loaded)
    yield


def test_a_small_png_that_decodes_to_gigabytes_is_refused_from_its_header(
    nothing_decoded: None,
) -> None:
    data = png_16bit_rgba(5000, 4000)  # 20 MP, under the pixel limit; 0.2 MB on disk
    assert len(data) < 1_000_000
    with pytest.raises(ImageRejected, match="The image would take too much memory"):
        decode(data)


def test_an_mpo_index_does_not_lift_the_jpeg_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """An MPF segment makes Pillow call a JPEG "MPO"; libjpeg decodes its first image all the same."""
    data = with_mpf(progressive_jpeg(1024, 1024, scans=2000))
    assert Image.open(io.BytesIO(data)).format == "MPO"
    with monkeypatch.context() as patched:
        patched.setattr(Image, "open", None)  # refused from its markers: Pillow never parses it
        with pytest.raises(ImageRejected, match=f"2000 scans \\(up to {MAX_SCANS}\\)"):
            decode(data)


def test_an_mpo_photo_is_decoded_reduced_like_a_jpeg() -> None:
    data = with_mpf(encode(Image.new("RGB", (4000, 3000), "white"), "JPEG"))
    image = decoding.open_header(data)
    decoding.plan_decoding(image, data, decoding.plan_reading(data))
    assert image.size == (500, 375)  # libjpeg's DCT scaling, asked before a pixel is decoded
    assert decode(data).size == (500, 375)


TEN_MB = 10 * 1024 * 1024 - 4096


@pytest.mark.parametrize(
    "make",
    [
        lambda: gif_of_comment_blocks(TEN_MB),
        lambda: jpeg_of_empty_segments(TEN_MB),
        lambda: png_of_empty_chunks(TEN_MB),
    ],
    ids=["gif comment sub-blocks", "jpeg empty segments", "png empty chunks"],
)
def test_files_of_millions_of_blocks_are_refused_before_pillow_walks_them(
    make: object, pillow_unused: None
) -> None:
    """Pillow's GIF, JPEG and PNG readers walk a file's blocks one by one in Python, in Image.open
    (outside the decode slots): ten megabytes of tiny blocks cost seconds and hundreds of MB there."""
    data = make()
    assert len(data) <= 10 * 1024 * 1024
    with pytest.raises(ImageRejected, match=TOO_COSTLY):
        decode(data)


def transparent_palette(width: int, height: int, format: str) -> bytes:
    """A blank palette image with a transparent colour: a few tens of KB for 40 megapixels."""
    image = Image.new("P", (width, height), 0)
    image.putpalette([0, 0, 0, 255, 255, 255])
    return encode(image, format, transparency=0)


@pytest.mark.parametrize("format", ["PNG", "GIF"])
def test_a_palette_image_with_a_transparent_colour_counts_the_rgba_it_becomes(
    format: str, nothing_decoded: None
) -> None:
    """Shrunk, it is first converted to RGBA at full size: 33 KB took 345 MB while it was counted as
    the one byte a pixel its decoder holds."""
    data = transparent_palette(7300, 5470, format)
    assert len(data) < 50_000
    with pytest.raises(ImageRejected, match=TOO_COSTLY):
        decode(data)


def largest_progressive_jpeg() -> bytes:
    """40 megapixels at 4:2:0, as many scans as accepted: the slowest JPEG within the limits."""
    return progressive_jpeg(7300, 5470, scans=MAX_SCANS)


def largest_png() -> bytes:
    """An RGB PNG whose decoded pixels just fit MAX_DECODED_BYTES (Pillow keeps 4 bytes a pixel)."""
    side = int((MAX_DECODED_BYTES / 4) ** 0.5)
    return encode(Image.new("RGB", (side, side), (230, 230, 230)), "PNG")


def largest_webp() -> bytes:
    """The biggest square WebP canvas accepted."""
    side = int((MAX_DECODED_BYTES / 4 / WEBP_COPIES) ** 0.5)
    return lossless_webp(side)


def largest_transparent_palette() -> bytes:
    """The most pixels a palette PNG with a transparent colour may have: 1 + 4 + 4 bytes each (the
    decoded palette, its RGBA conversion, Image.reduce's premultiplied copy)."""
    side = int((MAX_DECODED_BYTES / 9) ** 0.5)
    return transparent_palette(side, side, "PNG")


def largest_rle_bmp() -> bytes:
    """The most pixels a run-length BMP may have, each row padded by Pillow's Python decoder."""
    side = int(MAX_RLE_PIXELS**0.5)
    return rle8_bmp(side, side)


def longest_rle_bmp() -> bytes:
    """As many bytes as a run-length BMP may have, all codes that Pillow's decoder reads one by one
    without drawing (a run of 1 past the end of a full row)."""
    rows = b"\x02\x00" + b"\x01\x00" * ((MAX_RLE_BYTES - 2048) // 2) + b"\x00\x01"
    return rle8_bmp(2, 2, rows)


def largest_baseline_jpeg() -> bytes:
    """40 megapixels of texture at the best quality that fits 10 MB: the most entropy to decode."""
    noise = Image.effect_noise((2000, 1500), 60).resize((7300, 5470)).convert("RGB")
    for quality in (85, 75, 65, 55):
        data = encode(noise, "JPEG", quality=quality)
        if len(data) <= 10 * 1024 * 1024:
            return data
    raise AssertionError("no quality fits 10 MB")


@pytest.mark.slow  # measures each upload in a fresh process
@pytest.mark.parametrize(
    "make",
    [
        largest_progressive_jpeg,
        largest_png,
        largest_baseline_jpeg,
        largest_webp,
        largest_transparent_palette,
        largest_rle_bmp,
        longest_rle_bmp,
    ],
    ids=lambda f: f.__name__,
)
def test_the_costliest_uploads_within_the_limits_stay_within_the_pods_share(
    make: object, tmp_path: Path
) -> None:
    data = make()
    assert len(data) <= 10 * 1024 * 1024
    cost = cost_of_prepare(data, tmp_path)
    assert TOO_COSTLY not in cost.outcome and cost.opened == 1, cost  # decoded, not refused
    assert 0 < cost.decoded_pixels <= MAX_PIXELS and cost.megabytes < MAX_MEGABYTES, cost


def test_only_a_few_decodes_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    data = encode(Image.new("RGB", (1200, 900), "white"), "PNG")
    running, most = 0, 0
    lock = threading.Lock()
    load = ImageFile.ImageFile.load

    def counted_load(self: ImageFile.ImageFile) -> object:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.05)  # long enough for every thread to arrive
            return load(self)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(ImageFile.ImageFile, "load", counted_load)
    threads = [
        threading.Thread(target=decode, args=(data,)) for _ in range(3 * MAX_CONCURRENT_DECODES)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert most == MAX_CONCURRENT_DECODES
    assert decoding.DECODE_SLOTS._value == MAX_CONCURRENT_DECODES  # every slot given back


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xd8\xff\xe0\x00\x01", "damaged"),
        (b"\xff\xd8\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00", "damaged"),
    ],
    ids=["short segment", "scan before frame"],
)
def test_jpeg_headers_the_page_does_not_decode_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ImageRejected, match=message):
        decoding.plan_jpeg(data)
