"""The pods Argo v4.1.2's controller makes for a compiled Workflow, as far as Pod Security looks at them.

Written from workflow/controller/workflowpod.go at v4.1.2 (the default, "legacy" pod layout of
workflowpod_layout.go; the init-less layout is opt-in and off unless the controller config enables it):
`build` starts from the volumes `var-run-argo` and `tmp-dir-argo` (emptyDirs) and the template's; sets
hostNetwork from the workflow; `setupServiceAccount` sets the service account, automountServiceAccountToken
(false only when asked) and, with an executor service account, the Secret volume `exec-sa-token` of that
account's token (Argo refuses automountServiceAccountToken false without one); the `wait` container and the
`init` container are `newExecContainer`s, whose securityContext is the controller config's
`executor.securityContext`; `main` is the template's container; `addSchedulingConstraints` gives the pod the
template's securityContext, else the workflow's; `addMetadata` the workflow's podMetadata and the template's
metadata. Input artifacts add the emptyDir `input-artifacts` (addInputArtifactsVolumes). Only container
templates make pods here; a podSpecPatch, which this does not model, is refused.
"""

from __future__ import annotations

import copy
from typing import Any

Manifest = dict[str, Any]
TOKEN_VOLUME = "exec-sa-token"  # common.ServiceAccountTokenVolumeName
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"  # common.ServiceAccountTokenMountPath


class NotModelled(ValueError):
    """The spec uses something of Argo's pod building that this model does not follow."""


def token_secret(account: str) -> str:
    """util/secrets/secret_name.go, TokenName: the Secret Argo mounts for an executor account."""
    return f"{account}.service-account-token"


def exec_container(name: str, executor: Manifest, account: str | None) -> Manifest:
    """newExecContainer: the executor's image, resources, args and securityContext from the controller."""
    container: Manifest = {
        "name": name,
        "image": executor.get("image", "quay.io/argoproj/argoexec:v4.1.2"),
        "command": ["argoexec", name],
        "volumeMounts": [{"name": "var-run-argo", "mountPath": "/var/run/argo"}],
    }
    for field in ("resources", "securityContext", "args"):
        if executor.get(field) is not None:
            container[field] = copy.deepcopy(executor[field])
    if account:
        container["volumeMounts"].append(
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": True}
        )
    return container


def workflow_pods(workflow: Manifest, executor: Manifest) -> list[Manifest]:
    """One pod per container template of the workflow, as the controller would create it."""
    spec = workflow["spec"]
    if "podSpecPatch" in spec:
        raise NotModelled("spec.podSpecPatch")
    return [
        template_pod(spec, template, executor)
        for template in spec["templates"]
        if "container" in template
    ]


def template_pod(spec: Manifest, template: Manifest, executor: Manifest) -> Manifest:
    if "podSpecPatch" in template:
        raise NotModelled(f"templates[{template['name']}].podSpecPatch")
    account = (template.get("executor") or spec.get("executor") or {}).get("serviceAccountName")
    automount = template.get(
        "automountServiceAccountToken", spec.get("automountServiceAccountToken")
    )
    volumes = [
        {"name": "var-run-argo", "emptyDir": {}},
        {"name": "tmp-dir-argo", "emptyDir": {}},
        *copy.deepcopy(template.get("volumes") or []),
    ]
    pod_spec: Manifest = {"restartPolicy": "Never", "volumes": volumes}
    if spec.get("hostNetwork") is not None:
        pod_spec["hostNetwork"] = spec["hostNetwork"]
    name = template.get("serviceAccountName") or spec.get("serviceAccountName")
    if name:
        pod_spec["serviceAccountName"] = name
    if automount is False:
        pod_spec["automountServiceAccountToken"] = False
    if account:
        volumes.append({"name": TOKEN_VOLUME, "secret": {"secretName": token_secret(account)}})
    elif automount is False:
        raise ValueError(
            "executor.serviceAccountName must not be empty if automountServiceAccountToken is false"
        )
    main = copy.deepcopy(template["container"])
    main["name"] = "main"
    main.setdefault("volumeMounts", []).append(
        {"name": "var-run-argo", "mountPath": "/var/run/argo"}
    )
    wait = exec_container("wait", executor, account)
    wait["volumeMounts"].append({"name": "tmp-dir-argo", "mountPath": "/tmp", "subPath": "0"})
    pod_spec["containers"] = [wait, main]
    pod_spec["initContainers"] = [exec_container("init", executor, account)]
    if (template.get("inputs") or {}).get("artifacts"):
        volumes.append({"name": "input-artifacts", "emptyDir": {}})
    context = template.get("securityContext") or spec.get("securityContext")
    if context is not None:
        pod_spec["securityContext"] = copy.deepcopy(context)
    for field in ("nodeSelector", "tolerations", "affinity"):
        value = template.get(field) or spec.get(field)
        if value:
            pod_spec[field] = copy.deepcopy(value)
    metadata = spec.get("podMetadata") or {}
    own = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": template["name"],
            "labels": {**(metadata.get("labels") or {}), **(own.get("labels") or {})},
            "annotations": {
                **(metadata.get("annotations") or {}),
                **(own.get("annotations") or {}),
            },
        },
        "spec": pod_spec,
    }
