"""How many blocks Pillow's GIF and PNG readers walk one by one in Python, counted before they do.

Pillow's GIF reader walks every extension sub-block (and skips stray bytes one at a time) up to the
first image while the file is opened (GifImagePlugin.GifImageFile._seek); its PNG reader handles each
chunk in Python, those before the image data when the file is opened (PngImagePlugin.PngImageFile._open)
and those after it when the image is loaded (load_end). A file of millions of tiny blocks costs seconds
of CPU and hundreds of MB there, whatever its pixels. These walks stop counting past `limit`.
"""

from __future__ import annotations

GIF_SIGNATURES = (b"GIF87a", b"GIF89a")  # GifImagePlugin._accept
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # PngImagePlugin._accept
GIF_SCREEN = 13  # signature, logical screen size, flags, background, aspect ratio


def gif_blocks(data: bytes, limit: int) -> int:
    """The blocks, sub-blocks and stray bytes before a GIF's first image (at most `limit` + 1)."""
    position = GIF_SCREEN
    if len(data) > 10 and data[10] & 0x80:  # a global colour table
        position += 3 << ((data[10] & 7) + 1)
    count = 0
    while position < len(data) and count <= limit:
        introducer = data[position]
        position += 1
        count += 1
        if introducer in b",;":  # the first image, or the end
            break
        if introducer != 0x21:  # a stray byte: Pillow skips it, one at a time
            continue
        position += 1  # the extension's label
        while position < len(data) and count <= limit:
            size = data[position]
            position += 1 + size
            count += 1
            if size == 0:
                break
    return count


def png_chunks(data: bytes, limit: int) -> int:
    """The chunks of a PNG file up to IEND (at most `limit` + 1)."""
    position = len(PNG_SIGNATURE)
    count = 0
    while position + 8 <= len(data) and count <= limit:
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        position += 12 + length  # length, type, data, CRC
        count += 1
        if kind == b"IEND":
            break
    return count
