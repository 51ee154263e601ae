"""What one upload may cost the page (its pod: 1 CPU, 2 GiB): refused from its header when too costly,
else bounded in memory and in what Pillow decodes, counted in a fresh process."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from PIL import Image, ImageFile

from tests.support.page import (
    cost_of_prepare,
    encode,
    gif_of_comment_blocks,
    jpeg_of_empty_segments,
    lossless_webp,
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
    make: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow's readers would walk the tiny blocks one by one in Python, in Image.open."""
    data = make()
    assert len(data) <= 10 * 1024 * 1024
    monkeypatch.setattr(Image, "open", None)  # refused from its markers: Pillow never parses it
    with pytest.raises(ImageRejected, match=TOO_COSTLY):
        decode(data)


def transparent_palette(side: int) -> bytes:
    """A blank palette PNG with a transparent colour: a few tens of KB for megapixels."""
    image = Image.new("P", (side, side), 0)
    image.putpalette([0, 0, 0, 255, 255, 255])
    return encode(image, "PNG", transparency=0)


def baseline_jpeg_within_10_mb() -> bytes:
    """40 megapixels of texture at the best quality that fits 10 MB: the most entropy to decode."""
    noise = Image.effect_noise((2000, 1500), 60).resize((7300, 5470)).convert("RGB")
    for quality in (85, 75, 65, 55):
        data = encode(noise, "JPEG", quality=quality)
        if len(data) <= 10 * 1024 * 1024:
            return data
    raise AssertionError("no quality fits 10 MB")


PNG_SIDE = int((MAX_DECODED_BYTES / 4) ** 0.5)  # Pillow keeps 4 bytes a pixel of RGB
# Each the costliest of its kind the limits accept. A palette PNG with a transparent colour takes
# 1 + 4 + 4 bytes a pixel (decoded, its RGBA conversion, Image.reduce's premultiplied copy); a run-length
# BMP is padded by Pillow's Python decoder row by row, or read code by code (a run of 1 past a full row).
COSTLIEST = {
    "largest_progressive_jpeg": lambda: progressive_jpeg(7300, 5470, scans=MAX_SCANS),
    "largest_png": lambda: encode(Image.new("RGB", (PNG_SIDE, PNG_SIDE), (230, 230, 230)), "PNG"),
    "largest_baseline_jpeg": baseline_jpeg_within_10_mb,
    "largest_webp": lambda: lossless_webp(int((MAX_DECODED_BYTES / 4 / WEBP_COPIES) ** 0.5)),
    "largest_transparent_palette": lambda: transparent_palette(int((MAX_DECODED_BYTES / 9) ** 0.5)),
    "largest_rle_bmp": lambda: rle8_bmp(int(MAX_RLE_PIXELS**0.5), int(MAX_RLE_PIXELS**0.5)),
    "longest_rle_bmp": lambda: rle8_bmp(
        2, 2, b"\x02\x00" + b"\x01\x00" * ((MAX_RLE_BYTES - 2048) // 2) + b"\x00\x01"
    ),
}


@pytest.mark.slow  # measures each upload in a fresh process
@pytest.mark.parametrize("kind", list(COSTLIEST))
def test_the_costliest_uploads_within_the_limits_stay_within_the_pods_share(
    kind: str, tmp_path: Path
) -> None:
    data = COSTLIEST[kind]()
    assert len(data) <= 10 * 1024 * 1024
    cost = cost_of_prepare(data, tmp_path)
    assert TOO_COSTLY not in cost.outcome and cost.opened == 1, cost  # decoded, not refused
    assert 0 < cost.decoded_pixels <= MAX_PIXELS and cost.megabytes < MAX_MEGABYTES, cost


def test_only_a_few_decodes_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each decode waits inside for others to come in: no more run at once than the slots."""
    data = encode(Image.new("RGB", (1200, 900), "white"), "PNG")
    threads = 3 * MAX_CONCURRENT_DECODES
    running, done, most = 0, 0, 0
    changed = threading.Condition()
    load = ImageFile.ImageFile.load

    def counted_load(self: ImageFile.ImageFile) -> object:
        nonlocal running, done, most
        if not self.tile:  # decoded already
            return load(self)
        with changed:
            running += 1
            most = max(most, running)
            changed.notify_all()
            changed.wait_for(
                lambda: most == MAX_CONCURRENT_DECODES or running + done == threads, timeout=10
            )
        try:
            return load(self)
        finally:
            with changed:
                running, done = running - 1, done + 1
                changed.notify_all()

    monkeypatch.setattr(ImageFile.ImageFile, "load", counted_load)
    started = [threading.Thread(target=decode, args=(data,)) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join(timeout=120)
    assert most == MAX_CONCURRENT_DECODES and done == threads
    assert decoding.DECODE_SLOTS._value == MAX_CONCURRENT_DECODES  # every slot given back
