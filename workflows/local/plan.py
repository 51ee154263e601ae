"""The DAG as Argo v4.1.4's controller walks it (workflow/controller/dag.go): each task's `depends`, read and
evaluated as workflow/common/ancestry.go reads it; the nodes a task becomes (one, or one per item of its
withParam); and the DAG's phase once its tasks are fulfilled.

`depends` as the pipeline writes it: task names and `task.Result` terms joined by `&&` and `||`, with
parentheses. A bare name `a` means `(a.Succeeded || a.Skipped || a.Daemoned)` (ancestry.go:expandDependency).
A fan-out's results are those of its group: Succeeded, or the phase of its last child that Failed or Errored
(dag.go:executeDAGTask). A task whose expression is false once every task it names is fulfilled is Omitted.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from workflows.errors import UnsupportedFeature, WorkflowError
from workflows.local.retries import Attempt
from workflows.local.spec import substitute

FINAL = ("Succeeded", "Failed", "Error", "Omitted", "Skipped")
COMPLETED = ("Succeeded", "Failed", "Error")
FAILED = ("Failed", "Error")
RESULTS = {"Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned"}
BARE_NAME = ("Succeeded", "Skipped", "Daemoned")
DEPENDS_TOKEN = re.compile(r"\s*(&&|\|\||\(|\)|[A-Za-z0-9][-A-Za-z0-9]*(?:\.[A-Z][A-Za-z]+)?)")

# an expression: ("term", task, result or None), or ("and" | "or", operand, ...)
Expression = tuple


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


@dataclass(frozen=True)
class Dag:
    """The entry template's tasks, their `depends`, and the targets that decide the DAG's phase."""

    tasks: dict[str, Mapping[str, Any]]
    expressions: dict[str, Expression | None]
    needs: dict[str, set[str]]
    order: list[str]
    targets: tuple[str, ...]  # the tasks nothing depends on


def read_dag(template: Mapping[str, Any]) -> Dag:
    """The dag template's tasks; WorkflowError for a task named twice, an unknown task or a cycle."""
    tasks = {task["name"]: task for task in template["dag"]["tasks"]}
    if len(tasks) != len(template["dag"]["tasks"]):
        raise WorkflowError(f"templates.{template['name']}: a task name is used twice")
    expressions = {name: parse(str(task.get("depends", ""))) for name, task in tasks.items()}
    needs = {name: named(expression) for name, expression in expressions.items()}
    for name, needed in needs.items():
        if unknown := sorted(needed - set(tasks)):
            raise WorkflowError(f"task {name!r} depends on unknown tasks: {', '.join(unknown)}")
    try:
        order = list(TopologicalSorter(needs).static_order())
    except CycleError as error:
        raise WorkflowError(
            f"templates.{template['name']}: a dependency cycle: {error.args[1]}"
        ) from None
    depended_on = set().union(*needs.values())
    return Dag(tasks, expressions, needs, order, tuple(sorted(set(tasks) - depended_on)))


def parse(text: str) -> Expression | None:
    """A `depends` text as a tree; None when empty; UnsupportedFeature for what it does not read."""
    tokens = DEPENDS_TOKEN.findall(text)
    try:
        if "".join(tokens) != "".join(text.split()):
            raise ValueError(text)
        expression = _joined(tokens, "||") if tokens else None
        if tokens:
            raise ValueError(tokens[0])
    except ValueError as error:
        raise UnsupportedFeature(
            f"the local runner cannot read {error} in depends {text!r}"
        ) from None
    return expression


def _joined(tokens: list[str], operator: str) -> Expression:
    """Operands joined by `operator`, taken from the front of `tokens` (|| binds looser than &&)."""
    operands = [_joined(tokens, "&&") if operator == "||" else _operand(tokens)]
    while tokens[:1] == [operator]:
        del tokens[0]
        operands.append(_joined(tokens, "&&") if operator == "||" else _operand(tokens))
    return operands[0] if len(operands) == 1 else ("or" if operator == "||" else "and", *operands)


