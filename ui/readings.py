"""What the page makes of an uploaded, photographed or drawn image, made once per content and kept.

A rerun repeats every widget's value, and the uploader's state may name one file many times, under one id
or several; decoding is what costs (up to about 1.3 s of CPU for the costliest accepted JPEG). So a
file is read once, by the SHA-256 of its bytes (never by a name or id the browser sends), and its
Reading kept for every later rerun and visitor that sends the same bytes (at most MAX_KEPT readings,
the least recently used go first); the same bytes given twice are shown once. A session decodes one
image at a time, and at most MAX_SESSION_DECODE_SECONDS of CPU in all: past that, what it has read
stays shown and anything new is refused with a message.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ui.images.decode import ImageRejected, decode
from ui.pictures import side_by_side
from ui.preprocess import to_mnist

MAX_KEPT = 128  # readings kept for the whole server: each under 0.1 MB (one small picture)
MAX_SESSION_DECODE_SECONDS = 30.0  # twenty of the costliest accepted uploads, and more
UNEXPECTED = "This image could not be processed. Try another photo."
OUT_OF_TIME = (
    "The page has spent on this visit's pictures all the decoding time it gives one visit "
    f"({MAX_SESSION_DECODE_SECONDS:.0f} s of CPU): open the page again to read more."
)

log = logging.getLogger("mnist-page")


@dataclass(frozen=True)
class Reading:
    """One image as the page shows it, or why it cannot be used."""

    pixels: np.ndarray | None = None  # the model's 28x28 input, values in [0, 1]
    pair: bytes | None = None  # the picture sent beside what the model sees (PNG: ui/pictures.py)
    pair_width: int = 0  # its width in pixels, the width to show it at
    refusal: str | None = None  # a message for the visitor when there is nothing to show


@dataclass
class Ledger:
    """One session's decoding: one image at a time, and the CPU seconds spent so far."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    spent: float = 0.0


class Upload(Protocol):
    """What the page needs of a Streamlit UploadedFile."""

    name: str

    def getvalue(self) -> bytes: ...


class Kept:
    """Readings by the digest of their bytes, the least recently used dropped past `size`."""

    def __init__(self, size: int = MAX_KEPT) -> None:
        self.size = size
        self._readings: OrderedDict[bytes, Reading] = OrderedDict()
        self._lock = threading.Lock()  # sessions run in threads of their own

    def get(self, key: bytes) -> Reading | None:
        with self._lock:
            reading = self._readings.get(key)
            if reading is not None:
                self._readings.move_to_end(key)
            return reading

    def put(self, key: bytes, reading: Reading) -> None:
        with self._lock:
            self._readings[key] = reading
            self._readings.move_to_end(key)
            while len(self._readings) > self.size:
                self._readings.popitem(last=False)


KEPT = Kept()  # one for the server: a reading depends on the bytes alone


def digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def read(data: bytes, ledger: Ledger, max_bytes: int) -> Reading:
    """The Reading of `data`: kept from before, or made now within the session's decoding budget."""
    key = digest(data)
    reading = KEPT.get(key)
    if reading is not None:
        return reading
    with ledger.lock:  # one decode at a time per session; another run of it may have made it
        reading = KEPT.get(key)
        if reading is not None:
            return reading
        if ledger.spent >= MAX_SESSION_DECODE_SECONDS:
            return Reading(refusal=OUT_OF_TIME)  # not kept: another session may still read it
        started = time.thread_time()
        try:
            reading = make_reading(data, max_bytes)
        finally:
            ledger.spent += time.thread_time() - started
    KEPT.put(key, reading)
    return reading


def make_reading(data: bytes, max_bytes: int) -> Reading:
    """Decode and preprocess `data`; a bad image, or a bug, gives a Reading with a refusal."""
    try:
        image = decode(data, max_bytes=max_bytes)
        pixels = to_mnist(image)
        pair = side_by_side(image, pixels)
    except ImageRejected as error:
        return Reading(refusal=str(error))
    except Exception:  # a bug must not show a visitor the source; the log keeps it
        log.exception("an image could not be processed")
        return Reading(refusal=UNEXPECTED)
    buffer = io.BytesIO()
    pair.save(buffer, format="PNG")
    return Reading(pixels, buffer.getvalue(), pair.width)


def distinct(uploads: Sequence[Upload]) -> tuple[list[Upload], int]:
    """The uploads once each, by their bytes, in the order given; and how many repeated one before."""
    seen: set[bytes] = set()
    once = []
    for upload in uploads:
        key = digest(upload.getvalue())
        if key not in seen:
            seen.add(key)
            once.append(upload)
    return once, len(uploads) - len(once)


def percent(share: float) -> str:
    """`share` as a percentage with one decimal, rounded down: 0.9997 is "99.9%", never a "100.0%" that
    only certainty earns (rounded to 6 places first, so 0.7 stays 70.0 despite its binary error)."""
    return f"{math.floor(round(share * 1000, 6)) / 10:.1f}%"
