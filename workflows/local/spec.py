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

# util/template (fasttemplate): a tag runs from `{{` to the first `}}`; Argo trims the name inside
TAG = re.compile(r"{{(.*?)}}")

# By where it sits: the fields a run honours (`field:kind` where it holds a kind of its own, or a list of
# them), then those it ignores (they only place or label pods).
FIELDS = {
    "spec": "entrypoint templates:template arguments:arguments activeDeadlineSeconds | metrics podGC"
    " automountServiceAccountToken executor podMetadata securityContext serviceAccountName tolerations"
    " ttlStrategy workflowMetadata",
    "arguments": "parameters:parameter",
    "parameter": "name value description enum",
    "template": "name container:container dag:dag inputs:inputs outputs:outputs activeDeadlineSeconds"
    " retryStrategy:retryStrategy volumes:volume | metadata metrics",
    "container": "image command args workingDir resources volumeMounts:volumeMount securityContext"
    " | terminationMessagePolicy",
    "volume": "name emptyDir",
    "volumeMount": "name mountPath",
    "dag": "tasks:task",
    "task": "name template arguments:arguments depends withParam",
    "inputs": "parameters:input-parameter artifacts:input-artifact",
    "outputs": "parameters:output-parameter artifacts:output-artifact",
    "input-parameter": "name",
    "output-parameter": "name valueFrom:valueFrom",
    "valueFrom": "path",
    "input-artifact": "name path gcs:gcs optional mode recurseMode",
    "output-artifact": "name path gcs:gcs archive",
    "gcs": "key",
    "retryStrategy": "limit retryPolicy expression backoff:backoff",
    "backoff": "duration factor cap",
}


@dataclass(frozen=True)
class Spec:
    """A Workflow the runner can run: its name, templates, the dag it starts, and what a run reads."""

    name: str
    templates: dict[str, dict]
    entry: dict
    globals: dict[str, str]  # workflow.name and workflow.parameters.*
    rules: dict[str, RetryRule]  # the retry rule of each template that has one
    deadline: float | None  # the workflow's activeDeadlineSeconds
    deadlines: dict[str, float | None]  # each template's activeDeadlineSeconds
    scratch: dict[str, tuple[str, ...]]  # each template's emptyDir mount paths


def read(workflow: Mapping[str, Any]) -> Spec:
    """The Workflow as the runner runs it; UnsupportedFeature naming the first thing it does not know."""
    spec = workflow.get("spec", {})
    check(spec, "spec", "workflow spec")
    templates = templates_by_name(workflow)
    entry = templates.get(spec["entrypoint"], {})
    if "dag" not in entry:
        raise UnsupportedFeature("the local runner needs a dag template as the entrypoint")
    for name, template in templates.items():
        if ("dag" in template) == ("container" in template) or any(
            "container" not in templates.get(t["template"], {}) for t in entry["dag"]["tasks"]
        ):
            raise UnsupportedFeature(
                f"the local runner runs container templates from a dag (template {name!r})"
            )
        for side in ("inputs", "outputs"):
            for artifact in template.get(side, {}).get("artifacts", []):
                if "gcs" not in artifact or (
                    side == "outputs" and artifact.get("archive") != {"none": {}}
                ):
                    raise UnsupportedFeature(
                        "the local runner moves unarchived gcs artifacts (archive: none) only "
                        f"(template {name!r}, artifact {artifact['name']!r})"
                    )
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
        | {f"workflow.parameters.{k}": v for k, v in values.items()},
        rules={
            key: read_rule(t["retryStrategy"], f"template {key!r}, retryStrategy")
            for key, t in templates.items()
            if "retryStrategy" in t
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


def check(value: Any, kind: str, where: str) -> None:
    """UnsupportedFeature when `value` (a `kind`, or a list of them) or what it holds has a field the
    compiled Workflow never has there, naming the closest named thing around it."""
    known = dict(word.partition(":")[::2] for word in FIELDS[kind].replace("|", "").split())
    for item in value if isinstance(value, list) else [value]:
        here = where
        if "name" in item:
            named = f"{kind.replace('-', ' ')} {item['name']!r}"
            here = named if where == "workflow spec" else f"{where}, {named}"
        if unknown := sorted(set(item) - set(known)):
            raise UnsupportedFeature(
                f"the local runner does not support {', '.join(unknown)} ({here})"
            )
        for field, inner in known.items():
            if inner and field in item:
                check(item[field], inner, here)


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
