"""The confusion matrix as a picture: rows are true digits, columns predicted ones."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CELL = 44
MARGIN = 60


def draw_confusion(matrix: np.ndarray) -> Image.Image:
    """Cells shaded by each row's share, counts written in; the diagonal is the correct answers."""
    classes = len(matrix)
    size = MARGIN + classes * CELL + 10
    image = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=14)
    shares = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    for row in range(classes):
        for column in range(classes):
            left, top = MARGIN + column * CELL, MARGIN + row * CELL
            shade = int(255 * (1 - shares[row, column]))
            fill = (shade, shade, 255) if row == column else (255, shade, shade)
            draw.rectangle((left, top, left + CELL - 1, top + CELL - 1), fill=fill, outline="#ccc")
            ink = "white" if shares[row, column] > 0.5 else "black"
            draw.text(
                (left + CELL / 2, top + CELL / 2),
                str(matrix[row, column]),
                fill=ink,
                font=font,
                anchor="mm",
            )
        draw.text(
            (MARGIN - 12, MARGIN + row * CELL + CELL / 2),
            str(row),
            fill="black",
            font=font,
            anchor="rm",
        )
        draw.text(
            (MARGIN + row * CELL + CELL / 2, MARGIN - 12),
            str(row),
            fill="black",
            font=font,
            anchor="mb",
        )
    draw.text((MARGIN, 14), "predicted", fill="black", font=font)
    draw.text((6, MARGIN - 30), "true", fill="black", font=font)
    return image
