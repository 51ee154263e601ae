"""submit.py's --list, --compare and --retry on an Argo Server: the runs of a store (steps.lib.run_index)
or those the server still holds, one a line or two side by side, and taking up a run that failed."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from hera.workflows import models as m

from steps.lib.errors import StepError
from steps.lib.published import differing
from steps.lib.registry import latest_run
from steps.lib.run_index import RunRecord, read_run, run_index
from steps.lib.storage import ArtifactStore, open_store
from workflows.errors import UsageError
from workflows.server.client import ArgoServer, NoSuchRun, call
from workflows.server.watch import FAILED, follow, output

NOT_ON_THE_CARD = ("store",)  # a parameter the card leaves out: where the run is kept
ABSENT = "—"
Read = TypeVar("Read")


def read_store(uri: str, read: Callable[[ArtifactStore], Read]) -> Read:
    """What `read` finds in the store at `uri`; no store, or one that cannot be read, is one line."""
    from google.api_core import exceptions as google

    if "://" not in uri and not Path(uri).is_dir():
        raise UsageError(f"no store at {uri}: --artifacts names a folder or gs://BUCKET")
    try:
        return read(open_store(uri))
    except google.NotFound:
        raise UsageError(f"no store at {uri}: the bucket does not exist") from None
    except google.GoogleAPIError as error:
        raise StepError(f"cannot read the store {uri}: {str(error).splitlines()[0]}") from None


def when_text(stamp: str) -> str:
    """'2026-12-05T06:10:42.1+00:00' → '2026-12-05 06:10'; unknown → '—'."""
    try:
        return dt.datetime.fromisoformat(stamp).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")
    except (ValueError, OverflowError):
        return ABSENT


def accuracy_text(accuracy: float | None) -> str:
    return ABSENT if accuracy is None else f"{accuracy:.2%}"


def settings_text(settings: dict) -> str:
    """The settings that are not the defaults, as flags ('—' when the run states none)."""
    if not settings:
        return ABSENT
    changed = differing({k: v for k, v in settings.items() if k not in NOT_ON_THE_CARD})
    return " ".join(f"--{name} {value}" for name, value in changed.items()) or "defaults"


def table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned columns (the last one as it is)."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]]
        ).rstrip()
        for row in rows
    ]


def list_lines(records: Iterable[RunRecord], latest: str | None) -> list[str]:
    """One line a run: name, start, phase, accuracy, whether LATEST serves it, non-default settings."""
    rows = [["run", "started (UTC)", "phase", "accuracy", "served", "settings"]]
    for record in records:
        phase = record.phase + (f" ({record.problem})" if record.problem else "")
        served = "LATEST" if record.run == latest else ""
        rows.append(
            [
                record.run,
                when_text(record.started),
                phase,
                accuracy_text(record.accuracy),
                served,
                settings_text(record.settings),
            ]
        )
    if len(rows) == 1:
        return ["no runs"]
    return table(rows)


def round_text(score: float | None, seconds: float | None) -> str:
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    return f"{accuracy_text(score)}{took}"


def compare_lines(first: RunRecord, second: RunRecord, latest: str | None) -> list[str]:
    """The two runs side by side: phase, accuracy, settings (* where they differ), each round's score."""
    rows = [["", first.run, second.run, ""]]
    rows.append(["started (UTC)", when_text(first.started), when_text(second.started), ""])
    rows.append(["phase", first.phase, second.phase, ""])
    rows.append(["test accuracy", *(accuracy_text(r.accuracy) for r in (first, second)), ""])
    rows.append(["served", *("LATEST" if r.run == latest else "" for r in (first, second)), ""])
    names = [*first.settings, *(name for name in second.settings if name not in first.settings)]
    for name in names:
        if name in NOT_ON_THE_CARD:
            continue
        values = [str(r.settings.get(name, ABSENT)) for r in (first, second)]
        differ = ABSENT not in values and values[0] != values[1]
        rows.append([name, *values, "*" if differ else ""])
    scores = [{number: (a, s) for number, a, s in r.round_scores()} for r in (first, second)]
    for number in sorted(set(scores[0]) | set(scores[1])):
        said = [round_text(*each[number]) if number in each else ABSENT for each in scores]
        rows.append([f"round {number} held out", *said, ""])
    return table(rows)


