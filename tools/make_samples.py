"""Write samples/: MNIST test digits as files to try on the page, clean and as a phone would see them.

python -m tools.make_samples [--source mnist.npz] [--out samples]

For each digit 0-9 it takes the first test image with that label and writes `<label>-mnist.png`
(white on black, as in MNIST, enlarged 4x) and `<label>-photo.jpg` (dark ink on light paper, off-centre,
uneven light, noise, JPEG), so the file name starts with the right answer.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from steps.lib.arguments import add_source_argument
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.mnist import NUM_CLASSES, fetch_source, load_mnist
from steps.lib.staged_outputs import atomic_path

ENLARGE = 4  # the clean samples: 28 px is hard to see in a file browser


def photograph(digit: np.ndarray, rng: np.random.Generator) -> bytes:
    """A 28x28 MNIST digit (uint8, white on black) as a JPEG photo of dark ink on light paper.

    The digit is enlarged 2-6x, put somewhere off-centre on a bigger sheet, lit unevenly, given
    sensor noise and JPEG-compressed: what the page has to undo.
    """
    size = int(28 * rng.uniform(2.0, 6.0))
    strength = np.asarray(
        Image.fromarray(digit).resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32
    )
    strength = np.clip(strength / 255.0, 0, 1)[..., np.newaxis]
    height = size + int(rng.integers(40, 240))
    width = size + int(rng.integers(40, 240))
    paper = rng.uniform(205, 245) + rng.uniform(-8, 4, size=3)  # slightly warm or cool white
    light = np.linspace(rng.uniform(0.92, 1.0), rng.uniform(0.96, 1.04), width)  # uneven light
    sheet = np.clip(paper[np.newaxis, np.newaxis, :] * light[np.newaxis, :, np.newaxis], 0, 255)
    sheet = np.repeat(sheet, height, axis=0)
    ink = rng.uniform(15, 70) + rng.uniform(-10, 25, size=3)  # black or blue pen
    top = int(rng.integers(0, height - size + 1))
    left = int(rng.integers(0, width - size + 1))
    patch = sheet[top : top + size, left : left + size]
    sheet[top : top + size, left : left + size] = patch * (1 - strength) + ink * strength
    sheet += rng.normal(0, 4.0, size=sheet.shape)
    pixels = np.clip(sheet, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="RGB").save(
        buffer, format="JPEG", quality=int(rng.integers(70, 92))
    )
    return buffer.getvalue()


def clean(digit: np.ndarray) -> bytes:
    """The MNIST digit as it is (white on black), enlarged for people to see, as PNG."""
    buffer = io.BytesIO()
    side = 28 * ENLARGE
    Image.fromarray(digit).resize((side, side), Image.Resampling.BICUBIC).save(buffer, format="PNG")
    return buffer.getvalue()


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.make_samples", description=__doc__)
    add_source_argument(parser)
    parser.add_argument("--out", type=Path, default=Path("samples"), help="(default: samples)")
    parser.add_argument("--seed", type=int, default=4, help="seed for the photos' looks")
    return parser


def main(args: argparse.Namespace) -> None:
    _, test = load_mnist(fetch_source(args.source))
    rng = np.random.default_rng(args.seed)
    for label in range(NUM_CLASSES):
        matches = np.flatnonzero(test.y == label)
        if len(matches) == 0:
            raise StepError(f"{args.source}: no test digit labelled {label}")
        digit = test.x[matches[0]]
        write_bytes(args.out / f"{label}-mnist.png", clean(digit))
        write_bytes(args.out / f"{label}-photo.jpg", photograph(digit, rng))
    print(f"wrote {2 * NUM_CLASSES} images to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
