"""metrics.json, as evaluate writes it and publish accepts it: typed, ranged and finite."""

from __future__ import annotations

import math

from steps.cli import StepError
from steps.dataset import MAX_SAMPLES, NUM_CLASSES

MAX_ROUNDS = 1000


def _share(value: object) -> bool:
    """A number in [0, 1] (not a bool, not NaN)."""
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value <= 1


def check_metrics(metrics: object, where: str) -> dict:
    """Return `metrics` if it is a metrics object; StepError naming the first field that is not.

    `accuracy` is required; the other fields evaluate writes are checked when present.
    """
    if not isinstance(metrics, dict):
        raise StepError(f"{where}: expected a JSON object")
    if "accuracy" not in metrics:
        raise StepError(f"{where}: has no 'accuracy'")
    if not _share(metrics["accuracy"]):
        raise StepError(
            f"{where}: 'accuracy' must be a number in [0, 1], got {metrics['accuracy']!r}"
        )
    loss = metrics.get("loss", 0.0)
    if not (type(loss) in (int, float) and math.isfinite(loss) and loss >= 0):
        raise StepError(f"{where}: 'loss' must be a finite number of at least 0")
    samples = metrics.get("test_samples", 1)
    if type(samples) is not int or not 1 <= samples <= MAX_SAMPLES:
        raise StepError(f"{where}: 'test_samples' must be an integer in 1..{MAX_SAMPLES}")
    per_class = metrics.get("per_class_accuracy", {str(d): 0.0 for d in range(NUM_CLASSES)})
    if not (
        isinstance(per_class, dict)
        and sorted(per_class) == sorted(str(d) for d in range(NUM_CLASSES))
        and all(_share(value) for value in per_class.values())
    ):
        raise StepError(
            f"{where}: 'per_class_accuracy' must map the digits 0..9 to numbers in [0, 1]"
        )
    matrix = metrics.get("confusion_matrix", [[0] * NUM_CLASSES] * NUM_CLASSES)
    if not (
        isinstance(matrix, list)
        and len(matrix) == NUM_CLASSES
        and all(isinstance(row, list) and len(row) == NUM_CLASSES for row in matrix)
        and all(type(cell) is int and 0 <= cell <= MAX_SAMPLES for row in matrix for cell in row)
    ):
        raise StepError(f"{where}: 'confusion_matrix' must be 10 rows of 10 counts")
    missing = metrics.get("missing_shards", {})
    if not (
        isinstance(missing, dict)
        and len(missing) <= MAX_ROUNDS
        and all(isinstance(shards, list) for shards in missing.values())
    ):
        raise StepError(f"{where}: 'missing_shards' must be an object of lists")
    return metrics