def store_run(store: ArtifactStore, run: str) -> RunRecord:
    record = read_run(store, run)
    if record is None:
        raise UsageError(f"{store.uri} holds no run {run!r} (python workflows/submit.py --list)")
    return record


def served(uri: str) -> str | None:
    """The run LATEST names in the store; None when none, or the store cannot be read (the runs stand
    without it)."""
    try:
        return latest_run(open_store(uri))
    except Exception:  # no run id, google.auth's DefaultCredentialsError, an unreachable bucket
        return None


def cluster_record(workflow: dict) -> RunRecord:
    """A run as the Argo Server holds it; its settings are the workflow's parameters and its rounds."""
    spec, status = workflow.get("spec", {}), workflow.get("status", {})
    parameters = {
        each["name"]: number(each.get("value", ""))
        for each in spec.get("arguments", {}).get("parameters", [])
    }
    dags = [t["dag"] for t in spec.get("templates", []) if "dag" in t]
    rounds = sum(t["name"].startswith("train-round-") for dag in dags for t in dag.get("tasks", []))
    settings = parameters | ({"rounds": rounds} if rounds else {})
    accuracy = output(workflow, "evaluate", "accuracy")
    started = status.get("startedAt") or workflow["metadata"].get("creationTimestamp", "")
    return RunRecord(
        workflow["metadata"]["name"],
        status.get("phase") or "Pending",
        started,
        float(accuracy) if accuracy else None,
        settings,
    )


def number(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def held_run(server: ArgoServer, run: str) -> dict:
    """The run as the Argo Server holds it; a run it does not hold is one line."""
    try:
        return call(server, lambda argo: argo.get_workflow(run))
    except NoSuchRun as error:
        raise UsageError(str(error)) from None


def cluster_run(server: ArgoServer, store: str, run: str) -> RunRecord:
    """The run as the server holds it, with its rounds' history from the bucket when there."""
    record = cluster_record(held_run(server, run))
    if store.startswith("gs://"):
        stored = read_store(store, lambda s: read_run(s, run))
        if stored is not None:
            record = replace(record, history=stored.history)
    return record


def retry_cluster(server: ArgoServer, run: str, store: str, interval: float | None) -> int:
    """Take up a failed run with the Argo Server's retry; a run unknown, succeeded or running is refused."""
    phase = held_run(server, run).get("status", {}).get("phase") or "Pending"
    if phase == "Succeeded":
        raise UsageError(f"run {run} succeeded: there is nothing to retry")
    if phase not in FAILED:
        raise UsageError(f"run {run} is {phase}: only a run that failed or was stopped is retried")
    request = m.WorkflowRetryRequest(name=run, namespace=server.namespace)
    call(server, lambda argo: argo.retry_workflow(run, request))
    print(f"retrying {run}: its failed tasks run again, those that succeeded are kept")
    return follow(server, run, store, interval)


def main(args: argparse.Namespace, server: ArgoServer | None) -> int:
    """--list, --compare or --retry, on the Argo Server when one is named, else on the store."""
    if args.retry and server is not None:  # a local run submit.py takes up with the local runner
        interval = args.poll_seconds if args.watch else None
        return retry_cluster(server, args.retry, args.store, interval)
    if server is None:

        def read(store: ArtifactStore) -> list[RunRecord]:
            if args.list:
                return list(run_index(store))
            return [store_run(store, run) for run in args.compare]

        records = read_store(args.store, read)
    elif args.list:
        listed = map(
            cluster_record, call(server, lambda argo: argo.list_workflows()).get("items") or []
        )
        records = sorted(listed, key=lambda r: r.started, reverse=True)
    else:
        records = [cluster_run(server, args.store, run) for run in args.compare]
    # a cluster's runs are served from its bucket, not from a folder of this machine
    latest = served(args.store) if server is None or args.store.startswith("gs://") else None
    lines = (
        list_lines(records, latest) if args.list else compare_lines(records[0], records[1], latest)
    )
    print("\n".join(lines))
    return 0
