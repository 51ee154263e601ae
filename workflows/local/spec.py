"""The part of an Argo Workflow the local runner knows, which is what workflows/pipeline compiles: `read`
checks a compiled Workflow and refuses anything else in one line before anything runs. Fields that only
place or label pods on a cluster are ignored; the container's image, limits and emptyDir volumes are honoured
by the container engines. `{{…}}` tags are substituted here as Argo v4.1.4 substitutes them.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.errors import UnresolvedReference, UnsupportedFeature
from workflows.local.retries import RetryRule, read_rule, whole_number

TAG_START, TAG_END = "{{", "}}"
# util/template (fasttemplate): a tag runs from `{{` to the first `}}`; Argo trims the name inside
TAG = re.compile(r"{{(.*?)}}")

# By where it sits: the fields a run honours, then those it ignores (they only place or label pods).
FIELDS = {
    "spec": "entrypoint templates arguments activeDeadlineSeconds | automountServiceAccountToken executor"
    " metrics podGC podMetadata securityContext serviceAccountName tolerations ttlStrategy workflowMetadata",
    "parameter": "name value description enum",
    "template": "name container dag inputs outputs retryStrategy activeDeadlineSeconds volumes | metadata metrics",
    "container": "image command args workingDir resources volumeMounts securityContext | terminationMessagePolicy",
    "volume": "name emptyDir",
    "volumeMount": "name mountPath",
    "dag": "tasks",
    "task": "name template arguments depends withParam",
    "inputs": "parameters artifacts",
    "outputs": "parameters artifacts",
    "input parameter": "name",
    "output parameter": "name valueFrom",
    "valueFrom": "path",
    "input artifact": "name path gcs optional mode recurseMode",
    "output artifact": "name path gcs archive",
    "gcs": "key",
}


@dataclass(frozen=True)
class Spec:
    """A Workflow the runner can run: its name, templates, the dag it starts, and what a run reads."""

    name: str
    templates: dict[str, dict]
    entry: dict
    globals: dict[str, str]  # workflow.name and workflow.parameters.*
    rules: dict[str, RetryRule | None]  # each template's retry rule
    deadline: float | None  # the workflow's activeDeadlineSeconds
    deadlines: dict[str, float | None]  # each template's activeDeadlineSeconds
    scratch: dict[str, tuple[str, ...]]  # each template's emptyDir mount paths


def read(workflow: Mapping[str, Any]) -> Spec:
    """The Workflow as the runner runs it; UnsupportedFeature naming the first thing it does not know."""
    spec = workflow.get("spec", {})
    check(spec, "spec", "workflow spec")
    for parameter in spec.get("arguments", {}).get("parameters", []):
        check(parameter, "parameter", f"workflow parameter {parameter.get('name')!r}")
    templates = templates_by_name(workflow)
    for template in templates.values():
        check_template(template, f"template {template['name']!r}")
    entry = templates.get(spec["entrypoint"])
    if entry is None or "dag" not in entry:
        raise UnsupportedFeature("the local runner needs a dag template as the entrypoint")
    for task in entry["dag"]["tasks"]:
        if "container" not in templates.get(task["template"], {}):
            raise UnsupportedFeature(f"task {task['name']!r} must name a container template")
    metadata = workflow.get("metadata", {})
    name = metadata.get("name") or metadata.get("generateName", "run-") + "".join(
        random.choices(string.ascii_lowercase + string.digits, k=5)  # as generateName makes it
    )
    values = {
        p["name"]: str(p.get("value", "")) for p in spec.get("arguments", {}).get("parameters", [])
    }
    return Spec(
        name=name,
        templates=templates,
        entry=entry,
        globals={"workflow.name": name}
        | {f"workflow.parameters.{key}": value for key, value in values.items()},
        rules={
            key: read_rule(t.get("retryStrategy"), f"template {key!r}")
            for key, t in templates.items()
        },
        deadline=seconds(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds"),
        deadlines={
            key: seconds(t.get("activeDeadlineSeconds"), f"{key}.activeDeadlineSeconds")
            for key, t in templates.items()
        },
        scratch={
            key: tuple(
                mount["mountPath"]
                for mount in t.get("container", {}).get("volumeMounts", [])
                if mount["name"] in {v["name"] for v in t.get("volumes", []) if "emptyDir" in v}
            )
            for key, t in templates.items()
        },
    )


def seconds(value: Any, where: str) -> float | None:
    """An activeDeadlineSeconds: whole seconds, an int or a string holding one; None when unset."""
    return None if value in (None, "") else float(whole_number(value, where))


def check(fields: Mapping[str, Any], kind: str, where: str) -> None:
    """UnsupportedFeature when `fields` hold anything a `kind` of the compiled Workflow never holds."""
    if unknown := sorted(set(fields) - set(FIELDS[kind].replace("|", "").split())):
        raise UnsupportedFeature(
            f"the local runner does not support {', '.join(unknown)} ({where})"
        )


def check_template(template: Mapping[str, Any], where: str) -> None:
    check(template, "template", where)
    for volume in template.get("volumes", []):
        check(volume, "volume", f"{where}, volume {volume.get('name')!r}")
    if "dag" in template:
        check(template["dag"], "dag", where)
        for task in template["dag"]["tasks"]:
            check(task, "task", f"{where}, task {task.get('name')!r}")
            for parameter in task.get("arguments", {}).get("parameters", []):
                check(parameter, "parameter", f"{where}, task {task['name']!r}")
        return
    if "container" not in template:
        raise UnsupportedFeature(f"the local runner runs container and dag templates ({where})")
    check(template["container"], "container", where)
    for mount in template["container"].get("volumeMounts", []):
        check(mount, "volumeMount", f"{where}, volumeMounts")
    for side in ("inputs", "outputs"):
        section = template.get(side, {})
        check(section, side, f"{where}, {side}")
        kind = side.rstrip("s")  # input or output
        for parameter in section.get("parameters", []):
            check(parameter, f"{kind} parameter", f"{where}, parameter {parameter.get('name')!r}")
            check(parameter.get("valueFrom", {}), "valueFrom", f"{where}, {parameter['name']}")
        for artifact in section.get("artifacts", []):
            named = f"{where}, artifact {artifact.get('name')!r}"
            check(artifact, f"{kind} artifact", named)
            check(artifact.get("gcs", {}), "gcs", f"{named}: a bucket belongs to the store")
            if "gcs" not in artifact or (
                side == "outputs" and artifact.get("archive") != {"none": {}}
            ):
                raise UnsupportedFeature(
                    f"the local runner moves unarchived gcs artifacts (archive: none) only ({named})"
                )


def substitute(value: Any, values: Mapping[str, str], where: str) -> Any:
    """`value` (a string, or lists and maps of them) with each `{{tag}}` replaced by its value, as the
    controller replaces them (workflow/common/util.go:SubstituteParams); a tag without a value is an
    UnresolvedReference naming `where`."""
    if isinstance(value, str):

        def replaced(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name not in values:
                raise UnresolvedReference(f"failed to resolve {{{{{name}}}}} ({where})")
            return values[name]

        return TAG.sub(replaced, value)
    if isinstance(value, list):
        return [substitute(item, values, where) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, values, where) for key, item in value.items()}
    return value


def templates_by_name(workflow: Mapping[str, Any]) -> dict[str, dict]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}
