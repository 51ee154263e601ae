"""A DAG template as Argo v4.1.2's validation checks it (workflow/validate/validate.go:validateDAG): its
tasks sorted by their dependencies (util/sorting), each task's `depends` read by the rules of
workflow/common/ancestry.go (workflows/lint/argo_common/depends.py), and what each task may refer to: the outputs of
its ancestors, its loop's `item`, the arguments it passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.lint.argo_common import depends, tags
from workflows.lint.fields import (
    Invalid,
    any_string,
    as_list,
    as_map,
    as_str,
    check_names,
    validate_arguments,
)
from workflows.lint.templates import (
    Arguments,
    FakeArguments,
    GivenArguments,
    Holder,
    Opaque,
    go_ordered,
    has_output,
    template_type,
)


class DagGraph:
    """A DAG's tasks and what each depends on, read as validation reads them (workflows/lint/argo_common/depends.py,
    after workflow/common/ancestry.go)."""

    def __init__(self, tasks: list[Mapping[str, Any]]) -> None:
        self.tasks = {as_str(task.get("name")): task for task in tasks}
        self._dependencies: dict[str, dict[str, bool]] = {}

    def task(self, name: str) -> Mapping[str, Any]:
        return self.tasks.get(name, {})

    def depends_logic(self, task: Mapping[str, Any]) -> str:
        """The task's `depends`, or its `dependencies` written as the depends expression they mean."""
        fields = {
            "depends": as_str(task.get("depends")),
            "dependencies": [as_str(name) for name in as_list(task.get("dependencies"))],
        }
        return depends.depends_logic(fields, self.task)

    def dependencies_of(self, task: Mapping[str, Any]) -> dict[str, bool]:
        """Each task named in the expression, and whether it is named by an items-based result."""
        return depends.task_dependencies(self.depends_logic(task))

    def dependencies(self, name: str) -> dict[str, bool]:
        if name not in self._dependencies:
            self._dependencies[name] = self.dependencies_of(self.task(name))
        return self._dependencies[name]

    def ancestry(self, name: str) -> list[str]:
        """Every task `name` depends on, directly or not."""
        found: dict[str, None] = {}

        def visit(current: str) -> None:
            if current in found:
                return
            for dependency in self.dependencies(current):
                visit(dependency)
            if current != name:
                found.setdefault(current, None)

        visit(name)
        return list(found)


def sort_tasks(tasks: list[Mapping[str, Any]], graph: DagGraph) -> list[Mapping[str, Any]]:
    """util/sorting TopologicalSorting, as validateDAG sorts the tasks before anything else."""
    names = [as_str(task.get("name")) for task in tasks]
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


def validate_task_results(task: Mapping[str, Any]) -> None:
    """ancestry.go:ValidateTaskResults: each `task.Result` names a result Argo knows."""
    if invalid := depends.invalid_result(as_str(task.get("depends"))):
        name, result = invalid
        raise Invalid(f"task result '{result}' for task '{name}' is invalid")


def add_items_to_scope(task: Mapping[str, Any], scope: set[str]) -> None:
    """validate.go:addItemsToScope: one loop kind at most, and the `item` references it defines."""
    items, param, sequence = (
        as_list(task.get("withItems")),
        as_str(task.get("withParam")),
        task.get("withSequence"),
    )
    if bool(items) + bool(param) + (sequence is not None) > 1:
        raise Invalid("only one of withItems, withParam, withSequence can be specified")
    if items:
        for item in items:
            if isinstance(item, list):
                scope.update(f"item.[{index}]" for index in range(len(item)))
            elif isinstance(item, Mapping):
                scope.update(f"item.{key}" for key in item)
            elif item is not None:
                scope.add("item")
    elif param:
        scope.update({"item", "item" + tags.ANY_SUFFIX})
    elif sequence is not None:
        sequence = as_map(sequence)
        if sequence.get("count") is not None and sequence.get("end") is not None:
            raise Invalid("only one of count or end can be defined in withSequence")
        scope.add("item")


