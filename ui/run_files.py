"""A published run's small files as the page reads them: each read with a size cap, then checked.

The store is not trusted more than an upload. `LATEST`, `run.json` and `metrics.json` are checked by
steps.lib.published, the same functions and bounds publish applies before it publishes a run, so the page
refuses nothing publish writes and shows nothing publish would refuse. Anything else raises BadRunFile,
which the page treats as "this model is unavailable" while it keeps serving the last good one.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from steps.lib.errors import StepError
from steps.lib.published import (
    MAX_FILE_BYTES,
    MAX_POINTER_BYTES,
    BadRunFile,
    read_card,
    read_metrics,
)
from steps.lib.published import check_pointer as pointer_text
from steps.lib.storage import ArtifactStore, LocalStore

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_PICTURE_BYTES",
    "MAX_POINTER_BYTES",
    "BadRunFile",
    "check_card",
    "check_metrics",
    "check_picture",
    "pointer_text",
    "read_head",
    "read_key",
]

MAX_JSON_BYTES = MAX_FILE_BYTES  # run.json and metrics.json
MAX_PICTURE_BYTES = 2 * 1024 * 1024
MAX_PICTURE_PIXELS = 4_000_000


def read_head(path: Path, limit: int) -> bytes | None:
    """Up to `limit` + 1 bytes of a file beside a model file (None if there is none)."""
    store = LocalStore(path.parent)
    return read_key(store, path.name, limit)


def read_key(store: ArtifactStore, key: str, limit: int) -> bytes | None:
    """Up to `limit` + 1 bytes of `key` in `store`, or None when it is absent."""
    try:
        return store.read_head(key, limit)
    except BadRunFile:
        raise
    except StepError as error:
        raise BadRunFile(str(error)) from None


def check_card(data: bytes | None, run: str) -> dict:
    """run.json as the page shows it: run, published_at (in UTC), accuracy, settings (missing: the
    run alone)."""
    return read_card(data, run)


def check_metrics(data: bytes | None) -> dict | None:
    """metrics.json: accuracy, per-class accuracy, confusion matrix, … checked (None when absent)."""
    return read_metrics(data)


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
