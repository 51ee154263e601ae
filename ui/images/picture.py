"""The confusion picture a published run carries beside its metrics, shown by the page only if it is a PNG
of sane size (the page draws one from metrics.json otherwise). The store is not trusted more than an
upload; the run's other files are read and checked by steps.lib.registry and steps.lib.published."""

from __future__ import annotations

import io

from PIL import Image

MAX_PICTURE_BYTES = 2 * 1024 * 1024
MAX_PICTURE_PIXELS = 4_000_000


def check_picture(data: bytes | None) -> bytes | None:
    """The confusion matrix picture if it is a PNG of sane size; None otherwise (the page draws one)."""
    if data is None or len(data) > MAX_PICTURE_BYTES:
        return None
    try:
        with Image.open(io.BytesIO(data), formats=("PNG",)) as picture:
            width, height = picture.size
    except Exception:  # any failure to read the header: not a picture to show
        return None
    return data if width * height <= MAX_PICTURE_PIXELS else None