def check_argument_dependencies(arguments: Any, ancestry: list[str]) -> None:
    """validate.go:validateDAGTaskArgumentDependency: a value taken from a task needs that task upstream."""
    arguments = as_map(arguments)
    for parameter in map(as_map, as_list(arguments.get("parameters"))):
        value = parameter.get("value")
        if value is not None and any_string(value).startswith("{{tasks."):
            task = any_string(value).split(".")[1]
            if task not in ancestry:
                name = as_str(parameter.get("name"))
                raise Invalid(f"missing dependency '{task}' for parameter '{name}'")
    for artifact in map(as_map, as_list(arguments.get("artifacts"))):
        source = as_str(artifact.get("from"))
        if source.startswith("{{tasks."):
            task = source.split(".")[1]
            if task not in ancestry:
                name = as_str(artifact.get("name"))
                raise Invalid(f"missing dependency '{task}' for artifact '{name}'")


def check_dependency_style(name: str, task: Mapping[str, Any], using_depends: bool) -> None:
    """validateDAG: a DAG uses `depends` or `dependencies`, not both, and `depends` without
    `continueOn`; task names that either uses begin with a letter."""
    task_name = as_str(task.get("name"))
    if (using_depends or as_list(task.get("dependencies"))) and task_name[0].isdigit():
        raise Invalid(
            f"templates.{name}.tasks.{task_name} name cannot begin with a digit when using either "
            "'depends' or 'dependencies'"
        )
    if using_depends and as_list(task.get("dependencies")):
        raise Invalid(
            f"templates.{name} cannot use both 'depends' and 'dependencies' in the same "
            "DAG template"
        )
    if using_depends and task.get("continueOn") is not None:
        raise Invalid(
            f"templates.{name} cannot use 'continueOn' when using 'depends'. "
            "Instead use 'dep-task.Failed'/'dep-task.Errored'"
        )


def tasks_in_order(template: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], DagGraph]:
    """A DAG template's tasks in dependency order, their names checked, and their graph."""
    name = as_str(template.get("name"))
    if template.get("activeDeadlineSeconds") is not None:
        raise Invalid(f"templates.{name}.activeDeadlineSeconds is only valid for leaf templates")
    tasks = [as_map(task) for task in as_list(as_map(template.get("dag")).get("tasks"))]
    if not tasks:
        raise Invalid(f"templates.{name} must have at least one task")
    graph = DagGraph(tasks)
    try:
        tasks = sort_tasks(tasks, graph)
    except Invalid as fault:
        raise fault.within(f"templates.{name} sorting failed:") from None
    try:
        check_names(tasks, parameters_or_artifacts=False)
    except Invalid as fault:
        raise fault.within(f"templates.{name}.tasks", "") from None
    return tasks, graph


def check_items_dependencies(name: str, task_name: str, graph: DagGraph) -> None:
    """An items-based condition (`.AnySucceeded`, `.AllFailed`) needs a task that loops."""
    for dependency, items_based in graph.dependencies(task_name).items():
        upstream = graph.task(dependency)
        if items_based and not loops(upstream) and upstream.get("withSequence") is None:
            # Argo names the dependency in both places
            raise Invalid(
                f"templates.{name}.tasks.{dependency} dependency '{dependency}' uses an "
                "items-based condition such as .AnySucceeded or .AllFailed but does not "
                "contain any items"
            )


def loops(task: Mapping[str, Any]) -> bool:
    """A task expanded over withItems or withParam, whose outputs are aggregated."""
    return bool(as_list(task.get("withItems"))) or bool(as_str(task.get("withParam")))


