"""Reading a compiled Workflow: the Argo features the local runner supports, and template expressions.

Anything outside the supported set is refused with a message naming it, so the local engine and Argo
cannot drift apart silently. Fields that only mean something on a cluster are accepted and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SPEC_FIELDS = {"entrypoint", "templates", "arguments"}
SPEC_CLUSTER_ONLY = {
    "serviceAccountName",
    "podGC",
    "ttlStrategy",
    "activeDeadlineSeconds",
    "metrics",
    "podMetadata",
    "workflowMetadata",
    "parallelism",
    "podDisruptionBudget",
    "artifactGC",
    "securityContext",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "archiveLogs",
    "podPriorityClassName",
    "imagePullSecrets",
}
TEMPLATE_FIELDS = {"name", "container", "dag", "inputs", "outputs", "retryStrategy"}
TEMPLATE_CLUSTER_ONLY = {
    "metadata",
    "activeDeadlineSeconds",
    "metrics",
    "podSpecPatch",
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "affinity",
    "timeout",
    "archiveLocation",
    "securityContext",
    "priorityClassName",
    "synchronization",
}
CONTAINER_FIELDS = {"image", "command", "args", "workingDir", "env"}
CONTAINER_CLUSTER_ONLY = {"resources", "imagePullPolicy", "securityContext", "name"}
TASK_FIELDS = {
    "name",
    "template",
    "arguments",
    "depends",
    "dependencies",
    "withParam",
    "continueOn",
}
ARTIFACT_FIELDS = {"name", "path", "gcs", "archive", "optional"}
RETRY_FIELDS = {"limit", "retryPolicy", "backoff", "expression"}
RETRY_TERM = re.compile(r"asInt\(lastRetry\.exitCode\)\s*(==|!=|<=|>=|<|>)\s*(-?\d+)")

EXPRESSION = re.compile(r"{{\s*([^{}]+?)\s*}}")


class UnsupportedFeature(Exception):
    """The compiled spec uses an Argo feature the local runner does not implement."""


class UnresolvedReference(Exception):
    """A {{...}} expression names something that does not exist."""


def _refuse_unknown(
    fields: Mapping[str, Any], supported: set[str], ignored: set[str], where: str
) -> None:
    unknown = sorted(set(fields) - supported - ignored)
    if unknown:
        raise UnsupportedFeature(
            f"the local runner does not support {', '.join(unknown)} ({where})"
        )


def check_supported(workflow: Mapping[str, Any]) -> None:
    """Raise UnsupportedFeature for the first field the local runner cannot honour."""
    spec = workflow.get("spec", {})
    _refuse_unknown(spec, SPEC_FIELDS, SPEC_CLUSTER_ONLY, "workflow spec")
    for template in spec.get("templates", []):
        where = f"template {template.get('name')!r}"
        _refuse_unknown(template, TEMPLATE_FIELDS, TEMPLATE_CLUSTER_ONLY, where)
        if "container" in template:
            _refuse_unknown(template["container"], CONTAINER_FIELDS, CONTAINER_CLUSTER_ONLY, where)
            for variable in template["container"].get("env", []):
                _refuse_unknown(variable, {"name", "value"}, set(), f"{where}, env")
        elif "dag" in template:
            _refuse_unknown(template["dag"], {"tasks"}, set(), f"{where}, dag")
            for task in template["dag"]["tasks"]:
                _refuse_unknown(task, TASK_FIELDS, set(), f"{where}, task {task.get('name')!r}")
                _refuse_unknown(
                    task.get("continueOn", {}),
                    {"failed"},
                    set(),
                    f"{where}, task {task.get('name')!r}, continueOn",
                )
        else:
            raise UnsupportedFeature(f"the local runner runs container and dag templates ({where})")
        for side in ("inputs", "outputs"):
            section = template.get(side, {})
            _refuse_unknown(section, {"parameters", "artifacts"}, set(), f"{where}, {side}")
            for artifact in section.get("artifacts", []):
                _check_artifact(artifact, side, f"{where}, artifact {artifact.get('name')!r}")
            for parameter in section.get("parameters", []):
                _refuse_unknown(
                    parameter,
                    {"name", "value", "valueFrom", "default", "description"},
                    set(),
                    f"{where}, parameter {parameter.get('name')!r}",
                )
                _refuse_unknown(
                    parameter.get("valueFrom", {}),
                    {"path", "default"},
                    set(),
                    f"{where}, parameter {parameter.get('name')!r}",
                )
        _refuse_unknown(
            template.get("retryStrategy", {}), RETRY_FIELDS, {"affinity"}, f"{where}, retryStrategy"
        )


def _check_artifact(artifact: Mapping[str, Any], side: str, where: str) -> None:
    _refuse_unknown(artifact, ARTIFACT_FIELDS, set(), where)
    if "gcs" not in artifact:
        raise UnsupportedFeature(f"the local runner moves key-only gcs artifacts only ({where})")
    _refuse_unknown(artifact["gcs"], {"key"}, set(), f"{where}: a bucket belongs to the store")
    if side == "outputs" and "none" not in artifact.get("archive", {}):
        raise UnsupportedFeature(
            f"the local runner stores artifacts unarchived; set archive: none ({where})"
        )


def substitute(text: str, values: Mapping[str, str], where: str) -> str:
    """Replace every {{name}} in `text` from `values`; an unknown name raises UnresolvedReference."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise UnresolvedReference(f"{{{{{name}}}}} does not resolve ({where})")
        return values[name]

    return EXPRESSION.sub(replace, text)


