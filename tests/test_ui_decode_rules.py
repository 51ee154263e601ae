"""ui.images.decode's rules one by one, on either side of each limit, with their exact messages."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, ImageOps

from tests.support.page import encode, lossless_webp, progressive_jpeg, rle8_bmp
from ui.images.decode import (
    DAMAGED,
    MAX_BLOCKS,
    MAX_COEFFICIENT_BYTES,
    MAX_DECODED_BYTES,
    MAX_PIXELS,
    MAX_RLE_BYTES,
    MAX_RLE_PIXELS,
    MAX_SCANS,
    MB,
    NOT_AN_IMAGE,
    TOO_COSTLY,
    TOO_MANY_PIXELS,
    WEBP_COPIES,
    ImageRejected,
    bytes_per_pixel,
    check_size,
    decode,
    open_header,
    plan_decoding,
    plan_jpeg,
    plan_reading,
    plan_whole,
    reduce,
    upright,
)
from ui.images.jpeg_layout import read_layout


def png_chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def png_header(width: int, height: int, colour_type: int = 2, *chunks: bytes) -> bytes:
    """A PNG of only its header (8 bits, `colour_type`) and `chunks`: no pixel to decode."""
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + b"".join(chunks) + png_chunk(b"IEND", b"")


EMPTY_CHUNK = png_chunk(b"abCd", b"")  # private, ancillary: a reader skips it


def jpeg_with_size(
    width: int, height: int, *, progressive: bool = False, scans: int = 1, mode: str = "RGB"
) -> bytes:
    """A 16x16 JPEG whose frame claims width x height, `scans` scans, SOF2 if `progressive`."""
    data = encode(Image.new(mode, (16, 16), "gray"), "JPEG", subsampling=0)
    frame = data.index(b"\xff\xc0")
    data = (
        data[:frame]
        + (b"\xff\xc2" if progressive else b"\xff\xc0")
        + data[frame + 2 : frame + 5]
        + struct.pack(">HH", height, width)
        + data[frame + 9 :]
    )
    scan, end = data.index(b"\xff\xda"), data.rindex(b"\xff\xd9")
    return data[:end] + data[scan:end] * (scans - 1) + data[end:]


def rejected(call: object, *args: object) -> str:
    """The message of the ImageRejected that call(*args) raises."""
    with pytest.raises(ImageRejected) as caught:
        call(*args)
    return str(caught.value)


def test_a_file_of_exactly_the_byte_limit_is_accepted_and_one_byte_more_or_none_is_not() -> None:
    assert rejected(check_size, b"", MB) == "The file is empty (0 bytes)."
    check_size(bytes(MB), MB)
    assert rejected(check_size, bytes(MB + 1), MB) == "The file is 1.0 MB; the limit is 1 MB."


def test_a_format_pillow_reads_but_the_page_does_not_is_not_an_image() -> None:
    ppm = encode(Image.new("L", (4, 4)), "PPM")
    assert Image.open(io.BytesIO(ppm)).format == "PPM"
    assert rejected(open_header, ppm) == NOT_AN_IMAGE


def test_a_header_a_reader_fails_on_is_damaged_with_the_readers_reason() -> None:
    bmp = bytearray(encode(Image.new("L", (4, 4)), "BMP"))
    bmp[30:34] = struct.pack("<I", 9)  # compression 9: no such BMP compression
    assert rejected(open_header, bytes(bmp)) == f"{DAMAGED} (Unsupported BMP compression (9))"


def test_exactly_the_pixel_limit_is_accepted_and_a_row_more_is_not() -> None:
    assert MAX_PIXELS == 8000 * 5000
    assert open_header(png_header(8000, 5000)).size == (8000, 5000)
    # Pillow's DecompressionBombWarning, which ui.images.decode makes an error, says it first; where the
    # warning is only recorded (pytest records warnings), open_header's own check says it
    assert rejected(open_header, png_header(8000, 5001)) in (
        TOO_MANY_PIXELS,
        f"{TOO_MANY_PIXELS} This one is 8000x5001.",
    )


@pytest.mark.parametrize("size", [(1, 7), (7, 1), (1, 1)])
def test_one_pixel_wide_or_high_is_an_image(size: tuple[int, int]) -> None:
    assert open_header(encode(Image.new("L", size), "PNG")).size == size


@pytest.mark.parametrize(
    ("mode", "stored"),
    [("1", 1), ("L", 1), ("P", 1), ("I;16", 2), ("I;16B", 2), ("LA", 4), ("RGB", 4), ("I", 4)],
)
def test_bytes_per_pixel_is_what_pillow_stores(mode: str, stored: int) -> None:
    assert bytes_per_pixel(mode) == stored
    assert len(Image.new(mode, (8, 1)).tobytes()) <= 8 * stored


def test_a_png_of_exactly_max_blocks_chunks_is_read_and_one_more_is_refused() -> None:
    plan_reading(png_header(16, 16, 2, *[EMPTY_CHUNK] * (MAX_BLOCKS - 2)))  # with IHDR and IEND
    message = rejected(plan_reading, png_header(16, 16, 2, *[EMPTY_CHUNK] * (MAX_BLOCKS - 1)))
    assert message == f"{TOO_COSTLY}: over {MAX_BLOCKS} blocks to read one by one."


LOSSLESS_JPEG = (
    b"\xff\xd8\xff\xc3\x00\x0b\x08\x00\x10\x00\x10\x01\x01\x11\x00"
    b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00"
)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            LOSSLESS_JPEG,
            f"{NOT_AN_IMAGE.removesuffix('.')}: lossless and hierarchical JPEGs are not.",
        ),
        (b"\xff\xd8\xff\xe0\x00\x01", f"{DAMAGED} (a segment of length 1)"),
        (
            b"\xff\xd8\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00",
            f"{DAMAGED} (no frame header before the first scan)",
        ),
    ],
    ids=["lossless", "short segment", "scan before frame"],
)
def test_jpeg_headers_the_page_does_not_decode_are_refused(data: bytes, message: str) -> None:
    assert rejected(plan_jpeg, data) == message


def test_exactly_max_scans_is_accepted_and_one_more_is_not() -> None:
    assert plan_jpeg(progressive_jpeg(16, 16, scans=MAX_SCANS)).scans == MAX_SCANS
    message = rejected(plan_jpeg, progressive_jpeg(16, 16, scans=MAX_SCANS + 1))
    assert message == f"{TOO_COSTLY}: {MAX_SCANS + 1} scans (up to {MAX_SCANS})."


def test_a_single_scan_baseline_jpeg_holds_no_coefficients_however_big() -> None:
    data = jpeg_with_size(8000, 5000)  # 4:4:4: 240 MB of coefficients, were they all kept
    assert read_layout(data, MAX_BLOCKS).coefficient_bytes > MAX_COEFFICIENT_BYTES
    assert plan_jpeg(data).scans == 1


@pytest.mark.parametrize(
    "data",
    [
        jpeg_with_size(8000, 5000, scans=2),
        jpeg_with_size(8000, 5000, progressive=True),
        jpeg_with_size(8000, 5000, progressive=True, scans=3),
    ],
    ids=["sequential, two scans", "progressive, one scan", "progressive, three scans"],
)
def test_a_multi_scan_or_progressive_jpeg_is_bounded_by_its_coefficients(data: bytes) -> None:
    assert rejected(plan_jpeg, data) == (
        f"{TOO_COSTLY}: a progressive JPEG of 8000x5000 needs 229 MB; save it as a baseline JPEG."
    )


def test_coefficients_of_exactly_the_limit_are_accepted_and_a_block_row_more_is_not() -> None:
    fits = jpeg_with_size(8192, 8192, progressive=True, mode="L")  # 1024x1024 blocks of 128 bytes
    assert read_layout(fits, MAX_BLOCKS).coefficient_bytes == MAX_COEFFICIENT_BYTES
    assert plan_jpeg(fits).progressive
    over = jpeg_with_size(8192, 8200, progressive=True, mode="L")
    assert rejected(plan_jpeg, over) == (
        f"{TOO_COSTLY}: a progressive JPEG of 8192x8200 needs 128 MB; save it as a baseline JPEG."
    )


@pytest.mark.parametrize(
    ("size", "drafted"),
    [
        ((3840, 2000), (480, 250)),  # 1/8 leaves exactly DECODE_SIDE
        ((3832, 2000), (958, 500)),  # 1/8 would leave 479: 1/4
        ((4001, 3001), (501, 376)),  # sides that 8 does not divide round up
        ((1000, 700), (500, 350)),  # 1/2
        ((959, 700), (959, 700)),  # 1/2 would leave 479: whole
    ],
)
def test_a_jpeg_is_drafted_to_the_smallest_scale_that_keeps_decode_side(
    size: tuple[int, int], drafted: tuple[int, int]
) -> None:
    data = encode(Image.new("L", size), "JPEG")
    image = open_header(data)
    plan_decoding(image, data, plan_reading(data))
    assert image.size == drafted


def test_a_jpeg_whose_markers_say_another_size_than_pillow_read_is_refused() -> None:
    data = encode(Image.new("L", (64, 32)), "JPEG")
    other = read_layout(encode(Image.new("L", (32, 64)), "JPEG"), MAX_BLOCKS)
    expected = f"{DAMAGED} (its header is not one the page reads)"
    assert rejected(plan_decoding, open_header(data), data, other) == expected
    assert rejected(plan_decoding, open_header(data), data, None) == expected


RLE_REFUSED = f"{TOO_COSTLY}: a run-length BMP is read up to 4 megapixels and 1 MB; send a PNG."


def test_a_run_length_bmp_of_exactly_the_limits_is_accepted() -> None:
    assert MAX_RLE_PIXELS == 2000 * 2000
    data = rle8_bmp(2000, 2000)
    plan_decoding(open_header(data), data, None)
    header = rle8_bmp(2, 2, b"")
    longest = rle8_bmp(2, 2, bytes(MAX_RLE_BYTES - len(header)))
    assert len(longest) == MAX_RLE_BYTES
    plan_decoding(open_header(longest), longest, None)


@pytest.mark.parametrize(
    ("width", "height", "padding"),
    [(2001, 2000, 0), (6000, 6600, 0), (2, 2, 1)],
    ids=["a pixel row more", "40 megapixels in 26 KB", "a byte more"],
)
def test_a_run_length_bmp_beyond_either_limit_is_refused(
    width: int, height: int, padding: int
) -> None:
    data = rle8_bmp(width, height)
    if padding:
        data = rle8_bmp(width, height, bytes(MAX_RLE_BYTES - len(rle8_bmp(2, 2, b"")) + padding))
    assert rejected(plan_decoding, open_header(data), data, None) == RLE_REFUSED


def test_an_uncompressed_bmp_is_not_held_to_the_run_length_limits() -> None:
    data = encode(Image.new("1", (2100, 2000)), "BMP")  # 4.2 megapixels, 0.5 MB
    image = open_header(data)
    plan_decoding(image, data, None)
    assert decode(data).size == (525, 500)


def test_a_run_length_bmp_within_the_limits_is_decoded() -> None:
    rows = b"\x04\x07\x00\x00" * 4 + b"\x00\x01"  # four rows of four pixels of grey 7
    image = decode(rle8_bmp(4, 4, rows))
    assert image.size == (4, 4)
    assert np.asarray(image.convert("L")).tolist() == [[7] * 4] * 4


def test_a_webp_counts_its_canvas_webp_copies_times() -> None:
    side = int((MAX_DECODED_BYTES / 4 / WEBP_COPIES) ** 0.5)
    assert side * side * 4 * WEBP_COPIES == MAX_DECODED_BYTES
    fits = lossless_webp(side)
    plan_decoding(open_header(fits), fits, None)
    over = lossless_webp(side + 1)
    assert rejected(plan_decoding, open_header(over), over, None) == (
        f"{TOO_COSTLY}: {side + 1}x{side + 1} WEBP takes 64 MB to decode (up to 64 MB); "
        "send a JPEG or a smaller image."
    )


def test_other_formats_count_their_pixels_once() -> None:
    side = 4096  # RGB: 4 bytes a pixel, exactly MAX_DECODED_BYTES
    data = png_header(side, side)
    plan_decoding(open_header(data), data, None)
    plan_whole(open_header(data))
    over = png_header(side, side + 1)
    expected = (
        f"{TOO_COSTLY}: 4096x4097 PNG takes 64 MB to decode (up to 64 MB); "
        "send a JPEG or a smaller image."
    )
    assert rejected(plan_decoding, open_header(over), over, None) == expected
    assert rejected(plan_whole, open_header(over)) == expected


PALETTE = png_chunk(b"PLTE", bytes(range(6)))
TRANSPARENT = png_chunk(b"tRNS", b"\x00")  # colour 0 of the palette


@pytest.mark.parametrize(
    ("colour_type", "chunks", "per_pixel"),
    [
        (3, (PALETTE, TRANSPARENT), 1 + 4 + 4),  # P, then RGBA, then RGBa
        (3, (PALETTE,), 1 + 1),  # P, then L
        (6, (), 4 + 4),  # RGBA, then RGBa
        (4, (), 4 + 4),  # LA, then La
    ],
    ids=["palette with a transparent colour", "palette", "RGBA", "gray with alpha"],
)
def test_the_decoding_counts_the_modes_reduce_makes_of_it_at_full_size(
    colour_type: int, chunks: tuple[bytes, ...], per_pixel: int
) -> None:
    """reduce()'s palette conversion and Image.reduce's premultiplied copy count with the pixels."""
    width = 4000
    height = MAX_DECODED_BYTES // (width * per_pixel)  # the most rows that fit
    plan_whole(open_header(png_header(width, height, colour_type, *chunks)))
    over = open_header(png_header(width, height + 1, colour_type, *chunks))
    assert rejected(plan_whole, over) == (
        f"{TOO_COSTLY}: {width}x{height + 1} PNG takes 64 MB to decode (up to 64 MB); "
        "send a JPEG or a smaller image."
    )


def test_a_one_bit_image_counts_its_gray_conversion() -> None:
    width = 4000
    height = MAX_DECODED_BYTES // (width * 2)  # 1 byte a pixel decoded, 1 converted to gray
    plan_whole(Image.new("1", (width, height)))
    assert rejected(plan_whole, Image.new("1", (width, height + 1))).startswith(
        f"{TOO_COSTLY}: {width}x{height + 1} "
    )


def test_reduce_averages_blocks_of_the_factor() -> None:
    pixels = np.zeros((960, 1440), np.uint8)
    pixels[:, 1::3] = 90  # a column in three is 90: a box of 3x3 averages to 30
    image = reduce(Image.fromarray(pixels))
    assert image.size == (480, 320)
    assert set(np.asarray(image).ravel().tolist()) == {30}
    assert reduce(Image.fromarray(pixels[:959, :959])).size == (959, 959)  # factor 1: as it is


def test_a_two_level_image_is_reduced_to_greys() -> None:
    pixels = np.zeros((960, 960), bool)
    pixels[::2, ::2] = True  # one pixel in four: a box of 2x2 is a quarter white
    image = reduce(Image.fromarray(pixels))
    assert image.mode == "L" and image.size == (480, 480)
    assert set(np.asarray(image).ravel().tolist()) == {64}
    keyed = Image.new("1", (960, 960), 1)
    keyed.info["transparency"] = 0
    assert reduce(keyed).mode == "L"  # a transparency key does not make it RGBA


def test_a_palette_image_is_reduced_to_grey_or_with_its_transparency() -> None:
    opaque = Image.new("P", (960, 960), 1)
    opaque.putpalette([0, 0, 0, 200, 100, 50] + [0] * 762)
    image = reduce(opaque)
    assert image.mode == "L" and image.size == (480, 480)
    assert image.getpixel((0, 0)) == Image.new("RGB", (1, 1), (200, 100, 50)).convert("L").getpixel(
        (0, 0)
    )
    transparent = opaque.copy()
    transparent.info["transparency"] = 1
    image = reduce(transparent)
    assert image.mode == "RGBA" and image.getpixel((0, 0))[3] == 0


def test_a_16_bit_image_is_box_averaged_at_its_depth() -> None:
    pixels = np.zeros((960, 960), np.uint16)
    pixels[:, 480:] = 60000  # a sharp edge: a box average keeps it sharp, a cubic filter rings
    image = reduce(Image.fromarray(pixels).convert("I;16"))
    assert image.mode == "I;16" and image.size == (480, 480)
    row = np.asarray(image, dtype=np.uint16)[0]
    assert row[:240].tolist() == [0] * 240 and row[240:].tolist() == [60000] * 240
    # a sliver keeps at least one pixel across
    assert reduce(Image.new("I;16", (1001, 1))).size == (500, 1)
    assert reduce(Image.new("I;16", (1, 1001))).size == (1, 500)


def test_a_photo_stored_sideways_is_turned_upright() -> None:
    sideways = Image.new("L", (40, 20))
    exif = sideways.getexif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to view
    data = encode(sideways, "JPEG", exif=exif.tobytes())
    assert decode(data).size == (20, 40)


def test_exif_that_breaks_exif_transpose_leaves_the_pixels_as_stored() -> None:
    image = Image.new("L", (40, 20))
    image.getexif()[0x0112] = 6
    image.info["xmp"] = 5  # not text: exif_transpose's rewrite of the XMP orientation fails on it
    with pytest.raises(TypeError):
        ImageOps.exif_transpose(image)
    assert upright(image) is image
