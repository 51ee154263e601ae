"""Turn an untrusted image of one digit into the 28x28 input MNIST models expect.

MNIST digits are white ink on black, cropped to the ink, scaled so the longer side is 20 px (aspect kept,
anti-aliased) and placed in a 28x28 field with their centre of mass at the centre. A photograph of a
digit is usually the opposite: dark ink on paper, anywhere in a large frame, under uneven light.
`to_mnist` finds the digit, not the lighting, in stages:

1. grayscale at a small working size (`to_gray`, `shrink`);
2. the ink made the dark side (`dark_ink`): light ink on a dark ground is inverted;
3. the paper's brightness estimated locally, by a closing (max then min filter) over a distance wider
   than any stroke, at low resolution (`paper_level`), and divided out: shadows, gradients and
   vignetting become flat paper, and the ink becomes its share of darkening (`flatten`);
4. a threshold from the data (Otsu's method on the pixels above the paper's grain, `ink_level`);
5. the connected ink that forms the digit (`digit_parts`): the strongest part not touching the frame's
   edge, with the parts near it; specks, paper edges and shadows at the border are dropped;
6. cropped, the longer side scaled to 20 px, centred by mass (`crop_to_ink`, `fit_box`,
   `centre_by_mass`), values in [0, 1].
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage

from ui.images.decode import ImageRejected, decode

SIDE = 28  # the model's input is SIDE x SIDE
BOX = 20  # the digit's longer side inside it, as in MNIST
CENTRE = 14.0  # where MNIST digits have their centre of mass (row and column index, measured)
WORKING_SIDE = 512  # the longer side the stages work at: enough for a digit at 15% of the frame
GROUND_SIDE = 16  # the longer side of the image the ground's median is taken on
PAPER_SIDE = 64  # the longer side of the image the paper's level is estimated on
PAPER_REACH = 0.3  # the closing's width, as a share of the shorter side: wider than a stroke
LIGHT_INK_MARGIN = 1.5  # light ink must stand out this much more than dark: paper is the usual case
DARKEST_PAPER = 0.25  # contrast on paper darker than this is measured against this
MIN_CONTRAST = 0.15  # ink must darken the paper by at least this share
GRAIN = 0.04  # flattened paper varies by about this much; Otsu looks only above it
KEEP_SHARE = 0.08  # parts with less ink than this share of the digit's main part are specks
NEAR = 0.3  # parts this far (share of the main part's size) beyond its box still belong to it


def to_gray(image: Image.Image) -> np.ndarray:
    """Luminance in [0, 1] as float32; transparent parts become the colour that contrasts with the ink."""
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):  # 16-bit PNGs
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


def resize(values: np.ndarray, size: tuple[int, int], method: Image.Resampling) -> np.ndarray:
    """A float32 array resized to (width, height) by Pillow."""
    return np.asarray(Image.fromarray(values, mode="F").resize(size, method))


def shrink(gray: np.ndarray, side: int = WORKING_SIDE) -> np.ndarray:
    """Downscale (area-averaging) so the longer side is at most `side`."""
    height, width = gray.shape
    scale = side / max(height, width)
    if scale >= 1:
        return gray
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return resize(gray, size, Image.Resampling.BOX)


def dark_ink(gray: np.ndarray) -> np.ndarray:
    """`gray` with the ink darker than its ground: inverted when the ink is the light side.

    The ground is the median over most of the frame, at low resolution (a median keeps the edges of
    shadows, and ink covers less than half of any such window); the ink is whichever side departs
    furthest from it (the light side by a margin: dark ink on paper is the common case).
    """
    small = shrink(gray, GROUND_SIDE)
    ground = ndimage.median_filter(small, size=odd(0.8 * min(small.shape)), mode="nearest")
    ground = resize(ground, gray.shape[::-1], Image.Resampling.BILINEAR)
    departure = (gray - ground)[::2, ::2]  # every other pixel says as much, four times faster
    darker, lighter = np.percentile(departure, [0.05, 99.95])
    return 1.0 - gray if lighter > LIGHT_INK_MARGIN * -darker else gray


def odd(length: float) -> int:
    return max(3, int(length) // 2 * 2 + 1)


def paper_level(paper: np.ndarray) -> np.ndarray:
    """The brightness the paper would have without ink, per pixel: a closing at low resolution."""
    small = shrink(paper, PAPER_SIDE)
    size = odd(PAPER_REACH * min(small.shape))
    closed = ndimage.uniform_filter(
        ndimage.grey_closing(small, size=(size, size), mode="nearest"), 3
    )
    return resize(closed, paper.shape[::-1], Image.Resampling.BILINEAR)


def flatten(paper: np.ndarray, level: np.ndarray) -> np.ndarray:
    """How much the ink darkens the paper at each pixel, in [0, 1]: the light divided out."""
    return np.clip((level - paper) / np.maximum(level, DARKEST_PAPER), 0, 1)


def ink_level(ink: np.ndarray) -> float:
    """Otsu's threshold between paper and ink, over the pixels that stand above the paper's grain."""
    values = ink[ink > GRAIN]
    counts, edges = np.histogram(values, bins=128, range=(GRAIN, 1.0))
    below = np.cumsum(counts)[:-1]  # pixels at or under each candidate level
    above = len(values) - below
    if not (below * above).any():  # one level only (a drawing, a clean scan): halfway to it
        return (GRAIN + float(values.max(initial=GRAIN))) / 2
    centres = (edges[:-1] + edges[1:]) / 2
    mass_below = np.cumsum(counts * centres)[:-1]
    split = (below > 0) & (above > 0)
    mean_below = np.divide(mass_below, below, out=np.zeros_like(mass_below), where=split)
    mean_above = np.divide(
        mass_below[-1] + counts[-1] * centres[-1] - mass_below,
        above,
        out=np.zeros_like(mass_below),
        where=split,
    )
    between = np.where(split, below * above * (mean_below - mean_above) ** 2, -1)
    return float(edges[int(np.argmax(between)) + 1])


def digit_parts(strong: np.ndarray, ink: np.ndarray) -> np.ndarray:
    """The connected parts of `strong` (ink above the threshold) that form the digit, as a mask.

    The main part is the one with the most ink among those that do not touch the frame's edge (all
    parts, if every one does); parts with at least KEEP_SHARE of its ink near its box join it.
    """
    labels, count = ndimage.label(strong, structure=np.ones((3, 3), dtype=bool))
    if count == 0:
        raise ImageRejected("No digit found: the image is blank.")
    masses = np.asarray(ndimage.sum_labels(ink, labels, np.arange(1, count + 1)))
    boxes = np.array([(r.start, r.stop, c.start, c.stop) for r, c in ndimage.find_objects(labels)])
    at_edge = np.zeros(count + 1, dtype=bool)
    for border in (labels[0], labels[-1], labels[:, 0], labels[:, -1]):
        at_edge[border] = True
    inside = ~at_edge[1:] & (masses > 0)
    pool = inside if inside.any() else np.ones(count, dtype=bool)
    main = int(np.argmax(np.where(pool, masses, -1)))
    top, bottom, left, right = boxes[main]
    reach = NEAR * max(bottom - top, right - left)
    near = (
        (boxes[:, 0] < bottom + reach)
        & (boxes[:, 1] > top - reach)
        & (boxes[:, 2] < right + reach)
        & (boxes[:, 3] > left - reach)
    )
    keep = np.concatenate([[False], pool & near & (masses >= KEEP_SHARE * masses[main])])
    return keep[labels]


def digit_ink(ink: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """The ink of the digit's parts (with their soft edges) cropped to them, the strokes' cores at 1.

    The strokes are found again by Otsu's threshold within the digit's box, so what lies elsewhere in
    the frame (a dark table, a shadow) does not sway how bold the digit comes out.
    """
    rows, columns = np.flatnonzero(parts.any(axis=1)), np.flatnonzero(parts.any(axis=0))
    box = (
        slice(max(rows[0] - 2, 0), rows[-1] + 3),
        slice(max(columns[0] - 2, 0), columns[-1] + 3),
    )
    ink, parts = ink[box], parts[box]
    strokes = (ink > ink_level(ink)) & ndimage.binary_dilation(parts, iterations=2)
    if not strokes.any():
        strokes = parts
    core = float(np.median(ink[strokes]))
    return np.clip(ink * ndimage.binary_dilation(strokes) / max(core, 1e-3), 0, 1).astype(
        np.float32
    )


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
    resized = np.clip(resize(ink, size, Image.Resampling.LANCZOS), 0, None)
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


def strongest(ink: np.ndarray) -> float:
    """The ink level that 1 pixel in 2000 reaches: a few noisy pixels do not make a digit."""
    rank = ink.size // 2000 + 1
    return float(np.partition(ink, -rank, axis=None)[-rank])


def find_ink(gray: np.ndarray) -> np.ndarray:
    """Ink in [0, 1] per pixel, the lighting divided out; ImageRejected when nothing stands out."""
    paper = dark_ink(gray)
    ink = flatten(paper, paper_level(paper))
    if strongest(ink) < MIN_CONTRAST:
        raise ImageRejected(
            "No digit found: the image has no ink that stands out from its background."
        )
    return ink


def to_mnist(image: Image.Image) -> np.ndarray:
    """28x28 float32 in [0, 1], white digit on black, centred like MNIST; ImageRejected if no ink."""
    ink = find_ink(shrink(to_gray(image)))
    parts = digit_parts(ink > max(ink_level(ink), MIN_CONTRAST / 2), ink)
    digit = digit_ink(ink, parts)
    return np.clip(centre_by_mass(fit_box(crop_to_ink(digit))), 0, 1).astype(np.float32)


def prepare(data: bytes) -> np.ndarray:
    """Bytes of an uploaded or drawn image → the model's 28x28 input."""
    return to_mnist(decode(data))