def substitute_all(value: Any, values: Mapping[str, str], where: str) -> Any:
    """`substitute` applied to every string inside lists and dicts."""
    if isinstance(value, str):
        return substitute(value, values, where)
    if isinstance(value, list):
        return [substitute_all(item, values, where) for item in value]
    if isinstance(value, dict):
        return {key: substitute_all(item, values, where) for key, item in value.items()}
    return value


DEPENDS_TERM = re.compile(
    r"([A-Za-z0-9][-A-Za-z0-9]*)(?:\.(Succeeded|Failed|AnySucceeded|AllFailed))?"
)
Depends = list[list[tuple[str, str]]]
"""A `depends` expression as alternatives (||) of conditions (&&) on tasks: [[(task, condition)]]."""


def parse_depends(task: Mapping[str, Any]) -> Depends:
    """Read `dependencies`, or a `depends` of terms like a, a.Succeeded, a.AnySucceeded, a.AllFailed,
    a.Failed joined by && and || (no parentheses or negation)."""
    if "dependencies" in task:
        return [[(name, "Succeeded") for name in task["dependencies"]]]
    text = task.get("depends", "").strip()
    if not text:
        return [[]]
    alternatives = []
    for alternative in text.split("||"):
        terms = []
        for term in alternative.split("&&"):
            match = DEPENDS_TERM.fullmatch(term.strip())
            if not match:
                raise UnsupportedFeature(
                    f"the local runner reads depends as terms like 'a', 'a.AnySucceeded' joined "
                    f"by && and ||, got {text!r} (task {task['name']!r})"
                )
            terms.append((match.group(1), match.group(2) or "Succeeded"))
        alternatives.append(terms)
    return alternatives


def depends_on(depends: Depends) -> set[str]:
    return {name for alternative in depends for name, _ in alternative}


def depends_holds(depends: Depends, phases: Mapping[str, list[str]]) -> bool:
    """Evaluate `depends` given the final phases of each finished task's nodes."""

    def holds(name: str, condition: str) -> bool:
        states = phases[name]
        return {
            "Succeeded": all(state == "Succeeded" for state in states),
            "Failed": any(state == "Failed" for state in states),
            "AnySucceeded": any(state == "Succeeded" for state in states),
            "AllFailed": bool(states) and all(state == "Failed" for state in states),
        }[condition]

    return any(all(holds(name, condition) for name, condition in terms) for terms in depends)


def templates_by_name(workflow: Mapping[str, Any]) -> dict[str, dict]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}


def parse_duration(text: str | int) -> float:
    """Argo durations: '10s', '2m', '1h', or bare seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    if not match:
        raise UnsupportedFeature(f"the local runner cannot read the duration {text!r}")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    return float(match.group(1)) * scale


def retry_allowed(expression: str | None, exit_code: int | None) -> bool:
    """Evaluate a retryStrategy expression made of `asInt(lastRetry.exitCode) <op> N` terms joined by
    && and ||. No expression allows the retry; an exit code of None (no process ran) reads as -1."""
    if not expression:
        return True
    code = -1 if exit_code is None else exit_code
    compare = {
        "==": code.__eq__,
        "!=": code.__ne__,
        "<": code.__lt__,
        ">": code.__gt__,
        "<=": code.__le__,
        ">=": code.__ge__,
    }
    alternatives = []
    for alternative in expression.split("||"):
        terms = []
        for term in alternative.split("&&"):
            match = RETRY_TERM.fullmatch(term.strip())
            if not match:
                raise UnsupportedFeature(
                    f"the local runner reads retry expressions like "
                    f"'asInt(lastRetry.exitCode) != 2', got {expression!r}"
                )
            terms.append(compare[match.group(1)](int(match.group(2))))
        alternatives.append(all(terms))
    return any(alternatives)
