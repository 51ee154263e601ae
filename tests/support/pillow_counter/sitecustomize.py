"""Counts what Pillow is asked to do in a server a test starts: each file it opens and each image it
decodes, one line each ("open N bytes", N of an in-memory file, or "decode WIDTHxHEIGHT") appended to
$PILLOW_COUNT_LOG."""

import io
import os

LOG = os.environ.get("PILLOW_COUNT_LOG")

if LOG:
    from PIL import Image, ImageFile

    open_image, load = Image.open, ImageFile.ImageFile.load

    def note(line: str) -> None:
        with open(LOG, "a") as log:
            log.write(line + "\n")

    def counted_open(fp, *args, **kwargs):  # type: ignore[no-untyped-def]
        size = fp.getbuffer().nbytes if isinstance(fp, io.BytesIO) else "?"
        note(f"open {size} bytes")
        return open_image(fp, *args, **kwargs)

    def counted_load(self):  # type: ignore[no-untyped-def]
        if self.tile:  # not decoded yet
            note(f"decode {self.width}x{self.height}")
        return load(self)

    Image.open, ImageFile.ImageFile.load = counted_open, counted_load
