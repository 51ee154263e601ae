"""What of a compiled Workflow the local runner honours, ignores or refuses.

The rule: a field is honoured when it changes what a step computes or how the run proceeds (the DAG, parameters,
artifacts, retries, deadlines); it is ignored when it only places or labels pods on a cluster (service account,
pod GC, TTL, metrics, node selection, requests); the container's image, limits, security context and emptyDir
volumes are honoured by the container engines and ignored by the process engine. Anything else is refused with
a message naming it, so the local engine and Argo cannot drift apart silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.errors import UnsupportedFeature

SPEC_FIELDS = {"entrypoint", "templates", "arguments", "activeDeadlineSeconds", "volumes"}
SPEC_CLUSTER_ONLY = {
    "serviceAccountName",
    "automountServiceAccountToken",
    "executor",
    "podGC",
    "ttlStrategy",
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
TEMPLATE_FIELDS = {
    "name",
    "container",
    "dag",
    "inputs",
    "outputs",
    "retryStrategy",
    "activeDeadlineSeconds",
    "volumes",
}
TEMPLATE_CLUSTER_ONLY = {
    "metadata",
    "metrics",
    "podSpecPatch",
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "affinity",
    "archiveLocation",
    "securityContext",
    "priorityClassName",
    "synchronization",
}
CONTAINER_FIELDS = {
    "image",
    "command",
    "args",
    "workingDir",
    "env",
    "resources",
    "securityContext",
    "volumeMounts",
}
CONTAINER_CLUSTER_ONLY = {"imagePullPolicy", "name", "terminationMessagePolicy"}
TASK_FIELDS = {
    "name",
    "template",
    "arguments",
    "depends",
    "dependencies",
    "withParam",
    "withItems",
    "continueOn",
}
DAG_FIELDS = {"tasks", "target", "failFast"}
ARTIFACT_FIELDS = {"name", "path", "gcs", "archive", "optional", "mode", "recurseMode"}
RETRY_FIELDS = {"limit", "retryPolicy", "backoff", "expression"}
BACKOFF_FIELDS = {"duration", "factor", "cap", "maxDuration"}


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
    _check_volumes(spec.get("volumes", []), "workflow spec")
    for template in spec.get("templates", []):
        where = f"template {template.get('name')!r}"
        _refuse_unknown(template, TEMPLATE_FIELDS, TEMPLATE_CLUSTER_ONLY, where)
        _check_volumes(template.get("volumes", []), where)
        if "container" in template:
            _check_container(template["container"], where)
        elif "dag" in template:
            _refuse_unknown(template["dag"], DAG_FIELDS, set(), f"{where}, dag")
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
                _check_parameter(parameter, f"{where}, parameter {parameter.get('name')!r}")
        retry = template.get("retryStrategy", {})
        _refuse_unknown(retry, RETRY_FIELDS, {"affinity"}, f"{where}, retryStrategy")
        _refuse_unknown(retry.get("backoff", {}), BACKOFF_FIELDS, set(), f"{where}, backoff")


def _check_container(container: Mapping[str, Any], where: str) -> None:
    _refuse_unknown(container, CONTAINER_FIELDS, CONTAINER_CLUSTER_ONLY, where)
    for variable in container.get("env", []):
        _refuse_unknown(variable, {"name", "value"}, set(), f"{where}, env")
    for mount in container.get("volumeMounts", []):
        _refuse_unknown(mount, {"name", "mountPath"}, set(), f"{where}, volumeMounts")


def _check_volumes(volumes: list, where: str) -> None:
    for volume in volumes:
        _refuse_unknown(
            volume, {"name", "emptyDir"}, set(), f"{where}, volume {volume.get('name')!r}"
        )


def _check_parameter(parameter: Mapping[str, Any], where: str) -> None:
    _refuse_unknown(
        parameter, {"name", "value", "valueFrom", "default", "description", "enum"}, set(), where
    )
    _refuse_unknown(parameter.get("valueFrom", {}), {"path", "default"}, set(), where)


def _check_artifact(artifact: Mapping[str, Any], side: str, where: str) -> None:
    _refuse_unknown(artifact, ARTIFACT_FIELDS, set(), where)
    if "gcs" not in artifact:
        raise UnsupportedFeature(f"the local runner moves key-only gcs artifacts only ({where})")
    _refuse_unknown(artifact["gcs"], {"key"}, set(), f"{where}: a bucket belongs to the store")
    if side == "outputs" and "none" not in artifact.get("archive", {}):
        raise UnsupportedFeature(
            f"the local runner stores artifacts unarchived; set archive: none ({where})"
        )


def templates_by_name(workflow: Mapping[str, Any]) -> dict[str, dict]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}


def emptydir_mounts(workflow: Mapping[str, Any], template: Mapping[str, Any]) -> tuple[str, ...]:
    """Mount paths of the template container's emptyDir volumes (scratch space)."""
    volumes = {
        volume["name"]
        for volume in [*workflow["spec"].get("volumes", []), *template.get("volumes", [])]
        if "emptyDir" in volume
    }
    return tuple(
        mount["mountPath"]
        for mount in template.get("container", {}).get("volumeMounts", [])
        if mount["name"] in volumes
    )
