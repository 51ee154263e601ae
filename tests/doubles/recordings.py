"""Real cluster runs as the Argo Server double serves them (made by tests/doubles/record_runs.py): one JSON
file per story, what was run and each distinct status, polled once a second and trimmed to the fields the
client reads, kept as changes (null: a field or node gone); `stopped`: the first status after a stop."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).parent / "recordings"
RUN_FIELDS = ("phase", "message", "startedAt", "finishedAt", "progress")
NODE_FIELDS = (
    "id",
    "name",
    "displayName",
    "type",
    "templateName",
    "phase",
    "message",
    "startedAt",
    "finishedAt",
    "children",
    "progress",
)
OUTPUT_FIELDS = ("parameters", "exitCode")
TIMES = ("startedAt", "finishedAt")
# A Pod's progress until it reports its own (pkg/apis/workflow/v1alpha1/progress.go, ProgressDefault)
NOT_REPORTED = ("", "0/1")


def trimmed(status: dict) -> dict:
    """A Workflow's status with only the fields the client reads."""
    kept = {field: status[field] for field in RUN_FIELDS if field in status}
    kept["nodes"] = {
        node_id: _trimmed_node(node) for node_id, node in (status.get("nodes") or {}).items()
    }
    return kept


def _trimmed_node(node: dict) -> dict:
    kept = {field: node[field] for field in NODE_FIELDS if field in node}
    outputs = {
        field: node["outputs"][field] for field in OUTPUT_FIELDS if field in node.get("outputs", {})
    }
    if "parameters" in outputs:
        outputs["parameters"] = [
            {key: value for key, value in parameter.items() if key in ("name", "value")}
            for parameter in outputs["parameters"]
        ]
    if outputs:
        kept["outputs"] = outputs
    return kept


def changes(previous: dict, status: dict) -> dict:
    """What changed from one trimmed status to the next (a new node whole; None: a field or node gone)."""
    old, new = previous.get("nodes", {}), status["nodes"]
    nodes: dict[str, dict | None] = {node_id: None for node_id in old.keys() - new.keys()}
    for node_id, node in new.items():
        if node_id not in old:
            nodes[node_id] = node
        elif old[node_id] != node:
            nodes[node_id] = _difference(old[node_id], node)
    run = _difference({k: v for k, v in previous.items() if k != "nodes"}, status, RUN_FIELDS)
    return {"run": run, "nodes": nodes}


def _difference(before: dict, after: dict, fields: tuple[str, ...] | None = None) -> dict:
    """The fields of AFTER that differ from BEFORE's, None for those it lacks."""
    names = fields or tuple(before.keys() | after.keys())
    return {name: after.get(name) for name in names if before.get(name) != after.get(name)}


def applied(status: dict, change: dict) -> dict:
    """STATUS with one recorded CHANGE made to it."""
    after = _merged(status, change["run"])
    nodes = dict(status.get("nodes", {}))
    for node_id, fields in change["nodes"].items():
        if fields is None:
            nodes.pop(node_id, None)
        else:
            nodes[node_id] = _merged(nodes.get(node_id, {}), fields)
    after["nodes"] = nodes
    return after


def _merged(before: dict, fields: dict) -> dict:
    merged = {**before, **fields}
    return {name: value for name, value in merged.items() if value is not None}


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Recording:
    """One recorded run: its statuses in the order they were read, and when each was read."""

    story: str
    run: str  # the recorded run's name
    flags: tuple[str, ...]  # submit.py's flags for the run's settings
    fault: dict | None  # the shard whose trainer ran a command first, and the command
    train_image: str | None  # the trainers' image, when it was not the cluster's
    read: tuple[datetime, ...]
    statuses: tuple[dict, ...]
    stopped: int | None  # the index of the first status read after StopWorkflow

    @property
    def final(self) -> dict:
        return self.statuses[-1]

    def nodes(self, display: str) -> list[dict]:
        """The node of that display name in every status that has it, in order."""
        return [
            node
            for status in self.statuses
            for node in status["nodes"].values()
            if node.get("displayName") == display
        ]

    def tries(self, step: str) -> list[str]:
        """The display names of a retried step's tries (its Retry node's Pod children), oldest first."""
        nodes = self.final["nodes"]
        [retry] = [
            n for n in nodes.values() if n.get("displayName") == step and n["type"] == "Retry"
        ]
        return [
            nodes[child]["displayName"] for child in retry.get("children", []) if child in nodes
        ]

    def reports(self, display: str) -> list[str]:
        """The progress a Pod node showed while Running, each value once, in order."""
        seen: list[str] = []
        for node in self.nodes(display):
            value = node.get("progress", "")
            if (
                node.get("phase") == "Running"
                and value not in NOT_REPORTED
                and [value] != seen[-1:]
            ):
                seen.append(value)
        return seen

    def states(self, display: str) -> list[tuple[str, str]]:
        """Each (phase, message) a node went through, in order."""
        states = [(node.get("phase", ""), node.get("message", "")) for node in self.nodes(display)]
        return [
            state for number, state in enumerate(states) if states[number - 1 : number] != [state]
        ]

    def steps(self) -> list[str]:
        """Every step of the run: its Retry nodes (every template of the pipeline retries)."""
        nodes = self.final["nodes"].values()
        return [node["displayName"] for node in nodes if node["type"] == "Retry"]

    def output(self, template: str, parameter: str) -> str:
        """An output parameter of the succeeded node running TEMPLATE, at the end of the run."""
        for node in self.final["nodes"].values():
            if node.get("templateName") == template and node.get("phase") == "Succeeded":
                for found in node.get("outputs", {}).get("parameters", []):
                    if found["name"] == parameter:
                        return str(found["value"])
        raise KeyError(f"{self.story}: no output {parameter} of {template}")

    def served(self, index: int, name: str, now: datetime) -> dict:
        """Status INDEX as a run named NAME, its times moved as if read NOW (durations as recorded)."""
        shift = now - self.read[index]
        text = json.dumps(self.statuses[index]).replace(self.run, name)
        status = json.loads(text)
        for holder in (status, *status["nodes"].values()):
            for field in TIMES:
                if holder.get(field):
                    holder[field] = stamp(moment(holder[field]) + shift)
        return status


def path_of(story: str) -> Path:
    return FOLDER / f"{story}.json"


@cache
def load(story: str) -> Recording:
    """The recording of STORY (tests/support/stories.py)."""
    return read(path_of(story))


def read(path: Path) -> Recording:
    document = json.loads(path.read_text())
    status: dict[str, Any] = {"nodes": {}}
    statuses, read = [], []
    for change in document["changes"]:
        status = applied(status, change)
        statuses.append(status)
        read.append(moment(change["read"]))
    return Recording(
        story=document["story"],
        run=document["run"],
        flags=tuple(document["flags"]),
        fault=document["fault"],
        train_image=document["train_image"],
        read=tuple(read),
        statuses=tuple(statuses),
        stopped=document.get("stopped"),
    )
