"""Where published models live in a store, models/mnist/<run>/… and the pointer models/mnist/LATEST, and
how publish and the page read them there: each file up to its bound, checked by steps.lib.published."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

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
PUBLISHED_FILES = (MODEL_FILE, METRICS_FILE, RUN_FILE, CONFUSION_FILE, HISTORY_FILE, HISTORY_PLOT)
STALE_SECONDS = 3600.0  # a temporary unchanged this long is a killed copy's: a copy takes seconds


class AlreadyPublished(StepError):
    """A run id that is published already: a published run is never replaced."""


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


@dataclass(frozen=True)
class PublishedRun:
    """A published run as the page shows it and the --serve policy judges it: its checked run.json
    (the run alone when it has none) and metrics.json (None when it has none)."""

    run: str
    card: dict
    metrics: dict | None

    @property
    def accuracy(self) -> float | None:
        """Its test accuracy as the page shows it: the card's, else its metrics'; None if neither."""
        if "accuracy" in self.card:
            return self.card["accuracy"]
        return None if self.metrics is None else self.metrics["accuracy"]


def read_published(store: ArtifactStore, run: str) -> PublishedRun:
    """`run`'s card and metrics, each read up to its bound and checked; StepError if either fails."""
    prefix = run_prefix(run)
    return PublishedRun(run, read_run_card(store, prefix, run), read_run_metrics(store, prefix))


def has_model(store: ArtifactStore, run: str) -> bool:
    """Whether `run` has a model file (a read of one byte)."""
    return store.read_head(f"{run_prefix(run)}/{MODEL_FILE}", 0) is not None


def check_unpublished(store: ArtifactStore, run: str) -> None:
    """Before a run starts: AlreadyPublished if a run of its id has any file in the store."""
    if store.list_keys(f"{run_prefix(run)}/"):
        raise AlreadyPublished(
            f"run {run} is published already in {store.uri}: a published run is never replaced"
        )


def published_already(
    store: ArtifactStore, run: str, files: Mapping[str, Path], card: dict
) -> set[str]:
    """The names of `run`'s files already in the store, when each is the very file this publish
    would write (`files` by name, and `card` as run.json but for its stamp): a retried publish
    completing what it started. AlreadyPublished when one differs or is not among them."""
    prefix = run_prefix(run)
    there = {key.removeprefix(f"{prefix}/") for key in store.list_keys(f"{prefix}/")}
    for name in sorted(there):
        if name == RUN_FILE:
            try:
                same = unstamped(read_run_card(store, prefix, run)) == unstamped(card)
            except StepError:
                same = False
        elif name in files:
            ours = files[name].read_bytes()
            same = store.read_head(f"{prefix}/{name}", len(ours)) == ours
        else:
            raise AlreadyPublished(
                f"run {run} is published already in {store.uri} with a {name} this publish does "
                "not write: a published run is never replaced; publish under another run id"
            )
        if not same:
            raise AlreadyPublished(
                f"run {run} is published already in {store.uri} and its {name} differs: a "
                "published run is never replaced; publish under another run id"
            )
    return there


def unstamped(card: dict) -> dict:
    """A card but for when it was published: what a retried publish writes the same."""
    return {name: value for name, value in card.items() if name != "published_at"}


def sweep_temporaries(store: ArtifactStore, names: Iterable[str] = ()) -> list[str]:
    """Remove what publishes killed mid-copy left in the published tree: the temporaries of its
    files, the pointer's and `names`' (steps.lib.staged_outputs), unchanged for STALE_SECONDS."""
    return store.sweep_temporaries(
        PUBLISHED, {*PUBLISHED_FILES, LATEST_KEY.rsplit("/", 1)[1], *names}, STALE_SECONDS
    )


def move_latest(
    store: ArtifactStore,
    run: str,
    attempts: int = 10,
    judge: Callable[[str | None], str | None] | None = None,
) -> Moved:
    """Point LATEST at `run` unless `judge` (given the run LATEST names now, or None) says why not;
    return what LATEST names then, and why `run` is not it.

    Ordered by the store alone, never by a publisher's clock: a compare-and-swap on the pointer's
    generation (GCS ifGenerationMatch, a lock in a folder store). Of two runs publishing at once,
    neither can overwrite the other's pointer unseen; `judge` is asked again about whatever run holds
    the pointer after a lost race, so its verdict is on the pointer it replaces. Without `judge` (a
    person's choice, steps.promote) the run takes it. A LATEST that names no valid run (too long,
    not a run id) is replaced; one that is not a regular file is refused.
    """
    for _ in range(attempts):
        text, generation = store.read_versioned(LATEST_KEY, MAX_POINTER_BYTES)
        try:
            current = check_pointer(None if text is None else text.encode())
        except StepError:
            current = None
        if current == run:
            return Moved(run)
        refusal = judge(current) if judge else None
        if refusal:
            return Moved(current, refusal)
        if store.write_if_generation(LATEST_KEY, run, generation):
            return Moved(run)
    raise RuntimeError(f"{LATEST_KEY} changed {attempts} times while {run} tried to move it")
