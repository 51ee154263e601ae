"""MNIST digits rendered as phone photos of ink on paper: the harder test set for the page's preprocessing.

Each photo is one MNIST test digit written on a sheet and photographed badly, drawn at random (seeded)
from these conditions:

- the frame: 4:3, 3:4, 16:9 or 1:1; the digit's height is 15% to 80% of the frame's shorter side, its ink
  anywhere in the frame (a margin of 2% kept), rotated by up to ROTATION degrees;
- the sheet: white, cream or grey paper, with a texture (fibres and blotches) and fine grain;
- the pen: black or blue ink, its stroke a little uneven;
- the light: a linear gradient across the sheet, radial fall-off (vignetting) about an off-centre point,
  and, in most photos, a soft shadow over part of the sheet (a half-plane or a blob with a blurred edge);
- the camera: a colour cast (white balance off), blur, sensor noise, JPEG at quality 50 to 90.

`photo(digit, seed)` gives the JPEG bytes; the same digit and seed always give the same bytes.

python -m bench.photos --source ../shared/data/mnist.npz --out photos/ --count 20 [--megapixels 12]
writes `<index>-<label>.jpg` to look at.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from steps.lib.arguments import add_source_argument
from steps.lib.mnist import fetch_source, load_mnist

DIGIT_SHARE = (0.15, 0.80)  # the digit's ink height / the frame's shorter side
MARGIN = 0.02  # of the shorter side, kept between the ink and the frame's edge
ROTATION = 10.0  # degrees either way
ASPECTS = ((4, 3), (3, 4), (16, 9), (1, 1))
SHORT_SIDE = (360, 1200)  # pixels, when no size is asked for
QUALITY = (50, 90)
SHADOW_CHANCE = 0.7
MNIST_INK_BOX = 20  # MNIST digits' ink fits 20x20 of their 28x28


@dataclass(frozen=True)
class Look:
    """Everything drawn at random for one photo (rng order fixed: the seed decides the photo)."""

    width: int
    height: int
    share: float
    angle: float
    paper: np.ndarray  # RGB in [0, 1]
    ink: np.ndarray  # RGB in [0, 1]
    quality: int


def draw_look(rng: np.random.Generator, size: tuple[int, int] | None) -> Look:
    if size is None:
        across, down = ASPECTS[int(rng.integers(len(ASPECTS)))]
        short = int(rng.integers(*SHORT_SIDE))
        scale = short / min(across, down)
        size = (round(across * scale), round(down * scale))
    else:
        rng.integers(len(ASPECTS)), rng.integers(*SHORT_SIDE)  # keep the draws aligned
    tone = rng.uniform(0.72, 0.97)
    tint = rng.choice(
        [[0.0, 0.0, 0.0], [0.02, 0.0, -0.06], [-0.03, -0.01, 0.02]]
    )  # white, cream, grey
    paper = np.clip(tone + np.asarray(tint) + rng.uniform(-0.015, 0.015, 3), 0, 1)
    if rng.random() < 0.5:  # black pen
        ink = np.full(3, rng.uniform(0.05, 0.22)) + rng.uniform(-0.02, 0.02, 3)
    else:  # blue pen
        ink = np.array([rng.uniform(0.05, 0.2), rng.uniform(0.12, 0.3), rng.uniform(0.45, 0.75)])
    return Look(
        width=size[0],
        height=size[1],
        share=float(rng.uniform(*DIGIT_SHARE)),
        angle=float(rng.uniform(-ROTATION, ROTATION)),
        paper=paper,
        ink=np.clip(ink, 0, 1),
        quality=int(rng.integers(QUALITY[0], QUALITY[1] + 1)),
    )


def smooth_noise(rng: np.random.Generator, width: int, height: int, cells: int) -> np.ndarray:
    """Noise in [-1, 1] varying over about 1/cells of the frame, as float32 (height, width)."""
    coarse = rng.uniform(-1, 1, (cells, cells)).astype(np.float32)
    return np.asarray(
        Image.fromarray(coarse, mode="F").resize((width, height), Image.Resampling.BICUBIC)
    )


def ink_coverage(digit: np.ndarray, look: Look, rng: np.random.Generator) -> np.ndarray:
    """How much ink covers each pixel of the frame, in [0, 1]: the digit scaled, rotated and placed."""
    short = min(look.width, look.height)
    side = max(8, round(28 * look.share * short / MNIST_INK_BOX))
    glyph = Image.fromarray(digit).resize((side, side), Image.Resampling.BICUBIC)
    glyph = glyph.rotate(look.angle, resample=Image.Resampling.BICUBIC, expand=True)
    strength = np.asarray(glyph, dtype=np.float32) / 255.0
    # pen pressure varies along the stroke
    strength *= 1 + 0.15 * smooth_noise(rng, strength.shape[1], strength.shape[0], 4)
    rows, columns = (
        np.flatnonzero(strength.max(axis=1) > 0.1),
        np.flatnonzero(strength.max(axis=0) > 0.1),
    )
    strength = strength[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1]
    height, width = strength.shape
    margin = round(MARGIN * short)
    # a digit too big for the frame after rotation is cut to fit (rare: 80% at 10 degrees fits)
    height, width = min(height, look.height - 2 * margin), min(width, look.width - 2 * margin)
    strength = strength[:height, :width]
    top = int(rng.integers(margin, look.height - margin - height + 1))
    left = int(rng.integers(margin, look.width - margin - width + 1))
    coverage = np.zeros((look.height, look.width), dtype=np.float32)
    coverage[top : top + height, left : left + width] = np.clip(strength, 0, 1)
    return coverage


def lighting(look: Look, rng: np.random.Generator) -> np.ndarray:
    """The light falling on the sheet, as a factor per pixel (height, width): gradient, vignette, shadow."""
    ys, xs = np.mgrid[0 : look.height, 0 : look.width].astype(np.float32)
    ys /= max(look.height, look.width)
    xs /= max(look.height, look.width)
    direction = rng.uniform(0, 2 * math.pi)
    along = xs * math.cos(direction) + ys * math.sin(direction)
    along -= along.mean()
    light = 1 + rng.uniform(0.1, 0.6) * along / max(float(np.ptp(along)), 1e-6)
    centre = rng.uniform(0.2, 0.8, 2) * [look.width, look.height] / max(look.height, look.width)
    radius2 = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2
    light *= 1 - rng.uniform(0.1, 0.45) * radius2 / float(radius2.max())
    if rng.random() < SHADOW_CHANCE:
        light *= shadow(look, rng, xs, ys)
    return light * rng.uniform(0.85, 1.1)


def shadow(look: Look, rng: np.random.Generator, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """1 in the light, down to 1 - depth in the shadow, with a soft edge."""
    depth = rng.uniform(0.25, 0.6)
    softness = rng.uniform(0.01, 0.08)  # of the frame's longer side
    if rng.random() < 0.5:  # a half-plane: the edge of a phone or a hand across the sheet
        angle = rng.uniform(0, 2 * math.pi)
        point = rng.uniform(0.2, 0.8, 2) * [look.width, look.height] / max(look.height, look.width)
        inside = (xs - point[0]) * math.cos(angle) + (ys - point[1]) * math.sin(angle)
    else:  # a blob: the shadow of the head or the phone
        centre = rng.uniform(0.0, 1.0, 2) * [look.width, look.height] / max(look.height, look.width)
        axes = rng.uniform(0.2, 0.6, 2)
        inside = 1 - np.sqrt(((xs - centre[0]) / axes[0]) ** 2 + ((ys - centre[1]) / axes[1]) ** 2)
        inside *= float(axes.min())
    return 1 - depth / (1 + np.exp(-inside / softness))


def camera(rgb: np.ndarray, look: Look, rng: np.random.Generator) -> bytes:
    """Colour cast, blur, sensor noise and JPEG, on an RGB float image in [0, 1]."""
    cast = 1 + rng.uniform(-0.12, 0.12, 3)
    rgb = rgb * cast.astype(np.float32)
    image = Image.fromarray(np.clip(rgb * 255, 0, 255).astype(np.uint8), mode="RGB")
    blur = rng.uniform(0, 1.2) * min(look.width, look.height) / 500
    if blur > 0.3:
        image = image.filter(ImageFilter.GaussianBlur(blur))
    pixels = np.asarray(image, dtype=np.float32)
    sigma = rng.uniform(1.5, 8.0)
    noise = rng.standard_normal((look.height, look.width), dtype=np.float32) * sigma
    chroma = rng.standard_normal((look.height, look.width, 3), dtype=np.float32) * (sigma / 3)
    pixels = pixels + noise[..., np.newaxis] + chroma
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="RGB").save(
        buffer, format="JPEG", quality=look.quality
    )
    return buffer.getvalue()


def photo(digit: np.ndarray, seed: int, size: tuple[int, int] | None = None) -> bytes:
    """A 28x28 MNIST digit (uint8, white on black) as a JPEG phone photo; `size` = (width, height)."""
    rng = np.random.default_rng(seed)
    look = draw_look(rng, size)
    coverage = ink_coverage(digit, look, rng)[..., np.newaxis]
    texture = 0.025 * smooth_noise(rng, look.width, look.height, 12) + 0.01 * smooth_noise(
        rng, look.width, look.height, 60
    )
    paper = look.paper.astype(np.float32) * (1 + texture[..., np.newaxis])
    sheet = paper * (1 - coverage) + look.ink.astype(np.float32) * coverage
    sheet *= lighting(look, rng)[..., np.newaxis]
    return camera(sheet, look, rng)


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.photos", description=__doc__)
    add_source_argument(parser)
    parser.add_argument("--out", type=Path, required=True, help="folder for the photos")
    parser.add_argument("--count", type=int, default=20, help="the first COUNT test digits")
    parser.add_argument("--seed", type=int, default=0, help="photo i uses seed SEED + i")
    parser.add_argument("--megapixels", type=float, help="a fixed 4:3 frame of this size")
    return parser


def frame_of(megapixels: float | None) -> tuple[int, int] | None:
    """A 4:3 (width, height) of about `megapixels`, or None for the random frames."""
    if megapixels is None:
        return None
    height = round(math.sqrt(megapixels * 1e6 * 3 / 4))
    return round(height * 4 / 3), height


def main() -> int:
    args = parse_args().parse_args()
    _, test = load_mnist(fetch_source(args.source))
    args.out.mkdir(parents=True, exist_ok=True)
    for index in range(args.count):
        data = photo(test.x[index], args.seed + index, frame_of(args.megapixels))
        (args.out / f"{index:05d}-{test.y[index]}.jpg").write_bytes(data)
    print(f"wrote {args.count} photos to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
