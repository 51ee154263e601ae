"""Where published models live in a store, models/mnist/<run>/… and the pointer models/mnist/LATEST, and
how publish and the page read them there: each file up to its bound, checked by steps.lib.published."""

from __future__ import annotations

from steps.lib.errors import StepError
from steps.lib.history import MAX_HISTORY_BYTES, read_history
from steps.lib.published import (
    MAX_FILE_BYTES,
    MAX_POINTER_BYTES,
    RUN_ID,
    check_pointer,
    read_card,
    read_metrics,
)
from steps.lib.storage import ArtifactStore

PUBLISHED = "models/mnist"
LATEST_KEY = f"{PUBLISHED}/LATEST"
MODEL_FILE = "model.h5"
METRICS_FILE = "metrics.json"
RUN_FILE = "run.json"
CONFUSION_FILE = "confusion.png"
HISTORY_FILE = "history.json"  # the training history, round by round (steps.lib.history)
HISTORY_PLOT = "history.png"  # the same, drawn (steps.lib.history_plot)


def run_prefix(run: str) -> str:
    if not RUN_ID.match(run):
        raise ValueError(f"not a run id: {run!r}")
    return f"{PUBLISHED}/{run}"


def latest_run(store: ArtifactStore) -> str | None:
    """The run LATEST names, or None when nothing has been published; StepError for a LATEST that
    is not a run id (read up to MAX_POINTER_BYTES)."""
    return check_pointer(store.read_head(LATEST_KEY, MAX_POINTER_BYTES))


def in_folder(folder: str, name: str) -> str:
    """The key of the file `name` in the store's `folder` ('': the store's root)."""
    return f"{folder}/{name}" if folder else name


def read_run_card(store: ArtifactStore, folder: str, run: str) -> dict:
    """The run.json in `folder`, read up to its bound and checked (none there: `run` alone);
    StepError if it cannot be read or fails the checks."""
    return read_card(store.read_head(in_folder(folder, RUN_FILE), MAX_FILE_BYTES), run)


def read_run_metrics(store: ArtifactStore, folder: str) -> dict | None:
    """The metrics.json in `folder`, read up to its bound and checked (None when there is none);
    StepError if it cannot be read or fails the checks."""
    return read_metrics(store.read_head(in_folder(folder, METRICS_FILE), MAX_FILE_BYTES))


def read_run_history(store: ArtifactStore, folder: str) -> dict | None:
    """The history.json in `folder`, read up to its bound and checked (None when there is none);
    StepError if it cannot be read or fails the checks."""
    return read_history(store.read_head(in_folder(folder, HISTORY_FILE), MAX_HISTORY_BYTES))


def card_of(store: ArtifactStore, run: str) -> dict | None:
    """`run`'s checked run.json (`run` alone when it has none), or None if it fails the checks."""
    try:
        return read_run_card(store, run_prefix(run), run)
    except (ValueError, StepError):  # not a run id, not a valid card
        return None


def published_at(store: ArtifactStore, run: str) -> str:
    """When `run` was published, in UTC (stamp_text: later sorts last), or '' if unknown or invalid."""
    card = card_of(store, run)
    return (card or {}).get("published_at", "")


def move_latest(store: ArtifactStore, run: str, attempts: int = 10) -> str:
    """Point LATEST at `run` unless a run published later already holds it; return what LATEST names.

    A compare-and-swap on the pointer's generation: of two runs publishing at once, the one that finished
    later wins, and neither can overwrite the other's pointer unseen. A LATEST that names no valid run
    (too long, not a run id) is replaced; one that is not a regular file is refused.
    """
    ours = published_at(store, run)
    for _ in range(attempts):
        text, generation = store.read_versioned(LATEST_KEY, MAX_POINTER_BYTES)
        try:
            current = check_pointer(None if text is None else text.encode())
        except StepError:
            current = None
        if current and current != run and published_at(store, current) > ours:
            return current
        if store.write_if_generation(LATEST_KEY, run, generation):
            return run
    raise RuntimeError(f"{LATEST_KEY} changed {attempts} times while {run} tried to move it")
