"""Training histories at the bounds: the largest run the docs allow, and one that fills history.json's
1 MiB with points."""

from __future__ import annotations

import datetime as dt
import json

from steps.lib import history

STARTED = dt.datetime(2026, 11, 29, 18, 0, tzinfo=dt.UTC)


def history_of(rounds: int, workers: int, epochs: int, value: float | None = None) -> dict:
    """`rounds` rounds of `workers` workers' `epochs` epochs, and the average's held-out score after
    each; values vary (or are all `value`), every field as aggregate writes it."""
    kept = history.new_history(STARTED)
    for number in range(1, rounds + 1):
        record = history.round_record(
            number=number,
            ended_at=STARTED + dt.timedelta(minutes=number),
            seconds=60.0,
            epochs=epochs,
            held_out={"digits": 1000, "accuracy": 0.5 + number / (4 * rounds), "loss": 1 / number},
            missing=[],
            workers={
                str(shard): {
                    "samples": 1000,
                    "loss": [
                        1 / (number + epoch) if value is None else value for epoch in range(epochs)
                    ],
                    "accuracy": [
                        0.5 + (epoch + shard) / (4 * (epochs + workers)) if value is None else value
                        for epoch in range(epochs)
                    ],
                }
                for shard in range(workers)
            },
        )
        kept["rounds"].append(record)  # not add_round: its bound would drop the workers' epochs
    return history.check_history(kept)


def largest_run() -> dict:
    """98 rounds of 10 workers' 30 epochs: the largest run whose history fits (docs/steps.md)."""
    return history_of(98, 10, 30)


def fullest_history() -> dict:
    """As many points as history.json's 1 MiB holds: 20 rounds of 10 workers, every value 0."""
    low, high = 1, 2000  # epochs a round: fits, does not
    while high - low > 1:
        middle = (low + high) // 2
        fits = len(compact(history_of(20, 10, middle, value=0))) <= history.MAX_HISTORY_BYTES
        low, high = (middle, high) if fits else (low, middle)
    return history_of(20, 10, low, value=0)


def compact(kept: dict) -> bytes:
    """`kept` as JSON without a space: the most points a file of history.json's bound can hold."""
    return json.dumps(kept, separators=(",", ":")).encode()


def points_in(kept: dict) -> int:
    """The workers' epoch values in `kept`, both metrics."""
    return sum(
        len(worker.get("loss", [])) + len(worker.get("accuracy", []))
        for each in kept["rounds"]
        for worker in each["workers"].values()
    )
