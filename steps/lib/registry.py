"""Where published models live in a store, models/mnist/<run>/… and the pointer models/mnist/LATEST, and
how publish and the page read them there: each file up to its bound, checked by steps.lib.published."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from steps.lib.errors import StepError
from steps.lib.history import MAX_HISTORY_BYTES, read_history
from steps.lib.model_file import MAX_MODEL_BYTES
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


@dataclass(frozen=True)
class Moved:
    """What LATEST names after move_latest, and why it is not the run that tried ('' when it is)."""

    latest: str | None
    refusal: str = ""


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


def read_model(store: ArtifactStore, run: str) -> bytes:
    """`run`'s model file, read no further than MAX_MODEL_BYTES (a ranged read on GCS): a huge file
    in the store is refused before any of it reaches the disk. StepError naming the run if it is
    missing or too big."""
    try:
        data = store.read_head(f"{run_prefix(run)}/{MODEL_FILE}", MAX_MODEL_BYTES)
    except StepError as error:
        raise StepError(f"run {run}: {error}") from None
    if data is None:
        raise StepError(f"run {run} has no {MODEL_FILE} in {store.uri} (yet)")
    if len(data) > MAX_MODEL_BYTES:
        raise StepError(
            f"run {run}: {MODEL_FILE} is over {MAX_MODEL_BYTES} bytes, not a model of this project"
        )
    return data


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


def move_latest(
    store: ArtifactStore,
    run: str,
    attempts: int = 10,
    judge: Callable[[str | None], str | None] | None = None,
    force: bool = False,
) -> Moved:
    """Point LATEST at `run` unless a run published later already holds it, or `judge` (given the run
    LATEST names now, or None) says why not; return what LATEST names then, and why `run` is not it.

    A compare-and-swap on the pointer's generation: of two runs publishing at once, the one that finished
    later wins, and neither can overwrite the other's pointer unseen; `judge` is asked again about
    whatever run holds the pointer after a lost race, so its verdict is on the pointer it replaces.
    `force` (a person's choice, steps.serve) skips both questions, not the compare-and-swap. A LATEST
    that names no valid run (too long, not a run id) is replaced; one that is not a regular file is
    refused.
    """
    ours = published_at(store, run)
    for _ in range(attempts):
        text, generation = store.read_versioned(LATEST_KEY, MAX_POINTER_BYTES)
        try:
            current = check_pointer(None if text is None else text.encode())
        except StepError:
            current = None
        if current == run:
            return Moved(run)
        if not force:
            if current and published_at(store, current) > ours:
                return Moved(current, f"{current}, published after it, holds LATEST")
            refusal = judge(current) if judge else None
            if refusal:
                return Moved(current, refusal)
        if store.write_if_generation(LATEST_KEY, run, generation):
            return Moved(run)
    raise RuntimeError(f"{LATEST_KEY} changed {attempts} times while {run} tried to move it")
