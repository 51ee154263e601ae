"""The few rules of Argo's validation the local runner applies itself: a DAG's tasks sorted by what they
depend on (util/sorting, as validate.go:validateDAG sorts them) and the workflow parameters' values against
their enums (validate.go:validateArguments). Each raises Invalid in Argo's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.common import depends


class Invalid(Exception):
    """A rule Argo enforces is broken; the message is worded as Argo words it."""

    def within(self, prefix: str, separator: str = " ") -> Invalid:
        return Invalid(f"{prefix}{separator}{self}")


def any_string(value: Any) -> str:
    """wfv1.AnyString: a parameter value written as a string, number or boolean."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _text(value: Any) -> str:
    return "" if value is None else any_string(value)


class DagGraph:
    """A DAG's tasks and what each depends on (workflow/common/ancestry.go)."""

    def __init__(self, tasks: list[Mapping[str, Any]]) -> None:
        self.tasks = {_text(task.get("name")): task for task in tasks}
        self._dependencies: dict[str, dict[str, bool]] = {}

    def task(self, name: str) -> Mapping[str, Any]:
        return self.tasks.get(name, {})

    def dependencies_of(self, task: Mapping[str, Any]) -> dict[str, bool]:
        fields = {
            "depends": _text(task.get("depends")),
            "dependencies": [_text(name) for name in task.get("dependencies") or []],
        }
        return depends.task_dependencies(depends.depends_logic(fields, self.task))

    def dependencies(self, name: str) -> dict[str, bool]:
        if name not in self._dependencies:
            self._dependencies[name] = self.dependencies_of(self.task(name))
        return self._dependencies[name]


def sort_tasks(tasks: list[Mapping[str, Any]], graph: DagGraph) -> list[Mapping[str, Any]]:
    """util/sorting TopologicalSorting: a task named twice, an unknown dependency, a cycle refused."""
    names = [_text(task.get("name")) for task in tasks]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise Invalid(f"duplicated nodeName {name}")
        seen.add(name)
    waiting = {}
    followers: dict[str, list[str]] = {name: [] for name in names}
    for task, name in zip(tasks, names, strict=True):
        dependencies = graph.dependencies_of(task)
        waiting[name] = len(dependencies)
        for dependency in dependencies:
            if dependency not in followers:
                raise Invalid(f"invalid dependency {dependency}")
            followers[dependency].append(name)
    order = [name for name in names if waiting[name] == 0]
    for name in order:  # grows while it is walked
        for follower in followers[name]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                order.append(follower)
    if len(order) < len(names):
        raise Invalid("graph with cycle")
    by_name = dict(zip(names, tasks, strict=True))
    return [by_name[name] for name in order]


def validate_arguments(prefix: str, arguments: Mapping[str, Any], allow_empty_values: bool) -> None:
    """Every parameter has a value, and an enum holds it (validate.go:validateArgumentsValues)."""
    for parameter in arguments.get("parameters") or []:
        name, value = _text(parameter.get("name")), parameter.get("value")
        if value is None and parameter.get("valueFrom") is None and not allow_empty_values:
            raise Invalid(f"{prefix}{name}.value or {prefix}{name}.valueFrom is required")
        if parameter.get("enum") is not None:
            enum = [any_string(choice) for choice in parameter["enum"]]
            if not enum:
                raise Invalid(f"{prefix}{name}.enum should contain at least one value")
            if value is None:
                raise Invalid(f"{prefix}{name}.value is required")
            if any_string(value) not in enum:
                raise Invalid(f"{prefix}{name}.value should be present in {prefix}{name}.enum list")
