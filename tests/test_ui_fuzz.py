"""Seeded fuzzing of ui.preprocess (the page's and ui.predict's input path): every input ends as a 28x28
input or an ImageRejected message, never another exception, decoding at most once, MAX_PIXELS at most."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageFile

from bench.photos import photo
from tests.support.page import encode, progressive_jpeg
from ui.images.decode import MAX_PIXELS
from ui.preprocess import ImageRejected, prepare

SEED = 16
MUTANTS = 400  # in-process, through prepare()


def seeds() -> list[bytes]:
    """Valid files of every accepted format to mutate: a photo, a digit, a palette image..."""
    digit = np.zeros((28, 28), dtype=np.uint8)
    digit[6:22, 12:16] = 255
    picture = Image.open(io.BytesIO(photo(digit, 0, (160, 120)))).convert("RGB")
    return [
        encode(picture, "JPEG", quality=80),
        encode(picture, "JPEG", quality=80, progressive=True),
        progressive_jpeg(64, 48, scans=12),
        encode(picture, "PNG"),
        encode(picture.convert("P"), "GIF"),
        encode(picture, "BMP"),
        encode(picture, "WEBP", quality=70),
        encode(picture.convert("LA"), "PNG"),
        encode(picture.convert("I;16"), "PNG"),
    ]


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One of: flipped bytes, a cut, a repeated slice, bytes set to extremes, a spliced header."""
    buffer = bytearray(data)
    kind = int(rng.integers(5))
    if kind == 0:
        for _ in range(int(rng.integers(1, 16))):
            buffer[int(rng.integers(len(buffer)))] = int(rng.integers(256))
    elif kind == 1:
        buffer = buffer[: int(rng.integers(1, len(buffer)))]
    elif kind == 2:
        start = int(rng.integers(len(buffer)))
        piece = buffer[start : start + int(rng.integers(1, 64))]
        buffer[start:start] = piece * int(rng.integers(1, 50))
    elif kind == 3:
        for _ in range(int(rng.integers(1, 8))):  # sizes and counts in headers love 0x00 and 0xFF
            position = int(rng.integers(min(len(buffer), 64)))
            buffer[position] = int(rng.choice([0, 0xFF, 0x7F, 0x80]))
    else:
        head = int(rng.integers(4, 40))
        buffer[head:head] = bytes(rng.integers(0, 256, int(rng.integers(1, 32)), dtype=np.uint8))
    return bytes(buffer)


def mutants(count: int) -> list[bytes]:
    rng = np.random.default_rng(SEED)
    originals = seeds()
    return [mutate(originals[index % len(originals)], rng) for index in range(count)]


def test_mutated_images_are_read_or_refused_never_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = {"read": 0, "refused": 0, "decoded": 0}
    decoded: list[int] = []  # the pixels Pillow decoded for one mutant, a decode at a time
    load = ImageFile.ImageFile.load

    def counted_load(self: ImageFile.ImageFile) -> object:
        if self.tile:  # not yet decoded
            decoded.append(self.width * self.height)
        return load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", counted_load)
    for data in mutants(MUTANTS):
        decoded.clear()
        try:
            pixels = prepare(data)
        except ImageRejected as error:
            assert str(error) and "\n" not in str(error)
            outcomes["refused"] += 1
        else:
            assert pixels.shape == (28, 28) and np.isfinite(pixels).all()
            assert pixels.min() >= 0 and pixels.max() <= 1
            outcomes["read"] += 1
        assert len(decoded) <= 1 and sum(decoded) <= MAX_PIXELS, decoded
        outcomes["decoded"] += len(decoded)
    assert outcomes["read"] > 20 and outcomes["refused"] > 20  # both paths were exercised
    assert outcomes["decoded"] >= outcomes["read"]
