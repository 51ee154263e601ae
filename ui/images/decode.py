"""Untrusted bytes → a small Pillow image, with the decoder's CPU and memory bounded before it starts.

A file is judged by what Pillow's reader and decoder will do with it, not by the name they give it:
before Image.open, the blocks its reader walks in Python (JPEG segments, GIF sub-blocks, PNG chunks;
see ui.images.block_counts and ui.images.jpeg_layout) are counted, and for a JPEG the scan count and
coefficient buffer are read from its markers; after it, from the header and the decoder Pillow
picked, the pixels and the memory that decoder will hold. Everything libjpeg decodes (a JPEG, or an
MPO, a JPEG with an index of further images) is decoded reduced (libjpeg's DCT scaling: a
12-megapixel photo comes out at about 500x375), other formats whole and then reduced. At most
MAX_CONCURRENT_DECODES run at once in a process.
"""

from __future__ import annotations

import contextlib
import io
import threading
import warnings

from PIL import BmpImagePlugin, Image, ImageOps, JpegImagePlugin, WebPImagePlugin

from ui.images.block_counts import GIF_SIGNATURES, PNG_SIGNATURE, gif_blocks, png_chunks
from ui.images.jpeg_layout import DCT_FRAMES, BadJpeg, JpegLayout, TooManySegments, read_layout

MB = 1024 * 1024  # as Streamlit counts server.maxUploadSize
MAX_FILE_MB = 10  # .streamlit/config.toml's server.maxUploadSize says the same (a test checks)
FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP")  # decoders allowed to see untrusted bytes
EXTENSIONS = ("png", "jpg", "jpeg", "bmp", "gif", "webp")
MAX_PIXELS = 40_000_000  # a 40-megapixel photo is fine; a decompression bomb is not
MAX_DECODED_BYTES = 64 * MB  # what a format decoded whole may take (a 16-megapixel RGB PNG)
MAX_COEFFICIENT_BYTES = 128 * MB  # a progressive JPEG's coefficients (40 MP at 4:2:0 chroma)
MAX_SCANS = 50  # progressive encoders write about 10; each scan walks the whole image
DECODE_SIDE = (
    480  # images come out with the longer side at least this (if they were), under twice it
)
MAX_CONCURRENT_DECODES = 2
# Blocks Pillow's readers walk one by one in Python (JPEG segments and fill bytes before the first
# scan, GIF sub-blocks before the first image, PNG chunks): a photo has tens, a PNG of 8 KB chunks
# about 1300; each costs Pillow a few microseconds.
MAX_BLOCKS = 10_000
# Run-length BMPs are decoded in Python (BmpImagePlugin.BmpRleDecoder): a loop per code, and per
# pixel when a row ends early; so both are bounded.
MAX_RLE_PIXELS = 4_000_000
MAX_RLE_BYTES = 1 * MB
# Pillow decodes every WebP with libwebp's animation decoder, which holds the canvas several times
# over (a 4096x4096 WebP of 706 bytes peaked at 252 MB): its decoded size counts this many times.
WEBP_COPIES = 4
JPEG_SIGNATURE = b"\xff\xd8\xff"  # JpegImagePlugin._accept
PREMULTIPLIED = ("LA", "RGBA")  # modes Image.reduce copies premultiplied before it shrinks them

NOT_AN_IMAGE = f"This is not an image the page can read (use {', '.join(EXTENSIONS)})."
DAMAGED = "The image is damaged or cut short"


def too_many_pixels(limit: int) -> str:
    return f"The image has too many pixels: up to {limit // 1_000_000} megapixels are accepted."


TOO_MANY_PIXELS = too_many_pixels(MAX_PIXELS)
TOO_COSTLY = "The image would take too much memory or time to decode"

# Pillow warns past MAX_IMAGE_PIXELS and refuses past twice it; here both refuse.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS
warnings.simplefilter("error", Image.DecompressionBombWarning)
DECODE_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_DECODES)


