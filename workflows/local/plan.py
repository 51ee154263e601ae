"""The DAG as Argo v4.1.4's controller walks it (workflow/controller/dag.go): depends, fan-outs, phases."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from workflows.errors import UnsupportedFeature, WorkflowError
from workflows.local.retries import Attempt
from workflows.local.spec import substitute

FINAL = ("Succeeded", "Failed", "Error", "Omitted", "Skipped")
FAILED = ("Failed", "Error")
RESULTS = {"Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned"}
BARE_NAME = ("Succeeded", "Skipped", "Daemoned")  # what `a` means (ancestry.go:expandDependency)
# The depends the pipeline writes: `&&` of terms or parenthesised `||`s of terms, or one bare `||` of terms.
TERM = r"[A-Za-z0-9][-A-Za-z0-9]*(?:\.[A-Za-z]+)?"
ANY = rf"{TERM}(?:\s*\|\|\s*{TERM})*"
CLAUSE = rf"(?:{TERM}|\(\s*{ANY}\s*\))"
DEPENDS = re.compile(rf"\s*(?:{ANY}|{CLAUSE}(?:\s*&&\s*{CLAUSE})*)\s*")


@dataclass
class Node:
    """One execution of a template: a DAG task, one item of a task's fan-out, or an Omitted/Skipped task."""

    name: str
    task: str
    template: str
    arguments: dict[str, str]
    log: Path
    phase: str = "Pending"
    tries: list[Attempt] = field(default_factory=list)
    message: str = ""
    started: float | None = None
    finished: float | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    progress: str = ""
    progress_file: Path | None = None

    @property
    def attempts(self) -> int:
        return len(self.tries) + (self.phase == "Succeeded")

    @property
    def duration(self) -> float:
        return (self.finished or time.monotonic()) - (self.started or time.monotonic())


# A `depends`: every clause holds when one of its (task, result or None) terms does.
Depends = list[list[tuple[str, str | None]]]


@dataclass(frozen=True)
class Dag:
    """The entry template's tasks, their `depends`, and the targets that decide the DAG's phase."""

    tasks: dict[str, Mapping[str, Any]]
    depends: dict[str, Depends]
    needs: dict[str, set[str]]
    order: list[str]
    targets: tuple[str, ...]  # the tasks nothing depends on


def read_dag(template: Mapping[str, Any]) -> Dag:
    """The dag template's tasks; WorkflowError for a task named twice, an unknown task or a cycle."""
    tasks = {task["name"]: task for task in template["dag"]["tasks"]}
    if len(tasks) != len(template["dag"]["tasks"]):
        raise WorkflowError(f"templates.{template['name']}: a task name is used twice")
    depends = {name: parse(str(task.get("depends", ""))) for name, task in tasks.items()}
    needs = {name: {t for clause in d for t, _ in clause} for name, d in depends.items()}
    for name, needed in needs.items():
        if unknown := sorted(needed - set(tasks)):
            raise WorkflowError(f"task {name!r} depends on unknown tasks: {', '.join(unknown)}")
    try:
        order = list(TopologicalSorter(needs).static_order())
    except CycleError as error:
        cycle = error.args[1]
        raise WorkflowError(f"templates.{template['name']}: a dependency cycle: {cycle}") from None
    targets = tuple(sorted(set(tasks).difference(*needs.values())))
    return Dag(tasks, depends, needs, order, targets)


def parse(text: str) -> Depends:
    """A `depends` text (empty: no clauses); UnsupportedFeature for what the pipeline never writes."""
    if not (bare := "".join(text.split())):
        return []
    clauses = [
        [(task, result or None) for task, _, result in (t.partition(".") for t in c.split("||"))]
        for c in bare.replace("(", "").replace(")", "").split("&&")
    ]
    if not DEPENDS.fullmatch(text) or any(r not in RESULTS for c in clauses for _, r in c if r):
        raise UnsupportedFeature(f"the local runner cannot read depends {text!r}")
    return clauses


def task_phase(dag: Dag, task: str, nodes: Mapping[str, list[Node]]) -> str | None:
    """A task's phase once its nodes are final (a fan-out's: its last failed child's, else Succeeded)."""
    if not (made := nodes.get(task)) or any(node.phase not in FINAL for node in made):
        return None
    if "withParam" not in dag.tasks[task] or made[0].phase in ("Omitted", "Skipped"):  # never ran
        return made[0].phase
    failed = [node.phase for node in made if node.phase in FAILED]
    return failed[-1] if failed else "Succeeded"


def verdict(dag: Dag, task: str, nodes: Mapping[str, list[Node]]) -> bool | None:
    """None while a task it names is unfulfilled, then whether its `depends` holds (dag.go)."""
    phases = {name: task_phase(dag, name, nodes) for name in dag.needs[task]}
    if None in phases.values():
        return None
    results = {name: {"Error": "Errored"}.get(str(p), str(p)) for name, p in phases.items()}
    return all(
        any(results[t] in ((r,) if r else BARE_NAME) for t, r in c) for c in dag.depends[task]
    )


def expand(task: Mapping[str, Any], values: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
    """(node name, arguments) of each node the task makes: one, or one per item of its withParam."""
    where = f"task {task['name']!r}"
    parameters = task.get("arguments", {}).get("parameters", [])
    arguments = {p["name"]: str(p["value"]) for p in parameters}
    if "withParam" not in task:
        return [(task["name"], substitute(arguments, values, where))]
    text = substitute(task["withParam"], values, where)
    try:
        items = json.loads(text)
        if not isinstance(items, list) or not all(isinstance(i, str | int) for i in items):
            raise ValueError
    except ValueError:
        message = f"withParam value could not be parsed as a JSON list of names: {text.strip()}"
        raise ValueError(message) from None
    labels = [json.dumps(item) if isinstance(item, int) else item for item in items]  # {{item}}
    return [
        (f"{task['name']}({i}:{label})", substitute(arguments, {**values, "item": label}, where))
        for i, label in enumerate(labels)
    ]


def dag_phase(dag: Dag, nodes: Mapping[str, list[Node]]) -> str:
    """The DAG's phase (dag.go:assessDAGPhase): an Omitted or Skipped target inherits a failure above it."""
    carried: dict[str, set[str]] = {}  # the phases each task passes down its branches
    for task in dag.order:  # each after what it depends on
        if (phase := task_phase(dag, task, nodes)) is None:
            return "Running"
        above = set().union(*(carried[need] for need in dag.needs[task]))
        carried[task] = {phase} if phase in ("Succeeded", *FAILED) else above
    failed = sorted(phase for target in dag.targets for phase in carried[target] & set(FAILED))
    return failed[0] if failed else "Succeeded"
