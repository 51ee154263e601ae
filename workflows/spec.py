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
ARTIFACT_FIELDS = {"name", "path", "gcs", "archive"}
RETRY_FIELDS = {"limit", "retryPolicy", "backoff"}

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


def task_dependencies(task: Mapping[str, Any]) -> list[str]:
    """Task names this task waits for: `dependencies`, or a `depends` made of names joined by &&."""
    if "dependencies" in task:
        return list(task["dependencies"])
    depends = task.get("depends", "").strip()
    if not depends:
        return []
    names = []
    for term in depends.split("&&"):
        term = term.strip().removesuffix(".Succeeded")
        if not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9]*", term):
            raise UnsupportedFeature(
                f"the local runner reads depends as 'a && b', got {depends!r} "
                f"(task {task['name']!r})"
            )
        names.append(term)
    return names


def templates_by_name(workflow: Mapping[str, Any]) -> dict[str, dict]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}


def parse_duration(text: str | int) -> float:
    """Argo durations: '10s', '2m', '1h', or bare seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    if not match:
        raise UnsupportedFeature(f"the local runner cannot read the duration {text!r}")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    return float(match.group(1)) * scale
