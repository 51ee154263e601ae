"""How the local engine reads a dag template and decides on its tasks, as Argo v4.1.2's controller does
(controller/dag.go): which tasks each one waits for, whether it runs once they are fulfilled
(evaluateDependsLogic, with workflows/common/depends.py), and the DAG's phase (assessDAGPhase); runner.py
starts what is decided.

The DAG's phase comes from its target tasks (dag.target, or the tasks nothing depends on): a walk from the
root tasks carries each branch's last completed phase down to the nodes below it, so an Omitted or Skipped
target inherits Failed or Error from a failed task above it and Succeeded otherwise (assessDAGPhase). A failed
task elsewhere, or one whose failure its dependents tolerate, does not fail the DAG by itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Any

from workflows.common import depends as dep
from workflows.local.spec_rules import DagGraph, Invalid, sort_tasks

COMPLETED = ("Succeeded", "Failed", "Error")
FAILED = ("Failed", "Error")


class DagError(ValueError):
    """A DAG that cannot run: a cycle, a dependency on a task that does not exist, a task named twice."""


@dataclass(frozen=True)
class TaskOutcome:
    """A task's node as far as it exists: one node, or a fan-out's children."""

    phase: str | None  # None while it runs; Succeeded/Failed/Error/Skipped/Omitted once fulfilled
    children: tuple[str | None, ...] | None = None  # a fan-out's children's phases (None: running)

    @property
    def fulfilled(self) -> bool:
        if self.children:
            return all(child is not None for child in self.children)
        return self.phase is not None

    def results(self) -> dep.TaskResults:
        """What `depends` reads of this task once it is fulfilled."""
        if self.children:
            children = tuple(child or "" for child in self.children)
            return dep.TaskResults(dep.group_phase(children), children)
        return dep.TaskResults(self.phase or "")


@dataclass(frozen=True)
class Dag:
    """The tasks of a dag template, their parsed `depends`, and the targets that decide its phase."""

    tasks: dict[str, Mapping[str, Any]]
    expressions: dict[str, dep.Expression]
    needs: dict[str, set[str]]
    targets: tuple[str, ...]

    def dependents(self, task: str) -> list[str]:
        return sorted(other for other, needs in self.needs.items() if task in needs)

    def order(self) -> list[str]:
        """Tasks in an order where each comes after what it depends on."""
        return list(TopologicalSorter(self.needs).static_order())


def read_dag(template: Mapping[str, Any]) -> Dag:
    """Read a dag template; DagError where Argo's validation would refuse its graph (a duplicated task, an
    unknown dependency, a cycle: spec_rules.sort_tasks) or its `depends` cannot be evaluated."""
    dag = template["dag"]
    task_list = dag.get("tasks", [])
    # the tasks each one waits for, as ancestry.go's GetTaskDependencies reads them
    graph = DagGraph(task_list)
    try:
        sort_tasks(task_list, graph)
    except Invalid as fault:
        raise DagError(str(fault.within(f"templates.{template['name']} sorting failed:"))) from None
    tasks = {task["name"]: task for task in task_list}
    expressions = {name: dep.parse(dep.expression_text(task)) for name, task in tasks.items()}
    needs = {name: set(graph.dependencies(name)) for name in tasks}
    for name, expression in expressions.items():
        if unread := sorted(dep.tasks_named(expression) - needs[name]):
            # e.g. `a_b`: Argo reads the tasks `a` and `b`, and its evaluation fails
            raise DagError(
                f"templates.{template['name']}.tasks.{name} depends names {', '.join(unread)}, "
                "which Argo does not read as task names"
            )
    if dag.get("target"):
        targets = tuple(str(dag["target"]).split())
    else:
        depended_on = set().union(*needs.values()) if needs else set()
        targets = tuple(sorted(set(tasks) - depended_on))
    return Dag(tasks, expressions, needs, targets)


def should_run(dag: Dag, task: str, outcomes: Mapping[str, TaskOutcome]) -> bool | None:
    """None while a dependency is unfulfilled; then whether `depends` holds (evaluateDependsLogic)."""
    needed = dag.needs[task]
    if not all(name in outcomes and outcomes[name].fulfilled for name in needed):
        return None
    results = {name: outcomes[name].results() for name in needed}
    continue_on = {name: dag.tasks[name].get("continueOn") or {} for name in needed}
    return dep.holds(dag.expressions[task], results, continue_on)


def assess(
    dag: Dag, outcomes: Mapping[str, TaskOutcome], fail_fast: bool = True, stopping: bool = False
) -> str:
    """The DAG's phase: Running, Succeeded, Failed or Error (dag.go:assessDAGPhase)."""
    if stopping:
        return "Failed"
    target_phases: dict[str, str] = {target: "" for target in dag.targets}
    roots = [task for task in dag.tasks if not dag.needs[task] and task in outcomes]
    queue = deque((task, "Succeeded") for task in roots)
    seen: set[tuple[str, str]] = set()
    while queue:
        task, incoming = queue.popleft()
        if (task, incoming) in seen:
            continue
        seen.add((task, incoming))
        outcome = outcomes[task]
        if not outcome.fulfilled:
            return "Running"
        if outcome.children:
            branch = outcome.results().phase
            outgoing: Sequence[str] = [child or "" for child in outcome.children]
        else:
            branch = outcome.phase if outcome.phase in COMPLETED else incoming
            outgoing = [branch]
        if task in target_phases and target_phases[task] not in FAILED:
            target_phases[task] = branch
        for dependent in dag.dependents(task):
            if dependent in outcomes:
                queue.extend((dependent, phase) for phase in outgoing)
    result = "Succeeded"
    for target in dag.targets:
        phase = target_phases[target]
        if not phase:
            result = "Running"
            if not fail_fast:
                break
        elif phase in FAILED:
            continue_on = dag.tasks[target].get("continueOn") or {}
            if continue_on.get({"Failed": "failed", "Error": "error"}[phase]):
                continue
            result = phase
            if fail_fast:
                break
    return result
