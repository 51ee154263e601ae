"""A compact live view of a run on the Argo Server: one line each time a step changes phase.

Steps are the workflow's Pod nodes, or for a retried step its Retry node (its children are the tries).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from workflows.argo_client import ArgoError, ArgoServer, get_workflow

DONE = {"Succeeded", "Failed", "Error"}
POLL_SECONDS = 5.0
UNREACHABLE_POLLS = 6  # give a dropped port-forward half a minute before giving up


@dataclass(frozen=True)
class Step:
    """One step of the run as the UI shows it."""

    name: str
    template: str
    phase: str
    seconds: float
    retries: int
    message: str
    outputs: dict[str, str]


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _seconds(node: dict, now: datetime) -> float:
    started = _time(node.get("startedAt"))
    if started is None:
        return 0.0
    return ((_time(node.get("finishedAt")) or now) - started).total_seconds()


def _message(node: dict, nodes: dict[str, dict]) -> str:
    """A node's message; for a retried step, its last try's (why it failed), else its own."""
    tries = [nodes[child] for child in node.get("children", []) if child in nodes]
    if node["type"] == "Retry" and tries and tries[-1].get("message"):
        return tries[-1]["message"]
    return node.get("message", "")


def steps_of(workflow: dict, now: datetime | None = None) -> list[Step]:
    """The run's steps, in the order they started."""
    now = now or datetime.now(UTC)
    nodes = workflow.get("status", {}).get("nodes", {}) or {}
    retried = {
        child
        for node in nodes.values()
        if node["type"] == "Retry"
        for child in node.get("children", [])
    }
    shown = [
        node
        for node in nodes.values()
        if node["type"] == "Retry" or (node["type"] == "Pod" and node["id"] not in retried)
    ]
    shown.sort(key=lambda node: (node.get("startedAt") or "~", node.get("displayName", "")))
    return [
        Step(
            name=node.get("displayName") or node["name"],
            template=node.get("templateName", ""),
            phase=node.get("phase", "Pending"),
            seconds=_seconds(node, now),
            retries=max(0, len(node.get("children", [])) - 1) if node["type"] == "Retry" else 0,
            message=_message(node, nodes),
            outputs={
                p["name"]: p.get("value", "")
                for p in node.get("outputs", {}).get("parameters", []) or []
            },
        )
        for node in shown
    ]


def describe(step: Step) -> str:
    """One line: name, phase, duration, retries, and the message of a step that did not succeed."""
    retries = (
        f"  {step.retries} {'retry' if step.retries == 1 else 'retries'}" if step.retries else ""
    )
    duration = f"{step.seconds:6.0f}s" if step.seconds else "       "
    message = f"  {step.message}" if step.message and step.phase != "Succeeded" else ""
    return f"  {step.name:<28} {step.phase:<10}{duration}{retries}{message}"


def failure(workflow: dict) -> str:
    """The failed step's name and message, or the run's own message."""
    failed = [s for s in steps_of(workflow) if s.phase in ("Failed", "Error")]
    if failed:
        return f"{failed[0].name} failed: {failed[0].message or failed[0].phase}"
    return workflow.get("status", {}).get("message", "") or "the run did not succeed"


def run_seconds(workflow: dict) -> float | None:
    """How long the run took, once it ended."""
    status = workflow.get("status", {})
    started, finished = _time(status.get("startedAt")), _time(status.get("finishedAt"))
    return (finished - started).total_seconds() if started and finished else None


def output(workflow: dict, template: str, parameter: str) -> str | None:
    """An output parameter of the step running `template`, once it succeeded."""
    for step in steps_of(workflow):
        if step.template == template and step.phase == "Succeeded" and parameter in step.outputs:
            return step.outputs[parameter]
    return None


def watch(
    server: ArgoServer,
    name: str,
    echo: Callable[[str], None] = print,
    interval: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Poll the run until it ends, echoing each change; returns the final Workflow."""
    seen: dict[str, tuple[str, int]] = {}
    misses = 0
    while True:
        try:
            workflow = get_workflow(server, name)
            misses = 0
        except ArgoError:
            misses += 1
            if misses >= UNREACHABLE_POLLS:
                raise
            sleep(interval)
            continue
        for step in steps_of(workflow):
            state = (step.phase, step.retries)
            if seen.get(step.name) != state:
                seen[step.name] = state
                echo(describe(step))
        phase = workflow.get("status", {}).get("phase", "")
        if phase in DONE:
            return workflow
        sleep(interval)
