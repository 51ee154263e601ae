"""A live view of a run on the Argo Server: a line each time a step's phase or own progress (`N/M`)
changes, a retried step shown as its current try; a step stuck on its image stops the run."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from workflows.run_end import RunEnd, report
from workflows.server.client import ArgoError, ArgoServer, call, stop_workflow

FAILED = ("Failed", "Error")  # also the phases Argo's retry takes up (workflow/util/util.go)
DONE = {"Succeeded", *FAILED}
FULFILLED = DONE | {"Skipped", "Omitted"}
UNREPORTED = {"", "0/1"}  # Argo's default for a Pod that has not reported its own progress
POLL_SECONDS = 5.0
# A stopped run's own message (Argo v4.1.4, workflow/controller/operator.go:598).
STOPPED = "Stopped with strategy"
UNREACHABLE_POLLS = 6  # give a dropped port-forward half a minute before giving up
# Why a pod waits for an image that will not come (kubelet/images; operator.go getPendingReason). Such a
# try stays Pending until its deadline (Argo v4.1.4 checks pendingTimeout on the Retry node, Running).
CANNOT_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
STUCK_SECONDS = 180.0  # ImagePullBackOff retries a pull after 10 s, 20 s, … up to 5 minutes
# How the controller words a container that failed, then the container's termination message: the steps'
# templates make it the tail of the container's log (workflow/controller/operator.go:1893-1897).
CONTAINER_FAILED = re.compile(r"(?s)^(\S+: [^\n]*?\(exit code -?\d+\)): (.*)$")
# Lines argoexec's emissary adds to the main container's log around the step's own: its log records carry
# `argo=true` (cmd/argoexec/commands/root.go:84), and it ends with the error it exits with.
EMISSARY_LINE = re.compile(r"(^|\s)argo=true(\s|$)|^Error: exit status -?\d+$")


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
    progress: str = ""  # the running try's own report, N/M; empty when it made none


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _seconds(node: dict, now: datetime) -> float:
    started = _time(node.get("startedAt"))
    if started is None:
        return 0.0
    # never negative: the cluster's clock and this machine's may disagree
    return max(0.0, ((_time(node.get("finishedAt")) or now) - started).total_seconds())


def _tries(node: dict, nodes: dict[str, dict]) -> list[dict]:
    """A Retry node's tries, oldest first (its children; a try's own children are later tasks)."""
    return [nodes[child] for child in node.get("children", []) if child in nodes]


def _view(node: dict, nodes: dict[str, dict]) -> tuple[str, str, str]:
    """(phase, message, progress) of a step: a retried one not over shows its current try's."""
    phase = node.get("phase") or "Pending"
    if node["type"] != "Retry":
        return phase, _message(node), _reported(node)
    tries = _tries(node, nodes)
    last = tries[-1] if tries else {}
    if phase in FULFILLED:  # over: why the last try failed says more than "No more retries left"
        return phase, _message(last) or _message(node), ""
    if last and last.get("phase") not in FULFILLED:
        return last.get("phase") or "Pending", _message(last), _reported(last)
    reasons = (_message(last), _message(node))
    return phase, "; ".join(reason for reason in reasons if reason), ""


def _message(node: dict) -> str:
    return one_line(node.get("message", ""))


def one_line(message: str) -> str:
    """A node's message on one line: of a failed container's log tail, the step's own last line."""
    found = CONTAINER_FAILED.match(message)
    if found is None or "\n" not in message:
        return message
    lines = [line.strip() for line in found[2].splitlines()]
    own = [line for line in lines if line and not EMISSARY_LINE.search(line)]
    return f"{found[1]}: {own[-1]}" if own else found[1]


