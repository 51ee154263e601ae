"""Turn an untrusted image of one digit into the 28x28 input MNIST models expect.

MNIST digits are white ink on black, cropped to the ink, scaled so the longer side is 20 px (aspect kept,
anti-aliased) and placed in a 28x28 field with their centre of mass at the centre. A photograph of a
digit is usually the opposite: dark ink on light paper, anywhere in a large frame. `to_mnist` undoes
that; `decode` opens the bytes defensively first.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
from PIL import Image, ImageOps

MB = 1024 * 1024  # as Streamlit counts server.maxUploadSize
SIDE = 28  # the model's input is SIDE x SIDE
BOX = 20  # the digit's longer side inside it, as in MNIST
CENTRE = 14.0  # where MNIST digits have their centre of mass (row and column index, measured)
FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP")  # decoders allowed to see untrusted bytes
EXTENSIONS = ("png", "jpg", "jpeg", "bmp", "gif", "webp")
MAX_PIXELS = 40_000_000  # a 40-megapixel photo is fine; a decompression bomb is not
WORKING_SIDE = 512  # big photos are shrunk to this first: enough for a 20 px digit, and fast
MIN_CONTRAST = 0.15  # ink must differ from the background by this share of the full range
INK_FLOOR = 0.12  # after normalising, weaker signal than this is background noise

NOT_AN_IMAGE = f"This is not an image the page can read (use {', '.join(EXTENSIONS)})."
DAMAGED = "The image is damaged or cut short"
TOO_MANY_PIXELS = (
    f"The image has too many pixels: up to {MAX_PIXELS // 1_000_000} megapixels are accepted."
)

# Pillow warns past MAX_IMAGE_PIXELS and refuses past twice it; here both refuse.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS
warnings.simplefilter("error", Image.DecompressionBombWarning)


class ImageRejected(ValueError):
    """An image the model cannot be asked about; str() is a message for the person who sent it."""


def decode(data: bytes, max_bytes: int | None = None) -> Image.Image:
    """Open and fully decode `data` as one of FORMATS, or raise ImageRejected saying why."""
    if not data:
        raise ImageRejected("The file is empty (0 bytes).")
    if max_bytes is not None and len(data) > max_bytes:
        raise ImageRejected(
            f"The file is {len(data) / MB:.1f} MB; the limit is {max_bytes / MB:.0f} MB."
        )
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)  # reads the header only
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageRejected(TOO_MANY_PIXELS) from None
    except Image.UnidentifiedImageError:
        raise ImageRejected(NOT_AN_IMAGE) from None
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        raise ImageRejected(f"{DAMAGED} ({error})") from None
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ImageRejected(f"{TOO_MANY_PIXELS} This one is {width}x{height}.")
    try:
        image.load()
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        # Pillow reports broken data as any of these: "image file is truncated", "broken data stream"…
        raise ImageRejected(f"{DAMAGED} ({error})") from None
    return image


def to_gray(image: Image.Image) -> np.ndarray:
    """Luminance in [0, 1] as float32; transparent parts become the colour that contrasts with the ink."""
    # Phone photos are often stored sideways; a broken orientation tag leaves the pixels as stored.
    with contextlib.suppress(OSError, ValueError, SyntaxError, TypeError):
        image = ImageOps.exif_transpose(image)
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):  # 16-bit PNGs
        values = np.asarray(image, dtype=np.float32)
        top = 65535.0 if values.max() > 255 else 255.0
        return np.clip(values / top, 0, 1)
    has_alpha = "A" in image.getbands() or "transparency" in image.info
    if not has_alpha:
        return np.asarray(image.convert("L"), dtype=np.float32) / 255.0
    rgba = image.convert("RGBA")
    luminance = np.asarray(rgba.convert("L"), dtype=np.float32) / 255.0
    alpha = np.asarray(rgba.getchannel("A"), dtype=np.float32) / 255.0
    if alpha.sum() == 0:
        return np.zeros_like(luminance)
    # Light ink on a transparent sheet goes onto black, dark ink onto white.
    ink_is_light = float((luminance * alpha).sum() / alpha.sum()) > 0.5
    backdrop = 0.0 if ink_is_light else 1.0
    return luminance * alpha + backdrop * (1 - alpha)


def shrink(gray: np.ndarray, side: int = WORKING_SIDE) -> np.ndarray:
    """Downscale (area-averaging) so the longer side is at most `side`."""
    height, width = gray.shape
    scale = side / max(height, width)
    if scale >= 1:
        return gray
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(gray, mode="F").resize(size, Image.Resampling.BOX))


def ink_map(gray: np.ndarray) -> np.ndarray:
    """0 = background, 1 = the strongest ink, whichever way round the image is."""
    background = float(np.median(gray))
    ink = 1.0 - gray if background > 0.5 else gray  # a light background: the ink is dark
    background = min(background, 1.0 - background)
    peak = float(np.percentile(ink, 99.9))
    if peak - background < MIN_CONTRAST:
        raise ImageRejected(
            "No digit found: the image has no ink that stands out from its background."
        )
    ink = np.clip((ink - background) / (peak - background), 0, 1)
    return np.clip((ink - INK_FLOOR) / (1 - INK_FLOOR), 0, 1)


def crop_to_ink(ink: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero(ink.any(axis=1))
    columns = np.flatnonzero(ink.any(axis=0))
    if len(rows) == 0:
        raise ImageRejected("No digit found: the image is blank.")
    return ink[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1]


def fit_box(ink: np.ndarray, box: int = BOX) -> np.ndarray:
    """Scale so the longer side is `box` pixels, keeping the aspect ratio; the peak becomes 1."""
    height, width = ink.shape
    scale = box / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    resized = np.asarray(Image.fromarray(ink, mode="F").resize(size, Image.Resampling.LANCZOS))
    resized = np.clip(resized, 0, None)
    return resized / resized.max() if resized.max() > 0 else resized


def centre_by_mass(digit: np.ndarray, side: int = SIDE, centre: float = CENTRE) -> np.ndarray:
    """Place `digit` in a side x side field so its centre of mass lands on (centre, centre)."""
    rows, columns = np.indices(digit.shape)
    mass = digit.sum()
    top = round(centre - float((rows * digit).sum() / mass))
    left = round(centre - float((columns * digit).sum() / mass))
    field = np.zeros((side, side), dtype=np.float32)
    height, width = digit.shape
    # the part of the digit that falls inside the field
    y0, x0 = max(0, -top), max(0, -left)
    y1, x1 = min(height, side - top), min(width, side - left)
    field[top + y0 : top + y1, left + x0 : left + x1] = digit[y0:y1, x0:x1]
    return field


def to_mnist(image: Image.Image) -> np.ndarray:
    """28x28 float32 in [0, 1], white digit on black, centred like MNIST; ImageRejected if no ink."""
    ink = ink_map(shrink(to_gray(image)))
    return np.clip(centre_by_mass(fit_box(crop_to_ink(ink))), 0, 1).astype(np.float32)


def prepare(data: bytes, max_bytes: int | None = None) -> np.ndarray:
    """Bytes of an uploaded or drawn image → the model's 28x28 input."""
    return to_mnist(decode(data, max_bytes))
