"""Where a run's time went on the cluster, from its Workflow and its pods' records: one entry per DAG level.

A level holds the tasks whose longest chain of dependencies has the same length (split and init, then
round 1's trainers, ...). For each level: the gap from the previous level's last pod ending (the Workflow's
start, for the first level) to this level's first pod being created, which is the controller's latency;
and for each pod its start, from its creation to its main container running (the image cached), with what
of it went to being scheduled and to Argo's init container. A pod ends when its last container does, as
Argo reads it (workflow/controller/operator.go, getLatestFinishedAt): the wait container, which uploads the
outputs after the main container exits. Kubernetes and Argo stamp times to the whole second
(metav1.Time), so each figure is within a second of the truth; means over many levels are not biased.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.pod_watch import NODE_ID
from workflows.local.plan import read_dag

SCHEDULED = "PodScheduled"
INIT_CONTAINER, MAIN_CONTAINER = "init", "main"  # Argo's init container, the step's own


class RecordError(ValueError):
    """The Workflow and pods recorded do not hold what the analysis needs; the message says what."""


def stamp(text: str) -> float:
    """Seconds since the epoch of a Kubernetes timestamp (RFC 3339, `2026-01-01T00:00:00Z`)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class PodTiming:
    """One pod's times, in seconds since the epoch."""

    task: str  # the DAG task it ran for
    template: str  # the template it ran (split, train, ...)
    node: str  # its node's display name, e.g. train-round-1(0:0)(0)
    phase: str
    created: float
    scheduled: float
    init_started: float
    init_finished: float
    main_started: float
    main_finished: float
    ended: float  # its last container's end

    @property
    def start(self) -> float:
        """Creation to the main container running."""
        return self.main_started - self.created

    @property
    def scheduling(self) -> float:
        return self.scheduled - self.created

    @property
    def init(self) -> float:
        """The init container's run (argoexec: it downloads the inputs)."""
        return self.init_finished - self.init_started


@dataclass(frozen=True)
class LevelTiming:
    number: int  # 1 for the first level
    tasks: tuple[str, ...]
    pods: tuple[PodTiming, ...]
    gap: float  # the previous level's last pod end (the Workflow's start) to this level's first pod
    # the previous level's last task completed in the controller's eyes (its Retry, TaskGroup or Pod node
    # ended), less the previous level's last pod end; None for the first level
    noticed: float | None
    # how long the previous level's last pod to end lived, from its creation; None for the first level
    after_life: float | None

    @property
    def first_created(self) -> float:
        return min(pod.created for pod in self.pods)

    @property
    def last_ended(self) -> float:
        return max(pod.ended for pod in self.pods)


@dataclass(frozen=True)
class RunTiming:
    name: str
    phase: str
    started: float
    finished: float
    levels: tuple[LevelTiming, ...]

    @property
    def total(self) -> float:
        """The Workflow's start to its end, as the controller stamped them."""
        return self.finished - self.started

    def parts(self) -> dict[str, float]:
        """The total, level after level: the controller's gaps, the pods' start (a level's first pod
        created to its last main container running), the steps (to the last main container's end), the
        wait containers after them (uploads), and the run's end after its last pod."""
        found = dict.fromkeys(("gaps", "starts", "steps", "uploads"), 0.0)
        for level in self.levels:
            started = max(pod.main_started for pod in level.pods)
            finished = max(pod.main_finished for pod in level.pods)
            found["gaps"] += level.gap
            found["starts"] += started - level.first_created
            found["steps"] += finished - started
            found["uploads"] += level.last_ended - finished
        return found | {"end": self.finished - self.levels[-1].last_ended}


