"""The part of an Argo Workflow the local runner knows, what workflows/pipeline compiles: `read` refuses
anything else in one line before anything runs. `{{…}}` tags are substituted as Argo v4.1.4 does."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from workflows.errors import UnresolvedReference, UnsupportedFeature
from workflows.local.retries import RetryRule, read_rule, whole_number

# util/template (fasttemplate): a tag runs from `{{` to the first `}}`; Argo trims the name inside
TAG = re.compile(r"{{(.*?)}}")
# resource.Quantity's suffixes (k8s.io/apimachinery/pkg/api/resource/suffix.go)
UNITS = {"m": 1e-3, "": 1, "Mi": 2**20, "Gi": 2**30}  # those the templates write
DAG_OF_CONTAINERS = "the local runner runs a dag of container templates only"

# The fields the compiled Workflow holds, by the key they sit under: any other field is refused.
FIELDS = {
    "spec": "entrypoint templates arguments activeDeadlineSeconds metrics podGC executor podMetadata"
    " automountServiceAccountToken securityContext serviceAccountName tolerations ttlStrategy workflowMetadata",
    "templates": "name container dag inputs outputs activeDeadlineSeconds retryStrategy volumes metadata metrics",
    "container": "image command args workingDir resources volumeMounts securityContext terminationMessagePolicy",
    "arguments": "parameters",
    "parameters": "name value description enum valueFrom",
    "valueFrom": "path",
    "volumes": "name emptyDir",
    "volumeMounts": "name mountPath",
    "dag": "tasks",
    "tasks": "name template arguments depends withParam",
    "inputs": "parameters artifacts",
    "outputs": "parameters artifacts",
    "artifacts": "name path gcs optional mode recurseMode archive",
    "gcs": "key",
    "retryStrategy": "limit retryPolicy expression backoff",
    "backoff": "duration factor cap",
}


@dataclass(frozen=True)
class Step:
    """A container template and what a run reads of it."""

    template: dict
    rule: RetryRule | None
    deadline: float | None  # activeDeadlineSeconds
    scratch: tuple[PurePosixPath, ...]  # emptyDir mount paths
    memory: int  # bytes of its memory limit (0: none): a try's share of the machine and its cap
    cpus: float  # its CPU limit (0: none)


@dataclass(frozen=True)
class Spec:
    """A Workflow the runner can run: its name, `{{workflow.*}}` values, dag and container templates."""

    name: str
    globals: dict[str, str]
    entry: dict
    steps: dict[str, Step]
    deadline: float | None  # the workflow's activeDeadlineSeconds


def read(workflow: Mapping[str, Any]) -> Spec:
    """The Workflow as the runner runs it; UnsupportedFeature naming the first thing it does not know."""
    spec = workflow.get("spec", {})
    check(spec, "spec", "")
    templates = templates_by_name(workflow)
    entry = templates.get(spec["entrypoint"], {})
    steps = {name: read_step(name, t) for name, t in templates.items() if t is not entry}
    tasks = entry.get("dag", {}).get("tasks", [])
    if "dag" not in entry or any(t["template"] not in steps for t in tasks):
        raise UnsupportedFeature(DAG_OF_CONTAINERS)
    metadata = workflow.get("metadata", {})
    name = metadata.get("name") or metadata.get("generateName", "run-") + secrets.token_hex(3)[:5]
    arguments = spec.get("arguments", {}).get("parameters", [])
    parameters = {f"workflow.parameters.{p['name']}": str(p.get("value", "")) for p in arguments}
    deadline = seconds(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds")
    return Spec(name, {"workflow.name": name} | parameters, entry, steps, deadline)


def read_step(name: str, template: dict) -> Step:
    """A container template as a run reads it; UnsupportedFeature for anything else."""
    where = f"template {name!r}"
    if "container" not in template:
        raise UnsupportedFeature(f"{DAG_OF_CONTAINERS} ({where})")
    for side in ("inputs", "outputs"):
        for artifact in template.get(side, {}).get("artifacts", []):
            archived = side == "outputs" and artifact.get("archive") != {"none": {}}
            if "gcs" not in artifact or archived:
                raise UnsupportedFeature(
                    "the local runner moves unarchived gcs artifacts (archive: none) only "
                    f"({where}, artifact {artifact['name']!r})"
                )
    empty = {volume["name"] for volume in template.get("volumes", []) if "emptyDir" in volume}
    mounts = template["container"].get("volumeMounts", [])
    strategy = template.get("retryStrategy")
    return Step(
        template=template,
        rule=read_rule(strategy, f"{where}, retryStrategy") if strategy else None,
        deadline=seconds(template.get("activeDeadlineSeconds"), f"{name}.activeDeadlineSeconds"),
        scratch=tuple(PurePosixPath(m["mountPath"]) for m in mounts if m["name"] in empty),
        memory=int(limit(template, "memory")),
        cpus=limit(template, "cpu"),
    )


def limit(template: Mapping[str, Any], resource: str) -> float:
    """A container's `resources.limits` of `resource` as a number (bytes, CPUs); 0 without one."""
    text = str(template["container"].get("resources", {}).get("limits", {}).get(resource, 0))
    if not (match := re.fullmatch(r"(\d+(?:\.\d+)?)(m|[MG]i|)", text)):
        raise UnsupportedFeature(f"the local runner cannot read the quantity {text!r} ({resource})")
    return float(match[1]) * UNITS[match[2]]


def seconds(value: Any, where: str) -> float | None:
    """An activeDeadlineSeconds: whole seconds, an int or a string holding one; None when unset."""
    return None if value in (None, "") else float(whole_number(value, where))


def check(value: Any, kind: str, where: str) -> None:
    """UnsupportedFeature naming the first field `value` (under `kind`, or a list of them) never has."""
    for item in value if isinstance(value, list) else [value]:
        here = f"{where}, {kind.removesuffix('s')} {item['name']!r}" if "name" in item else where
        if unknown := sorted(set(item) - set(FIELDS[kind].split())):
            raise UnsupportedFeature(
                f"the local runner does not support {', '.join(unknown)} ({here[2:] or 'spec'})"
            )
        for field in FIELDS.keys() & item.keys():
            check(item[field], field, here)


def substitute(value: Any, values: Mapping[str, str], where: str) -> Any:
    """`value` with its `{{tag}}`s replaced (common/util.go:SubstituteParams); UnresolvedReference if unknown."""
    if isinstance(value, str):
        if unknown := [name.strip() for name in TAG.findall(value) if name.strip() not in values]:
            raise UnresolvedReference(f"failed to resolve {{{{{unknown[0]}}}}} ({where})")
        return TAG.sub(lambda match: values[match[1].strip()], value)
    if isinstance(value, list):
        return [substitute(item, values, where) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, values, where) for key, item in value.items()}
    return value


def templates_by_name(workflow: Mapping[str, Any]) -> dict[str, dict]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}
