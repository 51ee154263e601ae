"""A store holding runs as the pipeline leaves them, written with the project's own writers: two
published runs (the newer served) and one cut short in its second round, before its average."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from steps.lib import history
from steps.lib.bounded_json import to_json
from steps.lib.published import stamp_text
from steps.lib.registry import LATEST_KEY, run_prefix
from steps.lib.storage import ArtifactStore, open_store

START = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
OLD, SERVED, CUT = "mnist-old01", "mnist-srv02", "mnist-cut03"  # started in this order
# each run: its start (hours after START), held-out score per round, test accuracy, card settings
RUNS = {
    OLD: (0, (0.9, 0.95), 0.9612, {"workers": 3, "rounds": 2, "epochs": 1, "batch": 100}),
    SERVED: (1, (0.96, 0.98), 0.9871, {"workers": 2, "rounds": 2, "epochs": 4, "batch": 100}),
    CUT: (2, (0.93,), None, {}),
}


def run_history(hours: int, scores: tuple[float, ...], epochs: int = 1) -> dict:
    """A run's history.json after these rounds (two workers, `epochs` each), as aggregate writes it."""
    started = START + dt.timedelta(hours=hours)
    kept = history.new_history(started)
    for number, score in enumerate(scores, start=1):
        record = history.round_record(
            number=number,
            ended_at=started + dt.timedelta(seconds=30 * number),
            seconds=30.0,
            epochs=epochs,
            held_out={"digits": 1000, "accuracy": score, "loss": 1 - score},
            missing=[],
            workers={
                shard: {"samples": 500, "loss": [0.5] * epochs, "accuracy": [0.8] * epochs}
                for shard in ("0", "1")
            },
        )
        kept = history.add_round(kept, record)
    return kept


def confusion(accuracy: float) -> list[list[int]]:
    """A confusion matrix of 100 test digits of each digit, `accuracy` of them right."""
    right = round(100 * accuracy)
    return [
        [right if i == j else (100 - right if j == (i + 1) % 10 else 0) for j in range(10)]
        for i in range(10)
    ]


def publish_files(store: ArtifactStore, run: str) -> None:
    """The files publish writes for `run` (the model aside: nothing here reads it)."""
    hours, scores, accuracy, settings = RUNS[run]
    kept = run_history(hours, scores, settings["epochs"])
    folder = run_prefix(run)
    published = START + dt.timedelta(hours=hours, minutes=5)
    card = {"run": run, "published_at": stamp_text(published), "accuracy": accuracy}
    store.write_text(f"{folder}/run.json", to_json(card | {"settings": settings}))
    metrics = {"accuracy": accuracy, "confusion_matrix": confusion(accuracy)}
    store.write_text(f"{folder}/metrics.json", to_json(metrics))
    store.write_text(f"{folder}/history.json", to_json(kept))


def cut_short(store: ArtifactStore, run: str) -> None:
    """Killed while its second round trained: shards, init, round 1 averaged, one model of round 2."""
    hours, scores, _, _ = RUNS[run]
    for shard in ("0", "1"):
        store.write_text(f"{run}/shards/{shard}.npz", "")
    store.write_text(f"{run}/init/history.json", to_json(run_history(hours, ())))
    store.write_text(f"{run}/round-1/history.json", to_json(run_history(hours, scores)))
    store.write_text(f"{run}/round-2/models/0.h5", "")


def fill(store: ArtifactStore) -> ArtifactStore:
    """The store with the three runs, LATEST naming SERVED."""
    publish_files(store, OLD)
    publish_files(store, SERVED)
    cut_short(store, CUT)
    store.write_text(LATEST_KEY, SERVED)
    return store


def beside_the_page_run(published_store: Path, folder: Path) -> Path:
    """A copy of the page's test store (tests/support/page.py) in `folder`, with OLD published before
    its run and CUT cut short; LATEST still names the page's run."""
    store = Path(shutil.copytree(published_store, folder))
    publish_files(open_store(store), OLD)
    cut_short(open_store(store), CUT)
    return store
