"""A stand-in for Argo's workflow controller and for the pipeline's steps, which cannot run here: it
plays a compiled Workflow's DAG tick by tick and answers the run's `status` as the Argo Server would.

The controller's part follows Argo v4.1.2 (workflow/controller in Argo's source), and its rules are the
project's own functions, not copies of them, so a test through the double holds the runner's rules too;
what is the double's own is the scaffolding around them (nodes, ticks, timestamps, progress sums):
- dag.go executeDAGTask, evaluateDependsLogic: a task starts once every task its `depends` names is
  fulfilled, and runs when the expression holds (workflows/local/dag.py should_run); a false `depends`
  leaves the task Omitted. withParam fans out under a TaskGroup node, whose phase is
  workflows/common/depends.py group_phase. A task's node is a child of its dependencies' outbound nodes.
- operator.go executeTemplate, processNodeRetries: a template with a retryStrategy runs under a Retry
  node (created Running), one Pod node per try; after a failed try workflows/local/retries.py decides, and a
  backoff is waited out in whole ticks.
- dag.go assessDAGPhase: the run's phase, from its target tasks (workflows/local/dag.py).
- progress (docs/progress.md; upstream workflow/progress/updater.go, UpdateProgress): a Pod node's
  progress is "0/1" until its own report (ARGO_PROGRESS_FILE, `N/M`) arrives, and N/N once Succeeded;
  a failed Pod keeps its last report. Other nodes sum their children's.

The steps' part (what the containers would do): split prints shard ids 0..workers-1; a trainer runs
TRAIN_TICKS ticks and reports batches done of epochs * ceil(shard size / batch); aggregate exits 2 when
fewer trainers delivered than min-workers (every worker, when 0); evaluate outputs `accuracy`, and
publish `served` (false) and `reason` (NOT_SERVED_REASON). A story
makes one trainer fail: "fail" (FAILING_NODE is OOM-killed on every try), "retry" (RETRIED_NODE
fails once with exit code 1, then succeeds) or "cannot-pull" (FAILING_NODE's image cannot be pulled:
each try's pod stays Pending in ImagePullBackOff, the message operator.go getPendingReason gives it,
until the kubelet ends it at its activeDeadlineSeconds, counted from the pod's start).

A run can be stopped (server/workflow/workflow_server.go StopWorkflow): from that tick on it is Failed
with the controller's message "Stopped with strategy 'Stop'".
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from workflows.common.depends import group_phase
from workflows.common.durations import deadline_seconds
from workflows.local import retries
from workflows.local.dag import TaskOutcome, assess, read_dag, should_run

START = datetime.now(UTC).replace(microsecond=0)
SECONDS_PER_TICK = 10
TRAIN_TICKS = 3  # a trainer runs this many ticks: no report yet, then 1/3 and 2/3 of its batches
TRAINING_DIGITS = 60000
FAILING_NODE = "train-round-1(1:1)"
RETRIED_NODE = "train-round-1(0:0)"
ACCURACY = "0.9771"
# publish's outcome: kept, not served (a run Succeeds whichever it is)
NOT_SERVED_REASON = "its test accuracy 0.9771 is not above mnist-abc12's 0.9906, which LATEST serves (--serve if-better)"


def stamp(tick: int) -> str:
    return (START + timedelta(seconds=tick * SECONDS_PER_TICK)).isoformat().replace("+00:00", "Z")


# ---- the plan of a run: every node, with the ticks it changes at ------------------------------------


@dataclass
class Node:
    """One node of the run: it exists from `created`, a Pod runs from `started`, all end at `finished`."""

    display: str
    kind: str  # Pod, Retry, TaskGroup, Skipped
    template: str | None
    created: int
    finished: int
    phase: str  # once finished
    parents: list[str]  # displays of the nodes that list this one as a child
    started: int | None = None
    message: str = ""
    exit_code: str | None = None
    batches: int = 0  # a trainer's total; it reports progress against it
    parameters: list[dict] = field(default_factory=list)  # output parameters, once Succeeded
    waits: list[tuple[int, int, str]] = field(default_factory=list)  # Retry: backoff windows
    pending: str = ""  # a Pod that never starts: why, while it is Pending


def _step_kind(template: dict) -> str:
    """Which of the project's steps a template runs: its container's `python -m steps.<name>`."""
    command = template.get("container", {}).get("command", [])
    modules = [part for part in command if part.startswith("steps.")]
    return modules[0].removeprefix("steps.") if modules else template["name"]


class RunPlan:
    """The whole run, decided when it is created: the double answers its state at any tick."""

    def __init__(self, name: str, spec: dict, parameters: dict[str, str], story: str) -> None:
        self.name, self.story = name, story
        self.parameters = parameters
        self.templates = {t["name"]: t for t in spec["templates"]}
        self.nodes: list[Node] = []
        self.dag = read_dag(self.templates[spec["entrypoint"]])
        self.tasks = self.dag.tasks
        self.done: dict[str, int] = {}  # task -> tick its node(s) ended
        self.outbound: dict[str, list[str]] = {}  # task -> displays its dependents hang under
        self.phase_of: dict[str, str] = {}  # task -> its node's final phase
        self.children_of: dict[str, list[Node]] = {}  # fan-out task -> its items' nodes
        for task in self.tasks:
            self._play(task)
        self.finished = max(node.finished for node in self.nodes)
        self.phase = assess(self.dag, self._outcomes())  # dag.go assessDAGPhase
        self.stopped: int | None = None

    def stop(self, tick: int) -> None:
        """Stopped at `tick`: the run ends Failed then, whatever was still running."""
        if tick < self.finished and self.stopped is None:
            self.stopped = tick

    # -- tasks --

    def _play(self, name: str) -> None:
        if name in self.done:
            return
        task = self.tasks[name]
        needs = sorted(self.dag.needs[name])
        for need in needs:
            self._play(need)
        start = max((self.done[need] for need in needs), default=1)
        parents = [display for need in needs for display in self.outbound[need]] or [self.name]
        if not should_run(self.dag, name, self._outcomes()):
            omitted = Node(name, "Skipped", None, start, start, "Omitted", parents)
            omitted.message = "omitted: depends condition not met"
            self._finish(name, [omitted], omitted, [name])
            return
        template = self.templates[task["template"]]
        if "withParam" not in task:
            nodes, last = self._step(name, template, start, parents)
            self._finish(name, nodes, nodes[0], [last])
            return
        group = Node(name, "TaskGroup", None, start, start, "Succeeded", parents)
        nodes, items, outbound = [group], [], []
        for shard in range(int(self.parameters["workers"])):
            step, last = self._step(f"{name}({shard}:{shard})", template, start, [name])
            nodes += step
            items.append(step[0])
            outbound.append(last)
        group.finished = max(item.finished for item in items)
        group.phase = group_phase([item.phase for item in items])
        self.children_of[name] = items
        self._finish(name, nodes, group, outbound)

    def _finish(self, task: str, nodes: list[Node], node: Node, outbound: list[str]) -> None:
        self.nodes += nodes
        self.done[task] = max(n.finished for n in nodes)
        self.phase_of[task] = node.phase
        self.outbound[task] = outbound

    def _outcomes(self) -> dict[str, TaskOutcome]:
        """Every task played so far as the runner's DAG rules read it (workflows/local/dag.py)."""
        return {
            task: TaskOutcome(
                phase, tuple(item.phase for item in self.children_of.get(task, [])) or None
            )
            for task, phase in self.phase_of.items()
        }

    # -- steps and their tries --

    def _step(self, display: str, template: dict, start: int, parents: list[str]) -> tuple:
        """A step's nodes (a Pod, or a Retry node and its tries) and the display of its outbound node."""
        strategy = template.get("retryStrategy")
        if strategy is None:
            pod = self._try(display, template, 0, start, parents)
            return [pod], pod.display
        retry = Node(display, "Retry", template["name"], start, start, "Running", parents)
        tries: list[Node] = []
        created = start
        while True:
            pod = self._try(f"{display}({len(tries)})", template, len(tries), created, [display])
            tries.append(pod)
            if pod.phase == "Succeeded":
                retry.phase, retry.finished = "Succeeded", pod.finished
                retry.parameters, retry.exit_code = pod.parameters, pod.exit_code
                break
            verdict, created = self._retry_verdict(strategy, tries, retry)
            if verdict is not None:
                retry.phase, retry.finished, retry.message = pod.phase, created, verdict
                break
        return [retry, *tries], tries[-1].display

    def _retry_verdict(
        self, strategy: dict, tries: list[Node], retry: Node
    ) -> tuple[str | None, int]:
        """After a failed try: (why the step fails, or None to try again; the tick it is decided), as
        the runner decides it (workflows/local/retries.py), with a backoff waited out in whole ticks."""
        attempts = [
            retries.Attempt(
                pod.phase,
                int(pod.exit_code) if pod.exit_code else None,
                pod.message,
                pod.created * SECONDS_PER_TICK,
                pod.finished * SECONDS_PER_TICK,
            )
            for pod in tries
        ]
        tick = tries[-1].finished
        while True:
            decision = retries.decide(strategy, attempts, now=tick * SECONDS_PER_TICK)
            if isinstance(decision, retries.Stop):
                return decision.message, tick
            if isinstance(decision, retries.Retry):
                return None, tick
            until = math.ceil(decision.until / SECONDS_PER_TICK)
            wait = decision.until - attempts[-1].finished
            retry.waits.append((tick, until, f"Backoff for {wait:.0f}s"))
            tick = until

    def _try(self, display: str, template: dict, attempt: int, created: int, parents: list) -> Node:
        """One Pod: what the step's container does, as far as the controller can see."""
        kind = _step_kind(template)
        step = display.rsplit("(", 1)[0] if template.get("retryStrategy") else display
        running = TRAIN_TICKS if kind == "train" else 1
        pod = Node(
            display, "Pod", template["name"], created, created + 1 + running, "Succeeded", parents
        )
        pod.started, pod.exit_code = created + 1, "0"
        if kind == "train":
            pod.batches = self._batches()
        failure = None
        if self.story == "fail" and step == FAILING_NODE:
            failure = ("OOMKilled (exit code 137)", "137")
        elif self.story == "retry" and step == RETRIED_NODE and attempt == 0:
            failure = ("Error (exit code 1)", "1")
        elif self.story == "cannot-pull" and step == FAILING_NODE:
            image = template["container"]["image"]
            pod.started, pod.pending = None, f'ImagePullBackOff: Back-off pulling image "{image}"'
            deadline = deadline_seconds(template.get("activeDeadlineSeconds")) or 0.0
            pod.finished = created + 1 + math.ceil(deadline / SECONDS_PER_TICK)
            failure = ("Pod was active on the node longer than the specified deadline", None)
        elif kind == "aggregate" and self._delivered(step) < self._required():
            failure = ("Error (exit code 2)", "2")
        if failure:
            pod.phase, (pod.message, pod.exit_code) = "Failed", failure
        else:
            pod.parameters = self._outputs(template, step)
        return pod

    def _batches(self) -> int:
        digits = int(self.parameters.get("limit") or 0) or TRAINING_DIGITS
        shard = math.ceil(digits / int(self.parameters["workers"]))
        return int(self.parameters["epochs"]) * math.ceil(shard / int(self.parameters["batch"]))

    def _required(self) -> int:
        return int(self.parameters.get("min-workers") or 0) or int(self.parameters["workers"])

    def _fan_ins(self, step: str) -> list[str]:
        """The fan-out tasks whose items a single task gathers (aggregate: the round's trainers)."""
        if step not in self.tasks:
            return []
        return [need for need in sorted(self.dag.needs[step]) if need in self.children_of]

    def _delivered(self, step: str) -> int:
        items = [item for need in self._fan_ins(step) for item in self.children_of[need]]
        return sum(item.phase == "Succeeded" for item in items)

    def _outputs(self, template: dict, step: str) -> list[dict]:
        declared = {p["name"] for p in template.get("outputs", {}).get("parameters", [])}
        workers = int(self.parameters["workers"])
        missing = [
            shard
            for need in self._fan_ins(step)
            for shard, item in enumerate(self.children_of[need])
            if item.phase != "Succeeded"
        ]
        values = {
            "shard-ids": json.dumps(list(range(workers))),
            "shard-sizes": json.dumps({str(shard): 1 for shard in range(workers)}),
            "missing-shards": ",".join(map(str, missing)),
            "accuracy": ACCURACY,
            "served": "false",
            "reason": NOT_SERVED_REASON,
        }
        return [{"name": name, "value": values[name]} for name in sorted(declared & set(values))]

    # -- the status the server answers --

    def status(self, tick: int) -> dict:
        """The Workflow's `status` at this tick."""
        if self.stopped is not None and tick > self.stopped:
            stopped = self.status(self.stopped)
            message = "Stopped with strategy 'Stop'"
            return stopped | {"phase": "Failed", "finishedAt": stamp(tick), "message": message}
        shown = [node for node in self.nodes if node.created <= tick]
        nodes = {self._id(self.name): self._root(tick)}
        for node in shown:
            nodes[self._id(node.display)] = self._node(node, tick)
        for node in shown:
            for parent in node.parents:
                nodes[self._id(parent)]["children"].append(self._id(node.display))
        progress = _sum_progress(nodes)
        status: dict[str, Any] = {
            "phase": "Running",
            "startedAt": stamp(0),
            "nodes": nodes,
            "progress": progress,
        }
        if tick >= self.finished:
            status["phase"], status["finishedAt"] = self.phase, stamp(self.finished)
            if self.phase != "Succeeded":
                failed = [n for n in self.nodes if n.kind == "Pod" and n.phase == self.phase]
                if failed:
                    status["message"] = f"child '{self._id(failed[0].display)}' failed"
        return status

    def _id(self, display: str) -> str:
        name = display if display == self.name else f"{self.name}.{display}"
        return f"{self.name}-{zlib.crc32(name.encode())}"

    def _root(self, tick: int) -> dict:
        done = tick >= self.finished
        root = {
            "id": self._id(self.name),
            "name": self.name,
            "displayName": self.name,
            "type": "DAG",
            "templateName": next(name for name, t in self.templates.items() if "dag" in t),
            "phase": self.phase if done else "Running",
            "startedAt": stamp(0),
            "children": [],
        }
        if done:
            root["finishedAt"] = stamp(self.finished)
        return root

    def _node(self, node: Node, tick: int) -> dict:
        done = tick >= node.finished
        if node.kind == "Pod" and not done and (node.started is None or tick < node.started):
            phase = "Pending"
        else:
            phase = node.phase if done else "Running"
        answer: dict[str, Any] = {
            "id": self._id(node.display),
            "name": f"{self.name}.{node.display}",
            "displayName": node.display,
            "type": node.kind,
            "phase": phase,
            "boundaryID": self._id(self.name),
            "startedAt": stamp(node.created),
            "children": [],
        }
        if node.template:
            answer["templateName"] = node.template
        message = node.message if done else node.pending
        for begin, end, waiting in node.waits:
            if begin <= tick < end:
                message = waiting
        if message:
            answer["message"] = message
        if done:
            answer["finishedAt"] = stamp(node.finished)
            outputs: dict[str, Any] = {}
            if node.exit_code is not None:
                outputs["exitCode"] = node.exit_code
            if node.phase == "Succeeded" and node.parameters:
                outputs["parameters"] = node.parameters
            if outputs:
                answer["outputs"] = outputs
        if node.kind == "Pod":
            answer["progress"] = _pod_progress(node, tick)
        return answer