class ImageRejected(ValueError):
    """An image the model cannot be asked about; str() is a message for the person who sent it."""


def check_size(data: bytes, max_bytes: int) -> None:
    if not data:
        raise ImageRejected("The file is empty (0 bytes).")
    if len(data) > max_bytes:
        raise ImageRejected(
            f"The file is {len(data) / MB:.1f} MB; the limit is {max_bytes / MB:.0f} MB."
        )


def open_header(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Pillow's image object with only its header read; ImageRejected for what is not an image."""
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageRejected(TOO_MANY_PIXELS) from None
    except Image.UnidentifiedImageError:
        raise ImageRejected(NOT_AN_IMAGE) from None
    except Exception as error:  # a plugin's parser can fail in any way on crafted bytes
        raise ImageRejected(f"{DAMAGED} ({error})") from None
    width, height = image.size
    if width * height > max_pixels:
        raise ImageRejected(f"{too_many_pixels(max_pixels)} This one is {width}x{height}.")
    if width < 1 or height < 1:
        raise ImageRejected(f"{DAMAGED} (it is {width}x{height})")
    return image


def bytes_per_pixel(mode: str) -> int:
    """What Pillow stores per pixel of `mode` (multi-band modes take four bytes)."""
    if mode in ("1", "L", "P"):
        return 1
    if mode.startswith("I;16"):
        return 2
    return 4


def plan_reading(data: bytes) -> JpegLayout | None:
    """Refuse a file whose reader would walk too many blocks; for a JPEG, one whose decode would cost
    too much (its layout is returned). Runs before Image.open: Pillow's readers walk in Python."""
    if data.startswith(JPEG_SIGNATURE):
        return plan_jpeg(data)
    if data.startswith(GIF_SIGNATURES):
        blocks = gif_blocks(data, MAX_BLOCKS)
    elif data.startswith(PNG_SIGNATURE):
        blocks = png_chunks(data, MAX_BLOCKS)
    else:
        return None
    if blocks > MAX_BLOCKS:
        raise ImageRejected(f"{TOO_COSTLY}: over {MAX_BLOCKS} blocks to read one by one.")
    return None


def plan_jpeg(data: bytes) -> JpegLayout:
    """Refuse a costly JPEG from its markers."""
    try:
        layout = read_layout(data, MAX_BLOCKS)
    except TooManySegments as error:
        raise ImageRejected(f"{TOO_COSTLY}: {error}.") from None
    except BadJpeg as error:
        raise ImageRejected(f"{DAMAGED} ({error})") from None
    if layout.frame not in DCT_FRAMES:
        raise ImageRejected(f"{NOT_AN_IMAGE[:-1]}: lossless and hierarchical JPEGs are not.")
    if layout.scans > MAX_SCANS:
        raise ImageRejected(f"{TOO_COSTLY}: {layout.scans} scans (up to {MAX_SCANS}).")
    if (
        layout.progressive or layout.scans > 1
    ) and layout.coefficient_bytes > MAX_COEFFICIENT_BYTES:
        raise ImageRejected(
            f"{TOO_COSTLY}: a progressive JPEG of {layout.width}x{layout.height} "
            f"needs {layout.coefficient_bytes / MB:.0f} MB; save it as a baseline JPEG."
        )
    return layout


def plan_decoding(image: Image.Image, data: bytes, layout: JpegLayout | None) -> None:
    """Refuse what the decoder Pillow picked would spend too much on; ask libjpeg to decode reduced."""
    if isinstance(image, JpegImagePlugin.JpegImageFile):  # an MPO is one too: libjpeg decodes it
        if layout is None or (layout.width, layout.height) != image.size:
            raise ImageRejected(f"{DAMAGED} (its header is not one the page reads)")
        scale = next(s for s in (8, 4, 2, 1) if max(image.size) // s >= DECODE_SIDE or s == 1)
        if scale > 1:
            image.draft(None, (image.width // scale, image.height // scale))
        return
    if isinstance(image, BmpImagePlugin.BmpImageFile) and any(
        tile.codec_name == "bmp_rle" for tile in image.tile
    ):
        pixels = image.width * image.height
        if pixels > MAX_RLE_PIXELS or len(data) > MAX_RLE_BYTES:
            raise ImageRejected(
                f"{TOO_COSTLY}: a run-length BMP is read up to {MAX_RLE_PIXELS // 1_000_000} "
                f"megapixels and {MAX_RLE_BYTES // MB} MB; send a PNG."
            )
    copies = WEBP_COPIES if isinstance(image, WebPImagePlugin.WebPImageFile) else 1
    plan_whole(image, copies)


def converted_mode(image: Image.Image) -> str | None:
    """The mode reduce() converts `image` to at full size, before it shrinks it; None if it does not."""
    if image.mode == "P":
        return "RGBA" if "transparency" in image.info else "L"
    if image.mode == "1":
        return "L"
    return None


def plan_whole(image: Image.Image, copies: int = 1) -> None:
    """Refuse an image whose decoding would hold more than MAX_DECODED_BYTES at once: `copies` of its
    pixels as its decoder stores them, the conversion reduce() makes of them at full size, and the
    premultiplied copy Image.reduce works on for an image with alpha (Image.reduce: "LA" and
    "RGBA" become "La" and "RGBa" first). A palette image with a transparent colour takes
    1 + 4 + 4 bytes a pixel."""
    reduced = converted_mode(image) or image.mode
    per_pixel = bytes_per_pixel(image.mode) * copies
    if reduced != image.mode:
        per_pixel += bytes_per_pixel(reduced)
    if reduced in PREMULTIPLIED:
        per_pixel += bytes_per_pixel(reduced)
    decoded = image.width * image.height * per_pixel
    if decoded > MAX_DECODED_BYTES:
        raise ImageRejected(
            f"{TOO_COSTLY}: {image.width}x{image.height} {image.format} takes "
            f"{decoded / MB:.0f} MB to decode (up to {MAX_DECODED_BYTES // MB} MB); "
            "send a JPEG or a smaller image."
        )


def reduce(image: Image.Image, side: int = DECODE_SIDE) -> Image.Image:
    """Shrink by a whole factor (box average) so the longer side is under twice `side`."""
    factor = max(image.size) // side
    if factor < 2:
        return image
    converted = converted_mode(image)  # counted by plan_whole
    if converted is not None:
        image = image.convert(converted)
    if image.mode.startswith("I;16"):
        size = (max(1, image.width // factor), max(1, image.height // factor))
        return image.resize(size, Image.Resampling.BOX)
    return image.reduce(factor)


def upright(image: Image.Image) -> Image.Image:
    """Phone photos are often stored sideways; a broken orientation tag leaves the pixels as stored."""
    with contextlib.suppress(Exception):  # EXIF is untrusted too
        return ImageOps.exif_transpose(image)
    return image


def decode(
    data: bytes, max_bytes: int = MAX_FILE_MB * MB, max_pixels: int = MAX_PIXELS
) -> Image.Image:
    """Decode `data` as one of FORMATS, upright and reduced; ImageRejected saying why if it cannot be."""
    check_size(data, max_bytes)
    layout = plan_reading(data)
    image = open_header(data, max_pixels)
    plan_decoding(image, data, layout)
    with DECODE_SLOTS:
        try:
            image.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRejected(TOO_MANY_PIXELS) from None
        except Exception as error:  # "image file is truncated", "broken data stream", …
            raise ImageRejected(f"{DAMAGED} ({error})") from None
        plan_whole(image)  # what was decoded, drafted or not, is within bounds
        try:
            small = reduce(image)
        except Exception as error:
            raise ImageRejected(f"{DAMAGED} ({error})") from None
        if small is not image:
            image.close()  # the full-size pixels go now, not when the caller drops the image
    return upright(small)
