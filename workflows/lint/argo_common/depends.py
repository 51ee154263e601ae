"""A DAG task's `depends` as Argo v4.1.2 reads and evaluates it: the one home of workflow/common/ancestry.go,
which Argo's validation (validate.go:validateDAG) and its controller (controller/dag.go) both call.

Argo turns `dependencies: [a, b]` into `a && b` and a bare task name `a` into
`(a.Succeeded || a.Skipped || a.Daemoned)`, widened by the task's `continueOn` (ancestry.go:expandDependency,
documented in enhanced-depends-logic.md). Validation finds the tasks an expression names with a regular
expression (GetTaskDependencies) and checks each `task.Result` (ValidateTaskResults); the controller evaluates
the expression once every task it names is fulfilled, with one set of results per task
(controller/dag.go:evaluateDependsLogic). `.AnySucceeded` and `.AllFailed` read a fan-out's children: any child
Succeeded; every child exactly Failed (an Error child makes AllFailed false).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.lint.argo_common.tokens import KEYWORDS, scan

RESULTS = ("Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned")
GROUP_RESULTS = ("AnySucceeded", "AllFailed")
BARE_NAME_RESULTS = ("Succeeded", "Skipped", "Daemoned")  # what a bare task name accepts
# ancestry.go: taskNameRegex (a `task.Result` term, or a bare task name) and taskResultRegex.
TASK_NAME_RE = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)")
TASK_RESULT_RE = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)")
TOKEN = re.compile(
    r"\s*(?:(?P<op>&&|\|\||!|\(|\))|(?P<word>and|or|not)\b|"
    r"(?P<name>[A-Za-z0-9][-A-Za-z0-9_]*?)(?:\.(?P<result>[A-Z][A-Za-z]+))?(?=[\s()&|!]|$))"
)


class DependsError(ValueError):
    """A `depends` expression that cannot be read."""


@dataclass(frozen=True)
class Term:
    task: str
    result: str | None  # None: the bare name, (Succeeded || Skipped || Daemoned)


@dataclass(frozen=True)
class Not:
    operand: Expression


@dataclass(frozen=True)
class All:
    operands: tuple[Expression, ...]


@dataclass(frozen=True)
class Any_:
    operands: tuple[Expression, ...]


Expression = Term | Not | All | Any_ | None


def expression_text(task: Mapping[str, Any]) -> str:
    """The task's depends logic as Argo forms it: `depends`, or `dependencies` joined by &&."""
    if task.get("depends"):
        return str(task["depends"])
    return " && ".join(task.get("dependencies") or [])


def accepted_results(continue_on: Mapping[str, Any] | None) -> list[str]:
    """ancestry.go:expandDependency: the results a bare task name accepts, Succeeded, Skipped and Daemoned,
    then Errored for `continueOn.error` and Failed for `continueOn.failed`."""
    tolerated = continue_on if isinstance(continue_on, Mapping) else {}
    return [
        *BARE_NAME_RESULTS,
        *["Errored"] * (tolerated.get("error") is True),
        *["Failed"] * (tolerated.get("failed") is True),
    ]


def expand_dependency(name: str, continue_on: Mapping[str, Any] | None) -> str:
    """ancestry.go:expandDependency: `(a.Succeeded || a.Skipped || a.Daemoned …)` for a bare name `a`."""
    return "(" + " || ".join(f"{name}.{result}" for result in accepted_results(continue_on)) + ")"


def depends_logic(task: Mapping[str, Any], task_named: Callable[[str], Mapping[str, Any]]) -> str:
    """ancestry.go:getTaskDependsLogic: the task's `depends`, or its `dependencies` each expanded (with the
    `continueOn` of the task it names, looked up by `task_named`) and joined by &&."""
    if depends := task.get("depends"):
        return str(depends)
    return " && ".join(
        expand_dependency(name, task_named(name).get("continueOn"))
        for name in task.get("dependencies") or []
    )


def task_dependencies(logic: str) -> dict[str, bool]:
    """ancestry.go:GetTaskDependencies, as validation reads a depends text: each task it names, and whether
    it is named by an items-based result (.AnySucceeded, .AllFailed), which takes precedence."""
    dependencies: dict[str, bool] = {}
    for match in TASK_NAME_RE.finditer(logic):
        if match.group(1):
            name, result = match.group(1).split(".")
            if result in GROUP_RESULTS:
                dependencies[name] = True
            else:
                dependencies.setdefault(name, False)
        else:
            dependencies[match.group(2)] = False
    return dependencies


def invalid_result(depends: str) -> tuple[str, str] | None:
    """ancestry.go:ValidateTaskResults: the first (task, result) in `depends` naming no result Argo knows."""
    for match in TASK_RESULT_RE.finditer(depends):
        name, result = match.group(1).split(".")
        if result not in RESULTS + GROUP_RESULTS:
            return name, result
    return None