def _reported(node: dict) -> str:
    progress = node.get("progress", "")
    return "" if progress in UNREPORTED or node.get("phase") != "Running" else progress


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
    steps = []
    for node in shown:
        phase, message, progress = _view(node, nodes)
        tries = len(_tries(node, nodes)) if node["type"] == "Retry" else 1
        steps.append(
            Step(
                name=node.get("displayName") or node["name"],
                template=node.get("templateName", ""),
                phase=phase,
                seconds=_seconds(node, now),
                retries=max(0, tries - 1),
                message=message,
                outputs={
                    p["name"]: p.get("value", "")
                    for p in node.get("outputs", {}).get("parameters", []) or []
                },
                progress=progress,
            )
        )
    return steps


def describe(step: Step) -> str:
    """One line: name, phase, duration, retries, progress, and why a step did not succeed."""
    retries = (
        f"  {step.retries} {'retry' if step.retries == 1 else 'retries'}" if step.retries else ""
    )
    duration = f"{step.seconds:6.0f}s" if step.seconds else "       "
    progress = f"  progress {step.progress}" if step.progress else ""
    message = f"  {step.message}" if step.message and step.phase != "Succeeded" else ""
    return f"  {step.name:<28} {step.phase:<10}{duration}{retries}{progress}{message}"


def failure(workflow: dict) -> str:
    """Why the run did not succeed: stopped, its failed step's message, or the run's own message."""
    message = workflow.get("status", {}).get("message", "")
    if message.startswith(STOPPED):  # every running try then ends "workflow shutdown with …"
        return f"the run was stopped ({message}); nothing after it ran"
    failed = [s for s in steps_of(workflow) if s.phase in FAILED]
    if failed:
        return f"{failed[0].name} failed: {failed[0].message or failed[0].phase}"
    return message or "the run did not succeed"


def ended(workflow: dict) -> RunEnd:
    status = workflow.get("status", {})
    started, finished = _time(status.get("startedAt")), _time(status.get("finishedAt"))
    return RunEnd(
        run=workflow["metadata"]["name"],
        phase=status.get("phase", ""),
        seconds=(finished - started).total_seconds() if started and finished else None,
        failure=failure(workflow),
        accuracy=output(workflow, "evaluate", "accuracy"),
        served=output(workflow, "publish", "served"),
        reason=output(workflow, "publish", "reason"),
    )


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
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Poll the run until it ends, echoing a line per step that changed; returns the final Workflow."""
    seen: dict[str, tuple[str, int, str, str]] = {}
    stuck_since: dict[str, float] = {}
    stopping = False
    misses = 0
    while True:
        try:
            workflow = call(server, lambda argo: argo.get_workflow(name))
            misses = 0
        except ArgoError:
            misses += 1
            if misses >= UNREACHABLE_POLLS:
                raise
            time.sleep(interval)
            continue
        now = clock()
        for step in steps_of(workflow):
            state = (step.phase, step.retries, step.message, step.progress)
            if seen.get(step.name) != state:
                seen[step.name] = state
                echo(describe(step))
            if step.phase != "Pending" or not step.message.startswith(CANNOT_PULL):
                stuck_since.pop(step.name, None)
                continue
            since = stuck_since.setdefault(step.name, now)
            if now - since >= STUCK_SECONDS and not stopping:
                reason = f"{step.name} cannot start: {step.message}"
                echo(f"stopping {name}: {reason} for {now - since:.0f}s")
                stop_workflow(server, name, reason)
                stopping = True
        phase = workflow.get("status", {}).get("phase", "")
        if phase in DONE:
            return workflow
        time.sleep(interval)


def follow(server: ArgoServer, name: str, store: str, interval: float | None) -> int:
    """The run's link; with an interval, watch it to its end and report it (Ctrl-C stops the watching,
    not the run)."""
    print(f"  {server.ui_link(name)}", flush=True)
    if interval is None:
        return 0
    try:
        final = watch(server, name, echo=lambda line: print(line, flush=True), interval=interval)
    except KeyboardInterrupt:
        print(f"submit: stopped watching; {name} goes on: {server.ui_link(name)}", file=sys.stderr)
        return 130
    return report(ended(final), store)
