"""A published run's small files, read with a size cap and checked before the page shows them.

The store is not trusted more than an upload: `LATEST` is read only up to MAX_POINTER_BYTES, and
`run.json` and `metrics.json` must have the shapes the publish and evaluate steps write (a 10x10
confusion matrix of counts, accuracies in [0, 1], finite numbers). Anything else raises BadRunFile,
which the page treats as "this model is unavailable" while it keeps serving the last good one.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from PIL import Image

from steps.cli import StepError
from steps.registry import RUN_ID
from steps.storage import ArtifactStore, LocalStore

NUM_CLASSES = 10
MAX_POINTER_BYTES = 256  # a run id is far shorter
MAX_JSON_BYTES = 64 * 1024  # metrics.json with its 10x10 matrix is about 2 KB
MAX_PICTURE_BYTES = 2 * 1024 * 1024
MAX_PICTURE_PIXELS = 4_000_000
MAX_TEXT = 200  # characters of a card's text field
MAX_SETTINGS = 50


class BadRunFile(ValueError):
    """A run file that is too big or not of the expected shape; str() says which and why."""


def read_head(path: Path, limit: int) -> bytes | None:
    """Up to `limit` + 1 bytes of a file beside a model file (None if there is none)."""
    store = LocalStore(path.parent)
    return read_key(store, path.name, limit)


def read_key(store: ArtifactStore, key: str, limit: int) -> bytes | None:
    """Up to `limit` + 1 bytes of `key` in `store`, or None when it is absent."""
    try:
        return store.read_head(key, limit)
    except StepError as error:
        raise BadRunFile(str(error)) from None


def capped(data: bytes | None, limit: int, name: str) -> bytes | None:
    if data is not None and len(data) > limit:
        raise BadRunFile(f"{name} is over {limit} bytes")
    return data


def pointer_text(data: bytes | None) -> str | None:
    """The run id a LATEST pointer names (None when empty or absent); BadRunFile if it is not one."""
    if data is None or not data.strip():
        return None
    if len(data) > MAX_POINTER_BYTES:
        raise BadRunFile(f"LATEST holds over {MAX_POINTER_BYTES} bytes, not a run id")
    try:
        run = data.decode().strip()
    except UnicodeDecodeError:
        raise BadRunFile("LATEST is not text") from None
    if not RUN_ID.match(run):
        raise BadRunFile(f"LATEST names {run[:40]!r}, which is not a run id")
    return run


def parse_object(data: bytes, name: str) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise BadRunFile(f"{name} is not JSON") from None
    if not isinstance(value, dict):
        raise BadRunFile(f"{name} is not a JSON object")
    return value


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def share(value: object, name: str) -> float:
    if not is_number(value) or not 0 <= value <= 1:
        raise BadRunFile(f"{name} is not a number in [0, 1]")
    return float(value)


def text_field(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise BadRunFile(f"{name} is not a short text")
    return value


def check_card(data: bytes | None, run: str) -> dict:
    """run.json as the page shows it: run, published_at, accuracy, settings (missing: the run alone)."""
    if data is None:
        return {"run": run}
    raw = parse_object(capped(data, MAX_JSON_BYTES, "run.json"), "run.json")
    card: dict = {"run": text_field(raw.get("run", run), "run.json's run")}
    if "published_at" in raw:
        card["published_at"] = text_field(raw["published_at"], "run.json's published_at")
    if "accuracy" in raw:
        card["accuracy"] = share(raw["accuracy"], "run.json's accuracy")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict) or len(settings) > MAX_SETTINGS:
        raise BadRunFile("run.json's settings are not a small JSON object")
    for key, value in settings.items():
        if len(key) > MAX_TEXT or not (
            is_number(value) or (isinstance(value, str) and len(value) <= MAX_TEXT) or value is None
        ):
            raise BadRunFile(f"run.json's setting {key[:40]!r} is not a number or a short text")
    card["settings"] = settings
    return card


def check_matrix(value: object) -> list[list[int]]:
    rows = value if isinstance(value, list) else []
    if len(rows) != NUM_CLASSES or not all(
        isinstance(row, list)
        and len(row) == NUM_CLASSES
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in row)
        for row in rows
    ):
        raise BadRunFile(
            f"metrics.json's confusion_matrix is not {NUM_CLASSES}x{NUM_CLASSES} counts"
        )
    return rows


def check_metrics(data: bytes | None) -> dict | None:
    """metrics.json's accuracy, per-class accuracy and confusion matrix, checked (None when absent)."""
    if data is None:
        return None
    raw = parse_object(capped(data, MAX_JSON_BYTES, "metrics.json"), "metrics.json")
    metrics: dict = {"accuracy": share(raw.get("accuracy"), "metrics.json's accuracy")}
    if "per_class_accuracy" in raw:
        per_class = raw["per_class_accuracy"]
        digits = [str(digit) for digit in range(NUM_CLASSES)]
        if not isinstance(per_class, dict) or sorted(per_class) != digits:
            raise BadRunFile("metrics.json's per_class_accuracy is not one value per digit 0-9")
        metrics["per_class_accuracy"] = {
            digit: share(per_class[digit], f"metrics.json's accuracy of {digit}")
            for digit in digits
        }
    if "confusion_matrix" in raw:
        metrics["confusion_matrix"] = check_matrix(raw["confusion_matrix"])
    for name in ("test_samples", "loss"):
        if name in raw:
            if not is_number(raw[name]) or raw[name] < 0:
                raise BadRunFile(f"metrics.json's {name} is not a non-negative number")
            metrics[name] = raw[name]
    return metrics


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
