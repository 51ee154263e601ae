"""A published run's small files, LATEST, run.json and metrics.json: their bounds and shapes, in one place.

evaluate checks the metrics it writes, publish checks every file before it publishes anything, and the page
(ui/model_source.py) checks what it reads, all with these functions (read from a store by
steps.lib.registry): a run publish accepts is a run the page shows, and the page refuses nothing publish
would write. The store is not trusted: every file is read up to its bound, parsed by
steps.lib.bounded_json.parse_json (UTF-8, no NaN or Infinity, nesting refused cleanly), and must have the
shape the pipeline writes.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import overload

from steps.lib import defaults
from steps.lib.bounded_json import is_number, parse_json
from steps.lib.errors import StepError
from steps.lib.mnist import MAX_SAMPLES, NUM_CLASSES

# A run id is an Argo workflow name: a DNS-1123 subdomain of at most 63 characters
# (workflow/validate/validate.go: maxCharsInObjectName)
RUN_ID = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")  # metrics.json's test_sha256: the digits it was scored on
MAX_POINTER_BYTES = 256  # LATEST holds a run id: 63 characters at most
MAX_FILE_BYTES = 64 << 10  # run.json is ~0.5 KB, metrics.json with its 10x10 matrix ~2 KB
MAX_TEXT = 200  # characters of a card's run or published_at, or a setting's name
MAX_SETTING_TEXT = (
    1024  # a setting's text value: a path or a gs:// URI (a GCS object name: 1024 bytes)
)
MAX_SETTINGS = 50
MAX_ROUNDS = 1000  # rounds recorded in metrics.json's missing_shards
MAX_SHARD_ID = 64  # characters of a shard id there
DIGITS = tuple(str(digit) for digit in range(NUM_CLASSES))


class BadRunFile(StepError):
    """A published file that is too big or not of the expected shape; str() says which and why."""


def share(value: object, name: str) -> float:
    """A number in [0, 1]."""
    if not (is_number(value) and 0 <= value <= 1):
        raise BadRunFile(f"{name} must be a number in [0, 1], got {str(value)[:40]}")
    return float(value)


def count(value: object, name: str, low: int = 0) -> int:
    """An integer in low..MAX_SAMPLES (not a bool)."""
    if type(value) is not int or not low <= value <= MAX_SAMPLES:
        raise BadRunFile(
            f"{name} must be an integer in {low}..{MAX_SAMPLES}, got {str(value)[:40]}"
        )
    return value


def text(value: object, name: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BadRunFile(f"{name} is not a text of at most {limit} characters")
    return value


def parse_object(data: bytes | str, name: str, limit: int = MAX_FILE_BYTES) -> dict:
    """A JSON object from at most `limit` bytes of untrusted text."""
    if len(data) > limit:
        raise BadRunFile(f"{name} is over {limit} bytes")
    try:
        value = parse_json(data, name, limit)
    except StepError as error:
        raise BadRunFile(str(error)) from None
    if not isinstance(value, dict):
        raise BadRunFile(f"{name} is not a JSON object")
    return value


def check_pointer(data: bytes | None) -> str | None:
    """The run id LATEST names (None when empty or absent); BadRunFile if it is not one."""
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


def published_time(value: object, name: str = "run.json's published_at") -> dt.datetime:
    """An ISO 8601 time with its UTC offset, as a UTC datetime; BadRunFile for one that is not, or
    that leaves datetime's range once converted (0001-01-01T00:00:00+14:00)."""
    try:
        stamp = dt.datetime.fromisoformat(text(value, name))
    except ValueError:
        raise BadRunFile(f"{name} is not an ISO 8601 time") from None
    if stamp.utcoffset() is None:
        raise BadRunFile(f"{name} has no UTC offset")
    try:
        return stamp.astimezone(dt.UTC)
    except (OverflowError, ValueError):
        raise BadRunFile(f"{name} is out of range") from None


def stamp_text(moment: dt.datetime) -> str:
    """A UTC time as run.json holds it; of two such texts the later time sorts last."""
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def check_settings(settings: object) -> dict:
    """run.json's settings: at most MAX_SETTINGS names, each a number, a text or null."""
    if not isinstance(settings, dict) or len(settings) > MAX_SETTINGS:
        raise BadRunFile(f"run.json's settings are not a JSON object of at most {MAX_SETTINGS}")
    for key, value in settings.items():
        text(key, "a setting's name")
        if not (
            is_number(value)
            or value is None
            or (isinstance(value, str) and len(value) <= MAX_SETTING_TEXT)
        ):
            raise BadRunFile(
                f"run.json's setting {key[:40]!r} is not a number, null or a text of at most "
                f"{MAX_SETTING_TEXT} characters"
            )
    return settings


