"""The run's training history, round by round: what each worker's epochs were, what the round's average
scored on the held-out digits, and how long the round took. train records its epochs, init starts the
history, each round's aggregate adds its round, and publish carries the last one to the page.

A worker's epochs are columns, one value per epoch: {"loss": [...], "accuracy": [...]} (train's stats and
checkpoints hold them so; no times, so a trainer run again on the same inputs writes the same stats).
The history:

    {"started_at": ISO time, "rounds": [{"round": r, "ended_at": ISO time, "seconds": s or null,
     "epochs": E, "held_out": {"digits": n, "accuracy": a, "loss": l}, "missing": [shard ids],
     "workers": {shard: {"samples": n, "loss": [...], "accuracy": [...]}}}]}

`held_out` is absent when the round was not scored, a worker's columns when its trainer could not say
them all; a round's `seconds` run from the previous round's end (the first: the run's start). The file is read from the store by the page, so every reader checks it (`check_history`) within
MAX_HISTORY_BYTES, and aggregate keeps it within that bound by leaving out the oldest rounds' workers.
"""

from __future__ import annotations

import datetime as dt
from typing import overload

from steps.lib.bounded_json import MAX_JSON_BYTES, is_number, to_json
from steps.lib.published import (
    MAX_ROUNDS,
    MAX_SHARD_ID,
    BadRunFile,
    count,
    parse_object,
    published_time,
    share,
    stamp_text,
)

EPOCH_COLUMNS = ("loss", "accuracy")
MAX_HISTORY_BYTES = (
    MAX_JSON_BYTES  # ~30 bytes a worker's epoch: 98 rounds of 10 workers x 30 epochs fit
)
MAX_EPOCHS = 1_000_000  # a round's epochs, as a history may state them
DIGITS = 6  # decimal places kept of a loss, an accuracy or a time
NAME = "history.json"


def rounded(value: float) -> float:
    return round(float(value), DIGITS)


def no_epochs() -> dict[str, list[float]]:
    return {column: [] for column in EPOCH_COLUMNS}


def add_epoch(columns: dict[str, list[float]], logs: dict) -> None:
    """Append one epoch's loss and accuracy (Keras's logs) to `columns`."""
    for column in EPOCH_COLUMNS:
        columns[column].append(float(logs[column]))


def non_negative(value: object, name: str) -> float:
    if not (is_number(value) and value >= 0):
        raise BadRunFile(f"{name} must be a finite number of at least 0, got {str(value)[:40]}")
    return float(value)


def check_epochs(value: object, where: str, epochs: int | None = None) -> dict[str, list[float]]:
    """Epoch columns: each of EPOCH_COLUMNS a list of as many values (`epochs` of them, if given);
    losses finite and at least 0, accuracies in [0, 1]."""
    if not (isinstance(value, dict) and sorted(value) == sorted(EPOCH_COLUMNS)):
        raise BadRunFile(f"{where} must hold the columns {', '.join(EPOCH_COLUMNS)}")
    if not all(isinstance(value[column], list) for column in EPOCH_COLUMNS):
        raise BadRunFile(f"{where}'s columns must be lists")
    lengths = {len(value[column]) for column in EPOCH_COLUMNS}
    if len(lengths) != 1:
        raise BadRunFile(f"{where}'s columns differ in length")
    if epochs is not None and lengths != {epochs}:
        raise BadRunFile(f"{where} has values for {lengths.pop()} epochs, not {epochs}")
    return {
        "loss": [non_negative(v, f"{where}'s loss") for v in value["loss"]],
        "accuracy": [share(v, f"{where}'s accuracy") for v in value["accuracy"]],
    }


def new_history(started_at: dt.datetime) -> dict:
    """The history of a run that starts now: no rounds yet."""
    return {"started_at": stamp_text(started_at), "rounds": []}


def round_record(
    *,
    number: int,
    ended_at: dt.datetime,
    seconds: float | None,
    epochs: int,
    held_out: dict | None,
    missing: list[str],
    workers: dict[str, dict],
) -> dict:
    """One round as the history holds it; numbers rounded to DIGITS places."""
    record: dict = {
        "round": number,
        "ended_at": stamp_text(ended_at),
        "seconds": None if seconds is None else rounded(seconds),
        "epochs": epochs,
    }
    if held_out is not None:
        record["held_out"] = {
            "digits": held_out["digits"],
            "accuracy": rounded(held_out["accuracy"]),
            "loss": rounded(held_out["loss"]),
        }
    record["missing"] = list(missing)
    record["workers"] = {
        shard: {
            "samples": entry["samples"],
            **{c: [rounded(v) for v in entry[c]] for c in EPOCH_COLUMNS if c in entry},
        }
        for shard, entry in workers.items()
    }
    return record


