"""The runs a store holds, published or not: each run's phase, start, test accuracy, settings, metrics
and history, read as the page reads a published run (each file up to its bound, checked by
steps.lib.published and steps.lib.history: the store is untrusted).

A published run is read from models/mnist/<run>/ (steps.lib.registry). A run that failed or was cut
short has only its own folder, <run>/ at the store's top, where the workflow keeps its artifacts
(workflows/pipeline/workflow.py names their keys): its phase is the last step whose files are there, its
settings what its history shows. Listings are of folders only, at most MAX_RUNS of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from steps.lib.errors import StepError
from steps.lib.published import MAX_FILE_BYTES, RUN_ID, read_card
from steps.lib.registry import (
    PUBLISHED,
    RUN_FILE,
    in_folder,
    read_run_history,
    read_run_metrics,
    run_prefix,
)
from steps.lib.storage import ArtifactStore

MAX_RUNS = 1000  # run folders read from one store, in name order
NOT_RUNS = frozenset({"models", "logs"})  # the store's own folders beside the runs' (docs/steps.md)
# A run's folders, as workflows/pipeline/workflow.py keys its artifacts
SHARDS, INIT, EVALUATION = "shards", "init", "evaluation"
ROUND = re.compile(r"^round-([1-9][0-9]{0,2})$")
PUBLISHED_PHASE = "published"


@dataclass(frozen=True)
class RunRecord:
    """What a store says of one run."""

    run: str
    phase: str  # "published", else "unfinished: " and the last step its files show
    started: str = (
        ""  # when the run started, in UTC (its history's start), or when it was published
    )
    accuracy: float | None = None  # on the test set
    settings: dict = field(default_factory=dict)  # the card's; unpublished, what the files show
    metrics: dict | None = None  # metrics.json (steps.lib.published.check_metrics)
    history: dict | None = None  # history.json (steps.lib.history.check_history)
    problem: str = ""  # why one of its files cannot be read ('' when every one can)

    @property
    def published(self) -> bool:
        return self.phase == PUBLISHED_PHASE

    def round_scores(self) -> list[tuple[int, float | None, float | None]]:
        """Each round's number, its average's held-out accuracy and its seconds (None: not said)."""
        return [
            (each["round"], each.get("held_out", {}).get("accuracy"), each["seconds"])
            for each in (self.history or {}).get("rounds", [])
        ]


def run_names(store: ArtifactStore) -> list[str]:
    """The names of the runs the store holds a folder of, published or not (at most MAX_RUNS)."""
    published = store.list_folders(PUBLISHED, MAX_RUNS)
    tops = [name for name in store.list_folders("", MAX_RUNS) if name not in NOT_RUNS]
    return sorted({name for name in (*published, *tops) if RUN_ID.match(name)})[:MAX_RUNS]


def run_index(store: ArtifactStore) -> list[RunRecord]:
    """Every run of the store, the newest first (by start; a run whose start is unknown last)."""
    records = [record for name in run_names(store) if (record := read_run(store, name))]
    records.sort(key=lambda record: record.run)
    records.sort(key=lambda record: record.started, reverse=True)
    return records


def read_run(store: ArtifactStore, run: str) -> RunRecord | None:
    """The run as the store holds it, or None when the store holds no run of that name."""
    if not RUN_ID.match(run):
        return None
    card = store.read_head(in_folder(run_prefix(run), RUN_FILE), MAX_FILE_BYTES)
    if card is not None:
        return published_run(store, run, card)
    return unfinished_run(store, run)


def published_run(store: ArtifactStore, run: str, data: bytes) -> RunRecord:
    prefix = run_prefix(run)
    try:
        card = read_card(data, run)
        metrics = read_run_metrics(store, prefix)
        history = read_run_history(store, prefix)
    except StepError as error:
        return RunRecord(run, PUBLISHED_PHASE, problem=str(error))
    accuracy = card.get("accuracy", (metrics or {}).get("accuracy"))
    started = (history or {}).get("started_at") or card.get("published_at", "")
    return RunRecord(run, PUBLISHED_PHASE, started, accuracy, card["settings"], metrics, history)


def unfinished_run(store: ArtifactStore, run: str) -> RunRecord | None:
    """A run without a published model, from its own folder; None if it holds no step's files."""
    folders = set(store.list_folders(run, MAX_RUNS))
    rounds = sorted(int(match[1]) for name in folders if (match := ROUND.match(name)))
    if not (folders & {SHARDS, INIT, EVALUATION} or rounds):
        return None
    try:
        metrics = read_run_metrics(store, f"{run}/{EVALUATION}")
        history, averaged = last_history(store, run, rounds)
    except StepError as error:
        return RunRecord(run, "unfinished", problem=str(error))
    if metrics is not None:
        phase = "evaluated, not published"
    elif rounds and averaged == rounds[-1]:
        phase = f"round {averaged} averaged"
    elif rounds:
        phase = f"round {rounds[-1]} training"
    else:
        phase = "started"
    return RunRecord(
        run,
        f"unfinished: {phase}",
        (history or {}).get("started_at", ""),
        (metrics or {}).get("accuracy"),
        stated_settings(history),
        metrics,
        history,
    )


def stated_settings(history: dict | None) -> dict:
    """The settings a history shows: its last round's epochs, and its workers (those that delivered
    and those missing) unless the history left them out to keep within its bound."""
    if not history or not history["rounds"]:
        return {}
    last = history["rounds"][-1]
    workers = len(last["workers"]) + len(last["missing"]) if last["workers"] else None
    return ({"workers": workers} if workers else {}) | {"epochs": last["epochs"]}


def last_history(store: ArtifactStore, run: str, rounds: list[int]) -> tuple[dict | None, int]:
    """The newest history.json of the run (a round's, else init's) and the round it ends (0: none)."""
    for number in reversed(rounds):
        history = read_run_history(store, f"{run}/round-{number}")
        if history is not None:
            return history, number
    return read_run_history(store, f"{run}/{INIT}"), 0
