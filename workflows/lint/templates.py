"""Templates as Argo v4.1.2's validation sees them (workflow/validate/validate.go, pkg/apis wfv1.Template):
their types, where a template is found (the workflow or a WorkflowTemplate), the arguments it is checked
with, and the rules of a leaf template's paths, mounts, containers and timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.lint.argo_common import tags
from workflows.lint.argo_common.numbers import atoi
from workflows.lint.fields import (
    Invalid,
    as_list,
    as_map,
    as_str,
    clean_path_error,
)

# wfv1.Template.GetType, in its order, and the groups Argo puts the types in.
TEMPLATE_TYPES = (
    ("container", "Container"),
    ("containerSet", "ContainerSet"),
    ("steps", "Steps"),
    ("dag", "DAG"),
    ("script", "Script"),
    ("resource", "Resource"),
    ("data", "Data"),
    ("suspend", "Suspend"),
    ("http", "HTTP"),
    ("plugin", "Plugin"),
)
CHECKED_TYPES = {"Container", "DAG"}
LEAF_TYPES = {"Container", "ContainerSet", "Script", "Resource", "Data", "HTTP", "Plugin"}
POD_TYPES = {"Container", "ContainerSet", "Script", "Resource", "Data"}
TYPE_CHOICES = "choose one of: container, containerSet, steps, script, resource, dag, suspend, template, template ref"
# workflow/common/common.go:IsArgoSidecar: the controller's own containers.
RESERVED_CONTAINERS = {"wait", "supervisor"}
RESERVED_CONTAINER_PREFIX = "artifact-plugin-"

# The order Go's encoding/json writes these objects in (wfv1.Template, wfv1.DAGTask, corev1.Container): the
# order Argo meets their `{{…}}` tags in, so the first unresolved one is the one Argo names.
# fmt: off
GO_FIELD_ORDER = {
    "template": (
        "name", "inputs", "outputs", "nodeSelector", "affinity", "metadata", "daemon", "steps",
        "container", "containerSet", "script", "resource", "dag", "suspend", "data", "http",
        "plugin", "volumes", "initContainers", "sidecars", "archiveLocation",
        "activeDeadlineSeconds", "retryStrategy", "parallelism", "failFast", "tolerations",
        "schedulerName", "priorityClassName", "serviceAccountName", "automountServiceAccountToken",
        "executor", "hostAliases", "securityContext", "podSpecPatch", "metrics", "synchronization",
        "memoize", "timeout", "annotations", "pendingTimeout", "podResources", "resourceClaims",
    ),
    "task": (
        "name", "template", "inline", "arguments", "templateRef", "dependencies", "withItems",
        "withParam", "withSequence", "when", "continueOn", "onExit", "depends", "hooks",
    ),
    "container": (
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
        "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices", "livenessProbe",
        "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
        "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
        "tty", "mirrorVolumeMounts", "source",
    ),
}
# fmt: on
# The fields Go writes even when a manifest leaves them out: structs (encoding/json never omits one) and
# strings without `omitempty` (wfv1.DAGTask.Name, corev1.Container.Name, wfv1.ScriptTemplate.Source).
GO_ALWAYS_WRITTEN: dict[str, dict[str, Any]] = {
    "template": {"inputs": {}, "outputs": {}, "metadata": {}},
    "task": {"name": "", "arguments": {}},
    "container": {"name": "", "resources": {}},
}
# The template fields that hold a corev1.Container (one, or a list), and what each adds to it.
CONTAINER_FIELDS: dict[str, dict[str, Any]] = {
    "container": {},
    "script": {"source": ""},
    "initContainers": {},
    "sidecars": {},
}


def go_ordered(value: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """`value` as Go's encoding/json writes it: the fields it always writes, all in Go's order (fields
    Go does not know last, as written); a template's containers too."""
    order = {name: index for index, name in enumerate(GO_FIELD_ORDER[kind])}
    full = {**GO_ALWAYS_WRITTEN[kind], **{k: v for k, v in value.items() if v is not None}}
    ordered = dict(sorted(full.items(), key=lambda item: order.get(item[0], len(order))))
    if kind == "template":
        for field_name, extra in CONTAINER_FIELDS.items():
            held = ordered.get(field_name)
            if isinstance(held, Mapping):
                ordered[field_name] = go_ordered({**extra, **held}, "container")
            elif isinstance(held, list):
                ordered[field_name] = [
                    go_ordered(item, "container") if isinstance(item, Mapping) else item
                    for item in held
                ]
    return ordered


def template_type(template: Mapping[str, Any]) -> str:
    for key, name in TEMPLATE_TYPES:
        if template.get(key) is not None:
            return name
    return "Unknown"


def has_output(template: Mapping[str, Any]) -> bool:
    """wfv1.Template.HasOutput: the template has a `result` (and an exit code) to refer to."""
    kind = template_type(template)
    if kind == "ContainerSet":
        containers = as_list(as_map(template.get("containerSet")).get("containers"))
        return any(as_map(container).get("name") == "main" for container in containers)
    return kind in {"Container", "Script", "Data", "HTTP", "Plugin"}