def _pod_progress(pod: Node, tick: int) -> str:
    """updater.go: "0/1" until the pod's own report arrives; N/N once Succeeded; a failed pod keeps
    its last report. A trainer reports once per tick after its first."""
    if tick >= pod.finished and pod.phase == "Succeeded":
        return f"{pod.batches}/{pod.batches}" if pod.batches else "1/1"
    running = min(tick, pod.finished - 1) - (pod.started or 0)
    if not pod.batches or running < 1:
        return "0/1"
    return f"{pod.batches * running // TRAIN_TICKS}/{pod.batches}"


def _add(progress: str, other: str) -> str:
    done, total = (int(part) for part in progress.split("/"))
    more_done, more_total = (int(part) for part in other.split("/"))
    return f"{done + more_done}/{total + more_total}"


def _sum_progress(nodes: dict[str, dict]) -> str:
    """updater.go UpdateProgress: Pods keep theirs; every other node sums its children's (each node
    once); the run's is the sum of its Pods'."""

    def total(node: dict, visited: set[str]) -> str:
        progress = "0/0"
        for child_id in node["children"]:
            if child_id in visited or child_id not in nodes:
                continue
            visited.add(child_id)
            child = nodes[child_id]
            progress = _add(progress, total(child, visited))
            if child["type"] == "Pod":
                progress = _add(progress, child["progress"])
        return progress

    for node in nodes.values():
        if node["type"] != "Pod":
            node["progress"] = total(node, set())
    run = "0/0"
    for node in nodes.values():
        if node["type"] == "Pod":
            run = _add(run, node["progress"])
    return run
