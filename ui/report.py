"""What the page says of a model's errors, from its metrics.json: the errors of each digit and the
commonest mistakes (pure data; ui/app.py draws them)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from steps.lib.mnist import NUM_CLASSES


def errors_per_digit(matrix: np.ndarray) -> pd.DataFrame:
    """For each true digit, how many test digits were read as another (`misread`) and their share."""
    matrix = np.asarray(matrix)
    totals = matrix.sum(axis=1)
    misread = totals - matrix.diagonal()
    return pd.DataFrame(
        {"misread": misread, "share": misread / np.maximum(totals, 1), "of": totals},
        index=pd.Index([str(digit) for digit in range(NUM_CLASSES)], name="digit"),
    )


def commonest_mistakes(matrix: np.ndarray, count: int) -> list[tuple[int, int, int]]:
    """The `count` commonest mistakes as (true digit, read as, how often), most often first."""
    matrix = np.asarray(matrix)
    mistakes = [
        (true, predicted, int(matrix[true, predicted]))
        for true in range(len(matrix))
        for predicted in range(len(matrix))
        if true != predicted and matrix[true, predicted] > 0
    ]
    return sorted(mistakes, key=lambda mistake: -mistake[2])[:count]
