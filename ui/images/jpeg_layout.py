"""What a JPEG file asks of its decoder, read from its markers before any pixel is decoded.

A JPEG's cost is not its size in bytes: a progressive file makes the decoder hold every DCT coefficient
of the image and walk them once per scan, so a 9 MB file repeating one small scan 100,000 times keeps a
core busy for minutes. `read_layout` walks the header segments (ITU-T T.81, B.1) up to the first scan
and counts the scans that follow. Pillow walks the same segments in Python when it opens the file
(JpegImagePlugin.JpegImageFile._open, fill bytes one at a time), so their number is bounded too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SOI, SOS = 0xD8, 0xDA
STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7 carry no length
# Start-of-frame markers Pillow's decoder reads; DHT (C4), JPG (C8) and DAC (CC) share the range.
FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
PROGRESSIVE = {0xC2, 0xC6, 0xCA, 0xCE}
DCT_FRAMES = {0xC0, 0xC1, 0xC2, 0xC9, 0xCA}  # sequential or progressive, one frame: what photos use
BYTES_PER_BLOCK = 64 * 2  # 8x8 coefficients of 16 bits, as libjpeg keeps them


class BadJpeg(ValueError):
    """The markers are not those of a JPEG the page decodes; str() says why."""


class TooManySegments(BadJpeg):
    """More segments and fill bytes before the first scan than the caller allows."""


@dataclass(frozen=True)
class JpegLayout:
    frame: int  # the SOFn marker's second byte
    width: int
    height: int
    sampling: tuple[tuple[int, int], ...]  # (horizontal, vertical) per component
    scans: int  # SOS markers from the first one on (an upper bound: entropy data cannot hold one)

    @property
    def progressive(self) -> bool:
        return self.frame in PROGRESSIVE

    @property
    def coefficient_bytes(self) -> int:
        """The whole-image coefficient buffer a progressive or multi-scan decode allocates."""
        max_h = max(h for h, _ in self.sampling)
        max_v = max(v for _, v in self.sampling)
        total = 0
        for h, v in self.sampling:
            across = math.ceil(math.ceil(self.width * h / max_h) / 8)
            down = math.ceil(math.ceil(self.height * v / max_v) / 8)
            total += across * down
        return total * BYTES_PER_BLOCK


def read_layout(data: bytes, max_segments: int) -> JpegLayout:
    """The frame and scan count of a JPEG file; BadJpeg if its header is not well formed,
    TooManySegments past `max_segments` segments and fill bytes before the first scan."""
    if data[:2] != b"\xff\xd8":
        raise BadJpeg("no JPEG start marker")
    position = 2
    segments = 0
    frame: tuple[int, int, int, tuple[tuple[int, int], ...]] | None = None
    while True:
        segments += 1
        while (
            segments <= max_segments
            and position < len(data)
            and data[position] == 0xFF
            and data[position + 1 : position + 2] == b"\xff"
        ):
            position += 1  # fill bytes
            segments += 1
        if segments > max_segments:
            raise TooManySegments(f"over {max_segments} segments before the first scan")
        if position + 4 > len(data) or data[position] != 0xFF:
            raise BadJpeg("the header ends before the first scan")
        marker = data[position + 1]
        if marker in STANDALONE:
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if length < 2:
            raise BadJpeg(f"a segment of length {length}")
        if marker in FRAMES:
            frame = (marker, *parse_frame(data[position + 4 : position + 2 + length]))
        if marker == SOS:
            break
        position += 2 + length
    if frame is None:
        raise BadJpeg("no frame header before the first scan")
    marker, width, height, sampling = frame
    return JpegLayout(marker, width, height, sampling, data.count(b"\xff\xda", position))


def parse_frame(segment: bytes) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """(width, height, sampling factors) from a SOFn segment's body."""
    if len(segment) < 6:
        raise BadJpeg("a frame header cut short")
    height = int.from_bytes(segment[1:3], "big")
    width = int.from_bytes(segment[3:5], "big")
    count = segment[5]
    if count == 0 or len(segment) < 6 + 3 * count:
        raise BadJpeg("a frame header without its components")
    sampling = tuple(
        (segment[7 + 3 * index] >> 4, segment[7 + 3 * index] & 0x0F) for index in range(count)
    )
    if any(not (1 <= h <= 4 and 1 <= v <= 4) for h, v in sampling):
        raise BadJpeg("sampling factors outside 1-4")
    return width, height, sampling
