"""The confusion matrix as a picture: rows are true digits, columns predicted ones.

The right answers (the diagonal) are blue by their share of the row; the errors are red on a scale of
their own, against the commonest mistake, so that the few errors a good model makes stand out: on a
scale shared with the right answers, 20 errors among 1000 digits would be all but white.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CELL = 44
MARGIN = 60
LEGEND = 34  # pixels under the matrix for the two scales' legend
LIGHTEST_ERROR = 0.22  # the tint of a single error when the commonest mistake is far more common


def error_tint(count: int, most: int) -> float:
    """How strongly an error cell is coloured, 0 (none) to 1 (the commonest mistake): by the square
    root of its share of the commonest, so one mistake still shows beside dozens."""
    if count <= 0 or most <= 0:
        return 0.0
    return max(LIGHTEST_ERROR, math.sqrt(count / most))


def draw_confusion(matrix: np.ndarray) -> Image.Image:
    """Each cell's count written in it; the right answers blue, the errors red (see the module)."""
    classes = len(matrix)
    size = MARGIN + classes * CELL + 10
    image = Image.new("RGB", (size, size + LEGEND), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=14)
    shares = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    errors = matrix * (1 - np.eye(classes, dtype=matrix.dtype))
    most = int(errors.max()) if errors.size else 0
    for row in range(classes):
        for column in range(classes):
            left, top = MARGIN + column * CELL, MARGIN + row * CELL
            if row == column:
                strength = float(shares[row, column])
                shade = int(255 * (1 - strength))
                fill = (shade, shade, 255)
            else:
                strength = error_tint(int(matrix[row, column]), most)
                shade = int(255 * (1 - 0.85 * strength))
                fill = (255, shade, shade)
            draw.rectangle((left, top, left + CELL - 1, top + CELL - 1), fill=fill, outline="#ccc")
            ink = "white" if strength > 0.6 else "black"
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
    legend = f"blue: right, by the row's share · red: errors, darkest = {most}" if most else ""
    draw.text((MARGIN, size + 6), legend or "blue: right · no errors", fill="#555555", font=font)
    return image