def round_seconds(history: dict, now: dt.datetime) -> float:
    """Seconds since the last round ended (the first round: since the run started), at least 0."""
    rounds = history["rounds"]
    since = rounds[-1]["ended_at"] if rounds else history["started_at"]
    return max(0.0, (now - published_time(since)).total_seconds())


def add_round(history: dict, record: dict, limit: int = MAX_HISTORY_BYTES) -> dict:
    """`history` with `record` as its last round (replacing that round and any after it, when a
    round is run again), its JSON within `limit` bytes: the oldest rounds' workers are left out
    first, every round's score and time kept."""
    rounds = [each for each in history["rounds"] if each["round"] < record["round"]]
    result = {**history, "rounds": [*rounds, record]}
    size = len(to_json(result))
    for each in result["rounds"]:
        if size <= limit:
            break
        size -= len(to_json(each["workers"])) - len(to_json({}))
        each["workers"] = {}
    return result


def _round(value: object, where: str, last: int) -> dict:
    if not isinstance(value, dict):
        raise BadRunFile(f"{where}'s rounds must be JSON objects")
    number = value.get("round")
    if type(number) is not int or not last < number <= MAX_ROUNDS:
        raise BadRunFile(
            f"{where}'s round must be an integer in 1..{MAX_ROUNDS}, after the round before it"
        )
    epochs = value.get("epochs")
    if type(epochs) is not int or not 0 <= epochs <= MAX_EPOCHS:
        raise BadRunFile(
            f"{where}'s epochs of round {number} must be an integer in 0..{MAX_EPOCHS}"
        )
    seconds = value.get("seconds")
    if seconds is not None:
        non_negative(seconds, f"{where}'s seconds")
    checked = {
        "round": number,
        "ended_at": stamp_text(published_time(value.get("ended_at"), f"{where}'s ended_at")),
        "seconds": seconds,
        "epochs": epochs,
    }
    if "held_out" in value:
        checked["held_out"] = _held_out(value["held_out"], where)
    checked["missing"] = _missing(value.get("missing", []), where)
    checked["workers"] = _workers(value.get("workers", {}), where, epochs)
    return checked


def _held_out(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise BadRunFile(f"{where}'s held_out must be a JSON object")
    return {
        "digits": count(value.get("digits"), f"{where}'s held-out digits", low=1),
        "accuracy": share(value.get("accuracy"), f"{where}'s held-out accuracy"),
        "loss": non_negative(value.get("loss"), f"{where}'s held-out loss"),
    }


def _shard_id(value: object) -> bool:
    """A shard id as aggregate takes them: letters and digits (the page names workers by it)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_SHARD_ID and value.isalnum()


def _missing(value: object, where: str) -> list[str]:
    if not (isinstance(value, list) and all(_shard_id(shard) for shard in value)):
        raise BadRunFile(f"{where}'s missing must be a list of shard ids")
    return value


def _workers(value: object, where: str, epochs: int) -> dict:
    if not (isinstance(value, dict) and all(_shard_id(shard) for shard in value)):
        raise BadRunFile(f"{where}'s workers must map shard ids to their epochs")
    checked = {}
    for shard, entry in value.items():
        name = f"{where}'s worker {shard}"
        if not isinstance(entry, dict):
            raise BadRunFile(f"{name} is not a JSON object")
        kept: dict[str, int | list[float]] = {
            "samples": count(entry.get("samples"), f"{name}'s samples", low=1)
        }
        if set(entry) - {"samples"}:
            columns = check_epochs({c: entry.get(c) for c in EPOCH_COLUMNS if c in entry}, name)
            if len(columns["loss"]) > epochs:
                raise BadRunFile(f"{name} has more epochs than the round's {epochs}")
            kept |= columns
        checked[shard] = kept
    return checked


def check_history(value: object) -> dict:
    """The history as aggregate writes it, every field checked; BadRunFile saying what is wrong."""
    if not isinstance(value, dict):
        raise BadRunFile(f"{NAME} is not a JSON object")
    started_at = stamp_text(published_time(value.get("started_at"), f"{NAME}'s started_at"))
    rounds = value.get("rounds")
    if not (isinstance(rounds, list) and len(rounds) <= MAX_ROUNDS):
        raise BadRunFile(f"{NAME}'s rounds must be a list of at most {MAX_ROUNDS}")
    checked: list[dict] = []
    for each in rounds:
        checked.append(_round(each, NAME, checked[-1]["round"] if checked else 0))
    return {"started_at": started_at, "rounds": checked}


@overload
def read_history(data: bytes | str) -> dict: ...
@overload
def read_history(data: None) -> None: ...
@overload
def read_history(data: bytes | str | None) -> dict | None: ...


def read_history(data: bytes | str | None) -> dict | None:
    """check_history of history.json's bytes, read up to MAX_HISTORY_BYTES (None when absent)."""
    if data is None:
        return None
    return check_history(parse_object(data, NAME, MAX_HISTORY_BYTES))