def _operand(tokens: list[str]) -> Expression:
    token = tokens.pop(0) if tokens else "the end"
    if token == "(":
        inner = _joined(tokens, "||")
        if tokens[:1] != [")"]:
            raise ValueError("unbalanced parentheses")
        del tokens[0]
        return inner
    task, _, result = token.partition(".")
    if token in ("&&", "||", ")", "the end") or (result and result not in RESULTS):
        raise ValueError(repr(token))
    return ("term", task, result or None)


def named(expression: Expression | None) -> set[str]:
    """The tasks an expression names."""
    if expression is None:
        return set()
    if expression[0] == "term":
        return {expression[1]}
    return set().union(*(named(operand) for operand in expression[1:]))


def holds(expression: Expression | None, phases: Mapping[str, str]) -> bool:
    """The expression over each named task's phase (a fan-out's: its group's)."""
    if expression is None:
        return True
    if expression[0] == "term":
        _, task, result = expression
        accepted = (result,) if result else BARE_NAME
        return {"Error": "Errored"}.get(phases[task], phases[task]) in accepted
    values = (holds(operand, phases) for operand in expression[1:])
    return all(values) if expression[0] == "and" else any(values)


def task_phase(nodes: Sequence[Node], fan_out: bool) -> str | None:
    """A task's phase once every node it made is final (a fan-out's: the last Failed or Error child's,
    else Succeeded); None before."""
    if any(node.phase not in FINAL for node in nodes):
        return None
    if not fan_out or nodes[0].phase in ("Omitted", "Skipped"):  # a task that never ran is one node
        return nodes[0].phase
    failed = [node.phase for node in nodes if node.phase in FAILED]
    return failed[-1] if failed else "Succeeded"


def verdict(dag: Dag, task: str, nodes: Mapping[str, list[Node]]) -> bool | None:
    """None while a task it names is unfulfilled; then whether its `depends` holds (dag.go:
    evaluateDependsLogic)."""
    phases = {name: phase_of(dag, name, nodes) for name in dag.needs[task]}
    if any(phase is None for phase in phases.values()):
        return None
    return holds(dag.expressions[task], phases)  # type: ignore[arg-type]


def phase_of(dag: Dag, task: str, nodes: Mapping[str, list[Node]]) -> str | None:
    if task not in nodes:
        return None
    return task_phase(nodes[task], "withParam" in dag.tasks[task])


def expand(task: Mapping[str, Any], values: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
    """(node name, arguments) of each node the task makes: one, or one per item of its withParam."""
    where = f"task {task['name']!r}"
    arguments = {
        p["name"]: str(p["value"]) for p in task.get("arguments", {}).get("parameters", [])
    }
    if "withParam" not in task:
        return [(task["name"], substitute(arguments, values, where))]
    text = substitute(task["withParam"], values, where)
    fault = ValueError(
        f"withParam value could not be parsed as a JSON list of names: {text.strip()}"
    )
    try:
        items = json.loads(text)
    except ValueError:
        raise fault from None
    if not isinstance(items, list) or not all(isinstance(item, str | int) for item in items):
        raise fault
    labels = [json.dumps(item) if isinstance(item, int) else item for item in items]  # {{item}}
    return [
        (
            f"{task['name']}({index}:{label})",
            substitute(arguments, {**values, "item": label}, where),
        )
        for index, label in enumerate(labels)
    ]


def dag_phase(dag: Dag, nodes: Mapping[str, list[Node]]) -> str:
    """Running, Succeeded, Failed or Error (dag.go:assessDAGPhase): each branch carries down its last
    completed phase, so an Omitted or Skipped target inherits a failure above it."""
    carried: dict[str, set[str]] = {}  # the phases each task passes down its branches
    for task in dag.order:  # each after what it depends on
        if (phase := phase_of(dag, task, nodes)) is None:
            return "Running"
        above = set().union(*(carried[need] for need in dag.needs[task]))
        carried[task] = {phase} if phase in COMPLETED else above
    failed = sorted(phase for target in dag.targets for phase in carried[target] & set(FAILED))
    return failed[0] if failed else "Succeeded"