class DagRules:
    """validateDAG's part of a document's validation (workflows/lint/validation.py's Validation): the walk
    over a DAG template's tasks, which checks each task's template and adds what it outputs to the scope."""

    placeholders: tags.Placeholders
    globals: dict[str, str]

    def holder(
        self, holder: Mapping[str, Any], base: Holder, args: Arguments, template_validation: bool
    ) -> Mapping[str, Any] | Opaque | None:
        raise NotImplementedError  # Validation.holder

    def _unresolved(self, scope: set[str], text: str, template_validation: bool) -> str | None:
        raise NotImplementedError  # Validation._unresolved

    def _dag(
        self, scope: set[str], base: Holder, template: Mapping[str, Any], template_validation: bool
    ) -> None:
        name, dag = as_str(template.get("name")), as_map(template.get("dag"))
        tasks, graph = tasks_in_order(template)
        using_depends = any(as_str(task.get("depends")) for task in tasks)
        resolved: dict[str, Mapping[str, Any] | Opaque | None] = {}
        for task in tasks:
            task_name = as_str(task.get("name"))
            where = f"templates.{name}.tasks.{task_name}"
            check_dependency_style(name, task, using_depends)
            try:
                resolved[task_name] = self.holder(
                    task, base, FakeArguments(self.placeholders), template_validation
                )
                self._add_outputs(resolved[task_name], task_name, scope, loops(task))
                validate_task_results(task)
            except Invalid as fault:
                raise fault.within(where) from None
            check_items_dependencies(name, task_name, graph)
        target = as_str(dag.get("target"))
        if unresolved := self._unresolved(scope, target, template_validation):
            raise Invalid(f"templates.{name}.targets {unresolved}")
        for target_name in target.split(" ") if target else ():
            if not tags.is_parameter(target_name) and target_name not in graph.tasks:
                raise Invalid(f"templates.{name}.targets: target '{target_name}' is not defined")
        for task in tasks:
            where = f"templates.{name}.tasks.{as_str(task.get('name'))}"
            self._task_references(where, scope, base, task, graph, resolved, template_validation)

    def _task_references(
        self,
        where: str,
        scope: set[str],
        base: Holder,
        task: Mapping[str, Any],
        graph: DagGraph,
        resolved: Mapping[str, Mapping[str, Any] | Opaque | None],
        template_validation: bool,
    ) -> None:
        """A task's references, in the scope of what its ancestors output, then its template with the
        task's arguments. Adds the task's own outputs to `scope` for the tasks after it."""
        task_name = as_str(task.get("name"))
        if task.get("hooks") is not None:
            scope.add(f"tasks.{task_name}.status")
        self._add_outputs(resolved[task_name], task_name, scope, aggregate=False)
        task_scope = set(scope)
        ancestry = graph.ancestry(task_name)
        for ancestor in ancestry:
            looped = loops(graph.task(ancestor))
            self._add_outputs(resolved[ancestor], ancestor, task_scope, looped, ancestor=True)
        inline_inputs = as_map(as_map(task.get("inline")).get("inputs"))
        for parameter in map(as_map, as_list(inline_inputs.get("parameters"))):
            task_scope.add(f"inputs.parameters.{as_str(parameter.get('name'))}")
        try:
            add_items_to_scope(task, task_scope)
            text = tags.go_json(go_ordered(task, "task"))
            if unresolved := self._unresolved(task_scope, text, template_validation):
                raise Invalid(unresolved)
        except Invalid as fault:
            raise fault.within(where) from None
        validate_arguments(f"{where}.arguments.", as_map(task.get("arguments")), False)
        try:
            check_argument_dependencies(task.get("arguments"), ancestry)
            self.holder(task, base, GivenArguments(task.get("arguments")), template_validation)
        except Invalid as fault:
            raise fault.within(where) from None

    def _add_outputs(
        self,
        template: Mapping[str, Any] | Opaque | None,
        task: str,
        scope: set[str],
        aggregate: bool,
        ancestor: bool = False,
    ) -> None:
        """validate.go:addOutputsToScope: what `tasks.<task>.…` a task defines, and global outputs."""
        ref = f"tasks.{task}"
        scope.update(f"{ref}.{key}" for key in ("id", "startedAt", "finishedAt", "hostNodeName"))
        if template is None:
            return
        if isinstance(template, Opaque):
            scope.add(ref + tags.ANY_SUFFIX)
            return
        if template.get("daemon") is True:
            scope.add(f"{ref}.ip")
        if has_output(template):
            scope.update({f"{ref}.outputs.result", f"{ref}.exitCode"})
        outputs = as_map(template.get("outputs"))
        for group in ("parameters", "artifacts"):
            for output in map(as_map, as_list(outputs.get(group))):
                scope.add(f"{ref}.outputs.{group}.{as_str(output.get('name'))}")
                global_name = as_str(output.get("globalName"))
                if not global_name:
                    continue
                if tags.is_parameter(global_name):
                    scope.add(f"workflow.outputs.{group}" + tags.ANY_SUFFIX)
                else:
                    variable = f"workflow.outputs.{group}.{global_name}"
                    scope.add(variable)
                    self.globals[variable] = self.placeholders.next()
        if aggregate:
            if template_type(template) in ("Script", "ContainerSet"):
                scope.update({f"{ref}.outputs.result", f"{ref}.exitCode"})
            scope.add(f"{ref}.outputs.parameters")
        if ancestor:
            scope.add(f"{ref}.status")