def is_reserved_container(name: str) -> bool:
    return name in RESERVED_CONTAINERS or name.startswith(RESERVED_CONTAINER_PREFIX)


@dataclass(frozen=True)
class Holder:
    """What templates are looked up in: the workflow being checked, or a referenced WorkflowTemplate."""

    kind: str
    name: str
    spec: Mapping[str, Any]

    def template(self, name: str) -> Mapping[str, Any] | None:
        for template in as_list(self.spec.get("templates")):
            if as_map(template).get("name") == name:
                return as_map(template)
        return None

    def has_default_image(self, field_name: str) -> bool:
        """validateLeaf: an empty image is allowed when templateDefaults supplies one (not for a
        ClusterWorkflowTemplate reached by reference, whose defaults Argo does not consult)."""
        if self.kind == "ClusterWorkflowTemplate":
            return False
        defaults = as_map(self.spec.get("templateDefaults"))
        return bool(as_map(defaults.get(field_name)).get("image"))


class Opaque:
    """A template in a WorkflowTemplate that was not given: whatever it outputs may be referenced."""


OPAQUE = Opaque()


class FakeArguments:
    """validate.go:FakeArguments: every input is supplied, with a value known only at run time."""

    def __init__(self, placeholders: tags.Placeholders) -> None:
        self._placeholders = placeholders

    def parameter(self, name: str) -> Mapping[str, Any]:
        return {"name": name, "value": self._placeholders.next()}

    def artifact(self, name: str) -> Mapping[str, Any]:
        return {"name": name}


class GivenArguments:
    """The arguments a task (or the workflow) actually passes."""

    def __init__(self, arguments: Any) -> None:
        self._arguments = as_map(arguments)

    def _find(self, field_name: str, name: str) -> Mapping[str, Any] | None:
        for item in as_list(self._arguments.get(field_name)):
            if as_map(item).get("name") == name:
                return as_map(item)
        return None

    def parameter(self, name: str) -> Mapping[str, Any] | None:
        return self._find("parameters", name)

    def artifact(self, name: str) -> Mapping[str, Any] | None:
        return self._find("artifacts", name)


Arguments = FakeArguments | GivenArguments


def check_artifact_path(ref: str, artifact: Mapping[str, Any], kind: str) -> None:
    """validateInputs, validateOutputs: a leaf template's artifact path is clean; no other template
    type may give one."""
    if kind in LEAF_TYPES:
        if fault := clean_path_error(artifact):
            raise Invalid(f"error in {ref}: {fault}")
    elif artifact.get("path"):
        raise Invalid(f"{ref}.path only valid in container/script templates")


def add_mount_paths(
    mounted: dict[str, str], name: str, group: str, items: list[Any], path_field: str
) -> None:
    """validateLeaf: no path mounted twice, by volume mounts or input artifacts; `mounted` maps each
    path to what mounts it."""
    for index, item in enumerate(map(as_map, items)):
        path = as_str(item.get(path_field))
        if path in mounted:
            raise Invalid(
                f"templates.{name}.{group}[{index}].{path_field} '{path}' "
                f"already mounted in {mounted[path]}"
            )
        mounted[path] = f"{group}.{as_str(item.get('name'))}"


def output_paths(template: Mapping[str, Any], kind: str) -> set[str]:
    """The `outputs.….path` variables a leaf template's outputs define."""
    if kind not in LEAF_TYPES:
        return set()
    outputs = as_map(template.get("outputs"))
    paths = {
        f"outputs.artifacts.{as_str(artifact.get('name'))}.path"
        for artifact in map(as_map, as_list(outputs.get("artifacts")))
        if artifact.get("path")
    }
    return paths | {
        f"outputs.parameters.{as_str(parameter.get('name'))}.path"
        for parameter in map(as_map, as_list(outputs.get("parameters")))
        if as_map(parameter.get("valueFrom")).get("path")
    }


def check_pod_and_timeouts(
    template: Mapping[str, Any], processed: Mapping[str, Any], processed_kind: str
) -> None:
    """validateTemplate, on the template with its arguments given: resource claims need a pod,
    timeouts a leaf template, and a timeout a duration."""
    if as_list(template.get("resourceClaims")) and processed_kind not in POD_TYPES:
        raise Invalid(
            f"templates.{as_str(template.get('name'))}.resourceClaims is not supported for "
            f"{processed_kind} templates, which do not create a pod"
        )
    if timeout := as_str(processed.get("timeout")):
        if processed_kind not in LEAF_TYPES:
            raise Invalid(f"{processed_kind} template doesn't support timeout field")
        if atoi(timeout) is not None:
            raise Invalid(f"{as_str(processed.get('name'))} has invalid duration format in timeout")
    if as_str(processed.get("pendingTimeout")) and processed_kind not in LEAF_TYPES:
        raise Invalid(f"{processed_kind} template doesn't support pendingTimeout field")
