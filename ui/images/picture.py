"""The confusion picture a published run carries beside its metrics: publish refuses one the page would not
show, and the page shows it only as read here, once per model (the page draws one from metrics.json
otherwise).

The store is not trusted more than an upload: the picture gets an upload's bounds (ui.images.decode: the
chunks Pillow walks one by one in Python, the memory its decoder holds) and its own (a PNG of at most
2 MB and 4 megapixels), and is decoded then written again as a plain PNG no wider than the page shows
it. So what st.image opens (twice) on every rerun is a file of three chunks: a 2 MB picture of 174,221
empty chunks cost 1.3 to 2.8 s of CPU per rerun. The run's other files are read and checked by
steps.lib.registry and steps.lib.published.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from steps.lib.errors import StepError
from steps.lib.input_files import read_small_file
from steps.lib.registry import CONFUSION_FILE
from ui.images.block_counts import PNG_SIGNATURE
from ui.images.decode import ImageRejected, decode

MAX_PICTURE_BYTES = 2 * 1024 * 1024
MAX_PICTURE_PIXELS = 4_000_000
NOT_A_PNG = "The picture is not a PNG."

log = logging.getLogger("mnist-page")


def read_picture(data: bytes) -> bytes:
    """The picture as a plain PNG (8-bit, its chunks only those Pillow writes); ImageRejected saying why
    it cannot be shown."""
    if not data.startswith(PNG_SIGNATURE):
        raise ImageRejected(NOT_A_PNG)
    image = decode(data, max_bytes=MAX_PICTURE_BYTES, max_pixels=MAX_PICTURE_PIXELS)
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        alpha = "transparency" in image.info or "A" in image.getbands()
        image = image.convert("RGBA" if alpha else "RGB")
    buffer = io.BytesIO()
    image.save(
        buffer, format="PNG"
    )  # reduce() kept it under twice 480 px: st.image resizes nothing
    return buffer.getvalue()


def page_picture(data: bytes | None) -> bytes | None:
    """What the page shows of a run's confusion.png: read_picture's PNG, or None (absent or refused)."""
    if data is None:
        return None
    try:
        return read_picture(data)
    except ImageRejected as error:
        log.warning("the run's %s is not shown: %s", CONFUSION_FILE, error)
        return None


def check_attachment(path: Path) -> None:
    """Refuse a file to publish beside a run that the page would refuse: its confusion picture must be
    one read_picture takes. Another attachment is carried as it is: a history.json the page refuses
    only hides the curves (ui.model_source.read_history)."""
    if path.name != CONFUSION_FILE:
        return
    data = read_small_file(path, "attachment", MAX_PICTURE_BYTES)
    try:
        read_picture(data)
    except ImageRejected as error:
        raise StepError(f"attachment {path}: {error}") from None