NO_DEFAULT = object()  # equal to no setting's value


def default_of(name: str) -> object:
    """The default of the setting a card names as its flag is named (`learning-rate` → LEARNING_RATE),
    or NO_DEFAULT when the project has no such setting."""
    return getattr(defaults, name.upper().replace("-", "_"), NO_DEFAULT)


def differing(settings: dict) -> dict:
    """The settings of a card that are not the project's defaults, in the card's order."""
    return {name: value for name, value in settings.items() if value != default_of(name)}


def check_card(card: object, run: str) -> dict:
    """run.json: run, published_at, accuracy and settings, each checked when present; published_at
    comes back as UTC (stamp_text)."""
    if not isinstance(card, dict):
        raise BadRunFile("run.json is not a JSON object")
    checked: dict = {"run": text(card.get("run", run), "run.json's run")}
    if "published_at" in card:
        checked["published_at"] = stamp_text(published_time(card["published_at"]))
    if "accuracy" in card:
        checked["accuracy"] = share(card["accuracy"], "run.json's accuracy")
    checked["settings"] = check_settings(card.get("settings", {}))
    return checked


def read_card(data: bytes | str | None, run: str) -> dict:
    """check_card of run.json's bytes (missing: the run alone)."""
    if data is None:
        return {"run": run}
    return check_card(parse_object(data, "run.json"), run)


def check_metrics(metrics: object, where: str = "metrics.json") -> dict:
    """metrics.json as evaluate writes it: `accuracy` required, the other fields checked when present."""
    if not isinstance(metrics, dict):
        raise BadRunFile(f"{where} is not a JSON object")
    if "accuracy" not in metrics:
        raise BadRunFile(f"{where} has no 'accuracy'")
    share(metrics["accuracy"], f"{where}'s 'accuracy'")
    if "loss" in metrics and not (is_number(metrics["loss"]) and metrics["loss"] >= 0):
        raise BadRunFile(f"{where}'s 'loss' must be a finite number of at least 0")
    if "test_samples" in metrics:
        count(metrics["test_samples"], f"{where}'s 'test_samples'", low=1)
    if "test_sha256" in metrics and not (
        isinstance(metrics["test_sha256"], str) and SHA256.match(metrics["test_sha256"])
    ):
        raise BadRunFile(f"{where}'s 'test_sha256' must be 64 lowercase hexadecimal digits")
    if "per_class_accuracy" in metrics:
        per_class = metrics["per_class_accuracy"]
        if not (isinstance(per_class, dict) and sorted(per_class) == list(DIGITS)):
            raise BadRunFile(f"{where}'s 'per_class_accuracy' must map the digits 0..9 to numbers")
        for digit in DIGITS:
            share(per_class[digit], f"{where}'s accuracy of {digit}")
    if "confusion_matrix" in metrics:
        matrix = metrics["confusion_matrix"]
        if not (
            isinstance(matrix, list)
            and len(matrix) == NUM_CLASSES
            and all(isinstance(row, list) and len(row) == NUM_CLASSES for row in matrix)
            and all(
                type(cell) is int and 0 <= cell <= MAX_SAMPLES for row in matrix for cell in row
            )
        ):
            raise BadRunFile(f"{where}'s 'confusion_matrix' must be 10 rows of 10 counts")
    missing = metrics.get("missing_shards", {})
    if not (
        isinstance(missing, dict)
        and len(missing) <= MAX_ROUNDS
        and all(
            isinstance(key, str)
            and len(key) <= MAX_SHARD_ID
            and isinstance(shards, list)
            and all(isinstance(shard, str) and len(shard) <= MAX_SHARD_ID for shard in shards)
            for key, shards in missing.items()
        )
    ):
        raise BadRunFile(f"{where}'s 'missing_shards' must map rounds to lists of shard ids")
    return metrics


@overload
def read_metrics(data: bytes | str, where: str = ...) -> dict: ...
@overload
def read_metrics(data: None, where: str = ...) -> None: ...
@overload
def read_metrics(data: bytes | str | None, where: str = ...) -> dict | None: ...


def read_metrics(data: bytes | str | None, where: str = "metrics.json") -> dict | None:
    """check_metrics of metrics.json's bytes (None when absent)."""
    if data is None:
        return None
    return check_metrics(parse_object(data, where), where)