def dag_template(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    """The entrypoint's dag template, from the spec (or the stored spec of a template's run)."""
    spec = workflow.get("status", {}).get("storedWorkflowTemplateSpec") or workflow["spec"]
    entrypoint = spec["entrypoint"]
    for template in spec.get("templates") or []:
        if template["name"] == entrypoint and "dag" in template:
            return template
    raise RecordError(f"the entrypoint {entrypoint!r} is no dag template")


def task_levels(template: Mapping[str, Any]) -> dict[str, int]:
    """Each task's level: 0 without dependencies, else one more than its deepest dependency's (the
    dependencies as Argo reads `depends`: workflow/common/ancestry.go, GetTaskDependencies)."""
    needs = read_dag(template).needs
    levels: dict[str, int] = {}

    def level(task: str) -> int:
        if task not in levels:
            levels[task] = 1 + max((level(other) for other in needs[task]), default=-1)
        return levels[task]

    for task in needs:
        level(task)
    return levels


def task_of(node_name: str, run: str) -> str:
    """The entrypoint DAG's task a node belongs to, from its name: RUN.TASK, then `(i:item)` for a
    fan-out's child and `(n)` for a retry's attempt (workflow/controller/dag.go, taskNodeName)."""
    prefix = f"{run}."
    if not node_name.startswith(prefix):
        raise RecordError(f"node {node_name!r} is not of the run {run}")
    return node_name.removeprefix(prefix).split("(", 1)[0]


def container_state(pod: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any]:
    for container in pod["status"].get(key) or []:
        if container["name"] == name:
            state = container.get("state") or {}
            return state.get("terminated") or state.get("running") or {}
    raise RecordError(f"pod {pod['metadata']['name']}: no container {name} in {key}")


def required(value: str | None, what: str, pod: Mapping[str, Any]) -> float:
    if not value:
        raise RecordError(f"pod {pod['metadata']['name']}: no {what} recorded")
    return stamp(value)


def pod_timing(pod: Mapping[str, Any], node: Mapping[str, Any], task: str) -> PodTiming:
    name = pod["metadata"]["name"]
    scheduled = [
        c for c in pod["status"].get("conditions") or []
        if c.get("type") == SCHEDULED and c.get("status") == "True"
    ]  # fmt: skip
    if not scheduled:
        raise RecordError(f"pod {name}: never scheduled")
    init = container_state(pod, "initContainerStatuses", INIT_CONTAINER)
    main = container_state(pod, "containerStatuses", MAIN_CONTAINER)
    ends = [
        (c.get("state") or {}).get("terminated", {}).get("finishedAt")
        for key in ("initContainerStatuses", "containerStatuses")
        for c in pod["status"].get(key) or []
    ]
    if not all(ends):
        raise RecordError(f"pod {name}: a container had not ended when it was last seen")
    return PodTiming(
        task=task,
        template=node.get("templateName", ""),
        node=node["displayName"],
        phase=pod["status"].get("phase") or "",
        created=required(pod["metadata"].get("creationTimestamp"), "creation", pod),
        scheduled=stamp(scheduled[0]["lastTransitionTime"]),
        init_started=required(init.get("startedAt"), "init start", pod),
        init_finished=required(init.get("finishedAt"), "init end", pod),
        main_started=required(main.get("startedAt"), "main start", pod),
        main_finished=required(main.get("finishedAt"), "main end", pod),
        ended=max(stamp(end) for end in ends if end),
    )


def analyse(workflow: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> RunTiming:
    """The run's levels, gaps and pod starts; RecordError when a level has no pod recorded, a pod
    names no node of the Workflow, or a time the analysis reads is missing."""
    run = workflow["metadata"]["name"]
    status = workflow["status"]
    nodes = status["nodes"]
    levels = task_levels(dag_template(workflow))
    timings: dict[int, list[PodTiming]] = {level: [] for level in set(levels.values())}
    for pod in pods:
        node = nodes.get((pod["metadata"].get("annotations") or {}).get(NODE_ID, ""))
        if node is None:
            raise RecordError(f"pod {pod['metadata']['name']} names no node of {run}")
        task = task_of(node["name"], run)
        if task not in levels:
            raise RecordError(f"pod {pod['metadata']['name']}: {task} is no task of the DAG")
        timings[levels[task]].append(pod_timing(pod, node, task))
    if missing := sorted(level + 1 for level, found in timings.items() if not found):
        raise RecordError(f"{run}: no pod recorded for level {', '.join(map(str, missing))}")
    task_ends = {
        task_of(node["name"], run): stamp(node["finishedAt"])
        for node in nodes.values()
        if node["name"].count("(") == 0 and node["name"] != run and node.get("finishedAt")
    }
    started = stamp(status["startedAt"])
    result: list[LevelTiming] = []
    for level in sorted(timings):
        found = tuple(sorted(timings[level], key=lambda pod: (pod.created, pod.node)))
        tasks = tuple(sorted({pod.task for pod in found}))
        previous = result[-1] if result else None
        after = previous.last_ended if previous else started
        noticed = life = None
        if previous is not None:
            ends = [task_ends[task] for task in previous.tasks if task in task_ends]
            noticed = max(ends) - after if ends else None
            last = max(previous.pods, key=lambda pod: (pod.ended, pod.created))
            life = last.ended - last.created
        gap = min(pod.created for pod in found) - after
        result.append(LevelTiming(level + 1, tasks, found, gap, noticed, life))
    return RunTiming(
        name=run,
        phase=status["phase"],
        started=started,
        finished=stamp(status["finishedAt"]),
        levels=tuple(result),
    )


def trimmed_workflow(workflow: Mapping[str, Any]) -> dict[str, Any]:
    """What analyse() reads of a Workflow: its name, its entrypoint's DAG (each task's name and
    dependencies), its phase and times, and its nodes' IDs, names, templates and ends."""
    spec = workflow.get("status", {}).get("storedWorkflowTemplateSpec") or workflow["spec"]
    template = dag_template(workflow)
    task_fields = ("name", "depends", "dependencies", "continueOn")
    tasks = [
        {key: task[key] for key in task_fields if key in task} for task in template["dag"]["tasks"]
    ]
    node_fields = ("id", "name", "displayName", "templateName", "finishedAt")
    status = workflow["status"]
    return {
        "metadata": {"name": workflow["metadata"]["name"]},
        "spec": {
            "entrypoint": spec["entrypoint"],
            "templates": [{"name": template["name"], "dag": {"tasks": tasks}}],
        },
        "status": {
            "phase": status.get("phase"),
            "startedAt": status.get("startedAt"),
            "finishedAt": status.get("finishedAt"),
            "nodes": {
                key: {field: node[field] for field in node_fields if field in node}
                for key, node in status.get("nodes", {}).items()
            },
        },
    }