def parse(text: str) -> Expression:
    """Parse `a && (b.Failed || !c.Succeeded)`; None for an empty expression."""
    tokens = _tokens(text)
    if not tokens:
        return None
    expression, rest = _parse_or(tokens, text)
    if rest:
        raise DependsError(f"unexpected {rest[0][1]!r} in depends {text!r}")
    return expression


def _tokens(text: str) -> list[tuple[str, str]]:
    try:
        matches = list(scan(TOKEN, text))
    except ValueError as error:
        raise DependsError(f"cannot read depends {text!r} at {error.args[0]!r}") from None
    tokens = []
    for match in matches:
        if match.group("op") or match.group("word"):
            tokens.append(("op", match.group("op") or KEYWORDS[match.group("word")]))
            continue
        result = match.group("result")
        if result is not None and result not in RESULTS + GROUP_RESULTS:
            raise DependsError(f"unknown task result {result!r} in depends {text!r}")
        tokens.append(("term", match.group(0).strip()))
    return tokens


def _parse_joined(tokens: list, text: str, operator: str, operand: Any, node: type) -> tuple:
    """Operands joined by `operator` (each read by `operand`), as one `node`; one operand alone as is."""
    first, tokens = operand(tokens, text)
    operands = [first]
    while tokens and tokens[0] == ("op", operator):
        following, tokens = operand(tokens[1:], text)
        operands.append(following)
    return (operands[0] if len(operands) == 1 else node(tuple(operands))), tokens


def _parse_or(tokens: list, text: str) -> tuple[Expression, list]:
    return _parse_joined(tokens, text, "||", _parse_and, Any_)


def _parse_and(tokens: list, text: str) -> tuple[Expression, list]:
    return _parse_joined(tokens, text, "&&", _parse_unary, All)


def _parse_unary(tokens: list, text: str) -> tuple[Expression, list]:
    if not tokens:
        raise DependsError(f"depends {text!r} ends too early")
    kind, value = tokens[0]
    if (kind, value) == ("op", "!"):
        operand, rest = _parse_unary(tokens[1:], text)
        return Not(operand), rest
    if (kind, value) == ("op", "("):
        operand, rest = _parse_or(tokens[1:], text)
        if not rest or rest[0] != ("op", ")"):
            raise DependsError(f"unbalanced parentheses in depends {text!r}")
        return operand, rest[1:]
    if kind == "term":
        name, _, result = value.partition(".")
        return Term(name, result or None), tokens[1:]
    raise DependsError(f"unexpected {value!r} in depends {text!r}")


def tasks_named(expression: Expression) -> set[str]:
    """Every task the expression depends on."""
    if expression is None:
        return set()
    if isinstance(expression, Term):
        return {expression.task}
    if isinstance(expression, Not):
        return tasks_named(expression.operand)
    return set().union(*(tasks_named(operand) for operand in expression.operands))


@dataclass(frozen=True)
class TaskResults:
    """What `depends` can ask of a fulfilled task (dag.go: TaskResults)."""

    phase: str  # Succeeded, Failed, Error, Skipped or Omitted
    children: tuple[str, ...] | None = (
        None  # phases of a fan-out's children; None for a single node
    )

    def result(self, name: str) -> bool:
        children = self.children or ()
        return {
            "Succeeded": self.phase == "Succeeded",
            "Failed": self.phase == "Failed",
            "Errored": self.phase == "Error",
            "Skipped": self.phase == "Skipped",
            "Omitted": self.phase == "Omitted",
            "Daemoned": False,  # the pipeline has no daemon steps
            "AnySucceeded": any(phase == "Succeeded" for phase in children),
            "AllFailed": bool(children) and all(phase == "Failed" for phase in children),
        }[name]


def holds(
    expression: Expression,
    results: Mapping[str, TaskResults],
    continue_on: Mapping[str, Mapping[str, bool]] | None = None,
) -> bool:
    """Evaluate `expression` against the results of the tasks it names (all fulfilled).

    A bare name also accepts Failed or Errored when that task has `continueOn` for it
    (ancestry.go:expandDependency; only `dependencies` may be combined with continueOn).
    """
    if expression is None:
        return True
    if isinstance(expression, Term):
        task = results[expression.task]
        if expression.result is not None:
            return task.result(expression.result)
        tolerated = (continue_on or {}).get(expression.task)
        return any(task.result(name) for name in accepted_results(tolerated))
    if isinstance(expression, Not):
        return not holds(expression.operand, results, continue_on)
    operands = (holds(operand, results, continue_on) for operand in expression.operands)
    return all(operands) if isinstance(expression, All) else any(operands)


def group_phase(children: Sequence[str]) -> str:
    """A fan-out's phase once every child is fulfilled: Succeeded, or the phase of the last child that
    Failed or Errored (dag.go:executeDAGTask, completableTaskGroupPhase)."""
    phase = "Succeeded"
    for child in children:
        if child in ("Failed", "Error"):
            phase = child
    return phase
