"""Rights as the real API server grants them, and each escape a submitter tries, refused by the rule named."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import urllib3  # noqa: F401  (its warning is filtered by name)
from hera.workflows import models as m

from tests.support.cluster import Cluster, ClusterError, wait_until
from tests.support.project import ROOT
from tests.support.rights import Rights, beyond, documented, parse_can_i
from workflows.pipeline import resources as names

# The Argo Server's certificate is self-signed; ARGO_INSECURE_SKIP_VERIFY accepts it on purpose.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]

NAMESPACE = names.NAMESPACE
SUBMITTER = f"system:serviceaccount:{NAMESPACE}:{names.SUBMITTER_ACCOUNT}"
CONTROLLER = "system:serviceaccount:argo:argo"  # Argo's install manifest: the controller's account
NOBODY = f"system:serviceaccount:{NAMESPACE}:rights-test-nobody"  # no such account: no role at all
TEST_LABEL = "mnist-argo/rights-test"  # on everything these tests create, which they remove
TOKEN_SECRET = f"{names.EXECUTOR_ACCOUNT}.service-account-token"
OTHER_SECRET = "rights-test-secret"
WORKFLOW_POLICY = (
    "ValidatingAdmissionPolicy 'mnist-workflows' with binding 'mnist-workflows' denied"
)
POD_POLICY = "ValidatingAdmissionPolicy 'mnist-pods' with binding 'mnist-pods' denied"
RESTRICTED = 'violates PodSecurity "restricted:latest"'
# The API server's own refusal where it runs with --allow-privileged=false, before any admission plugin.
PRIVILEGED_OFF = "securityContext.privileged: Forbidden: disallowed by cluster policy"
Manifest = dict[str, Any]
Change = Callable[[Manifest], Any] | dict[str, Any]
TABLE = documented(ROOT / "docs" / "gke.md")


def can_i(cluster: Cluster, user: str, namespace: str) -> Rights:
    return parse_can_i(
        cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    )


def test_the_table_of_rights_names_every_account_the_project_makes() -> None:
    made = ("mnist-submitter", "mnist-pipeline", "mnist-executor", "mnist-page")
    expected = {f"{NAMESPACE}/{name}" for name in made} | {"argo/argo-server"}
    assert {account for account, _ in TABLE} == expected


@pytest.mark.parametrize(("account", "namespace"), sorted(TABLE), ids="{0[0]}@{0[1]}".format)
def test_each_account_may_do_what_the_docs_say_and_no_more(
    cluster: Cluster, account: str, namespace: str
) -> None:
    user = "system:serviceaccount:" + account.replace("/", ":")
    granted = beyond(can_i(cluster, user, namespace), can_i(cluster, NOBODY, namespace))
    assert granted == TABLE[(account, namespace)]


def test_the_submitter_cannot_read_a_secret(cluster: Cluster) -> None:
    for namespace in (NAMESPACE, "argo", "kube-system"):
        done = cluster.kubectl("get", "secrets", "-n", namespace, f"--as={SUBMITTER}", check=False)
        assert done.returncode != 0 and 'cannot list resource "secrets"' in done.stderr


def submit(cluster: Cluster, route: str, workflow: Manifest, namespace: str = NAMESPACE) -> Any:
    """(name, "") or (None, refusal): POSTed to the Argo Server with the submitter's token, or `--as` it."""
    if route == "argo-server":
        token = cluster.env["ARGO_TOKEN"]
        answer = requests.post(
            f"{cluster.env['ARGO_SERVER']}/api/v1/workflows/{namespace}",
            json={"namespace": namespace, "workflow": workflow},
            headers={"Authorization": token if token.startswith("Bearer ") else f"Bearer {token}"},
            verify=cluster.env.get("ARGO_INSECURE_SKIP_VERIFY") != "true",
            timeout=60,
        )
        if not answer.ok:
            return None, f"{answer.status_code} {answer.text}"
        return answer.json()["metadata"]["name"], ""
    done = cluster.kubectl(
        "create", "-n", namespace, f"--as={SUBMITTER}", "-o", "name", "-f", "-",
        input=json.dumps(workflow), check=False,
    )  # fmt: skip
    return (done.stdout.strip().split("/")[-1], "") if done.returncode == 0 else (None, done.stderr)


def dumped(model: Any) -> Manifest:
    """A Hera model as the JSON the cluster reads."""
    return dict(model.model_dump(by_alias=True, exclude_none=True))


WORKFLOW_KIND = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"}
SMALL = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "250m", "memory": "128Mi"}}


def allowed_workflow(image: str) -> Manifest:
    """The smallest workflow the trust model lets through: the project's pod fields, one short step."""
    fields = names.workflow_pod_fields()
    spec = dumped(m.WorkflowSpec(entrypoint="main", active_deadline_seconds=300, **fields))
    container = {"image": image, "command": ["python", "-c", "print('ok')"], "resources": SMALL}
    container["securityContext"] = dumped(names.container_security_context())
    spec["templates"] = [{"name": "main", "container": container}]
    metadata = {"generateName": "rights-test-", "labels": {TEST_LABEL: "true"}}
    return WORKFLOW_KIND | {"metadata": metadata, "spec": spec}


def changed(manifest: Manifest, change: Change) -> Manifest:
    """MANIFEST changed by a function, or by {"start.key...": value} (`key+`: appended to; None: removed);
    a path starts at a key of MANIFEST, at the workflow's one `template` or `container`, or a pod's `main`."""
    if callable(change):
        change(manifest)
        return manifest
    for path, value in change.items():
        first, *middle, last = path.split(".")
        if first == "main":
            target = next(c for c in manifest["spec"]["containers"] if c["name"] == "main")
        elif first in ("template", "container"):
            target = manifest["spec"]["templates"][0]
            target = target["container"] if first == "container" else target
        else:
            target = manifest[first]
        for key in middle:
            target = target.setdefault(key, {})
        if last.endswith("+"):
            target.setdefault(last[:-1], []).append(value)
        elif value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return manifest


def spec_hidden_in_status(workflow: Manifest) -> None:
    """A spec for the controller to run from status (Argo's CRDs have no status subresource)."""
    hidden = copy.deepcopy(workflow["spec"])
    hidden["podSpecPatch"] = json.dumps({"hostNetwork": True})
    workflow["status"] = {"storedWorkflowTemplateSpec": hidden}


PATCH = json.dumps({"containers": [{"name": "main", "securityContext": {"privileged": True}}]})
SECRET_ENV = {"name": "T", "valueFrom": {"secretKeyRef": {"name": TOKEN_SECRET, "key": "token"}}}
TOO_MUCH = {"cpu": "64", "memory": "1Ti"}
TOKEN_VOLUME = {"name": "t", "secret": {"secretName": TOKEN_SECRET}}
TOKEN_MOUNT = {"name": "t", "mountPath": "/token"}
OTHER_VOLUME = {"name": "o", "secret": {"secretName": OTHER_SECRET}}
ARGOS_TOKEN_MOUNT = {"name": "exec-sa-token", "mountPath": "/token"}
TOLERATE_ALL = {"operator": "Exists"}
NODE_CRITICAL, CLUSTER_CRITICAL = "system-node-critical", "system-cluster-critical"
# An S3 output keyed by a Secret, which Argo mounts into `wait` (workflowpod.go, createSecretVolumesAndMounts).
S3_KEY = {"name": OTHER_SECRET, "key": "key"}
S3 = {"endpoint": "10.77.0.1:9", "bucket": "b", "key": "k", "insecure": True}
S3 |= {"accessKeySecret": S3_KEY, "secretKeySecret": S3_KEY}
S3_OUTPUT = {"artifacts": [{"name": "out", "path": "/tmp/out", "s3": S3}]}
EXECUTOR = names.EXECUTOR_ACCOUNT
AS_THE_PAGE = {"serviceAccountName": "mnist-page"}
PRIVILEGED = dumped(names.container_security_context()) | {"privileged": True}
PRIVILEGED["allowPrivilegeEscalation"] = True
AUTOMOUNT = "automountServiceAccountToken"
# Refused at submission by the workflow policy: (change, the refusal says); tried both ways.
AT_SUBMISSION: dict[str, tuple[Change, str]] = {
    "pod-spec-patch": ({"spec.podSpecPatch": PATCH}, "podSpecPatch"),
    "template-pod-spec-patch": ({"template.podSpecPatch": PATCH}, "podSpecPatch"),
    "executor-token-volume": (
        {"template.volumes+": TOKEN_VOLUME, "container.volumeMounts+": TOKEN_MOUNT},
        "emptyDir",
    ),
    "as-the-executor": ({"template.serviceAccountName": EXECUTOR}, "serviceAccountName"),
    "automount-token": ({f"spec.{AUTOMOUNT}": True}, AUTOMOUNT),
    "another-executor": ({"spec.executor": AS_THE_PAGE}, "executor.serviceAccountName"),
    "spec-hidden-in-status": (spec_hidden_in_status, "podSpecPatch"),
}
# Refused when the controller makes the pod: (change, refused by, says); "": by --allow-privileged=false or PSA.
AT_THE_POD: dict[str, tuple[Change, str, str]] = {
    "host-network": ({"spec.hostNetwork": True}, RESTRICTED, "hostNetwork=true"),
    "privileged-container": ({"container.securityContext": PRIVILEGED}, "", "privileged"),
    "token-in-environment": ({"container.env+": SECRET_ENV}, POD_POLICY, "Secret"),
    "secret-as-artifact-credential": ({"template.outputs": S3_OUTPUT}, POD_POLICY, "volumes"),
    "system-pool-toleration": ({"template.tolerations+": TOLERATE_ALL}, POD_POLICY, "tolerations"),
    "critical-priority": ({"template.priorityClassName": NODE_CRITICAL}, POD_POLICY, "priority"),
    "oversized": (
        {"container.resources": {"requests": TOO_MUCH, "limits": TOO_MUCH}},
        "maximum cpu usage per Container is 2",
        "maximum memory usage per Container is 4Gi",
    ),
}
ROUTES = ("api-server", "argo-server")


@pytest.fixture(scope="module")
def other_secret(cluster: Cluster) -> Iterator[str]:
    """A Secret of the namespace that is not the executor's token, for a workflow to try to read."""
    cluster.kubectl(
        "create", "secret", "generic", OTHER_SECRET, "-n", NAMESPACE, "--from-literal=key=value"
    )
    cluster.kubectl("label", "secret", OTHER_SECRET, "-n", NAMESPACE, f"{TEST_LABEL}=true")
    yield OTHER_SECRET
    cluster.kubectl("delete", "secret", OTHER_SECRET, "-n", NAMESPACE, "--ignore-not-found")


def node_refusal(cluster: Cluster, name: str) -> str:
    """The message of the workflow's failed pod node once the controller gave up creating its pod."""

    def failed() -> str:
        status = cluster.workflow(name).get("status", {})
        messages = [node.get("message", "") for node in status.get("nodes", {}).values()]
        messages.append(status.get("message", ""))
        if status.get("phase") in ("Failed", "Error") or any("forbidden" in m for m in messages):
            return "\n".join(m for m in messages if m) or status.get("phase", "")
        return "the workflow Succeeded" if status.get("phase") == "Succeeded" else ""

    return wait_until(f"workflow {name} to fail", failed, timeout=120)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("attempt", sorted(AT_SUBMISSION))
def test_the_workflow_policy_refuses_an_escape(cluster: Cluster, attempt: str, route: str) -> None:
    change, says = AT_SUBMISSION[attempt]
    workflow = changed(allowed_workflow(cluster.env["STEPS_IMAGE"]), change)
    name, refusal = submit(cluster, route, workflow)
    if name:
        cluster.kubectl("delete", "workflow", name, "-n", NAMESPACE, "--wait=false")
    assert name is None, f"{attempt}: {route} admitted the workflow {name}"
    assert WORKFLOW_POLICY in refusal and says in refusal, refusal


@pytest.mark.parametrize("attempt", sorted(AT_THE_POD))
def test_the_pod_of_an_escape_is_refused(cluster: Cluster, other_secret: str, attempt: str) -> None:
    change, refused_by, says = AT_THE_POD[attempt]
    workflow = changed(allowed_workflow(cluster.env["STEPS_IMAGE"]), change)
    name, refusal = submit(cluster, "argo-server", workflow)
    assert name, f"{attempt}: refused at submission, not by the pod: {refusal}"
    try:
        refusal = node_refusal(cluster, name)
    finally:
        cluster.kubectl("delete", "workflow", name, "-n", NAMESPACE, "--wait=false")
    refused_by = refused_by or (RESTRICTED if RESTRICTED in refusal else PRIVILEGED_OFF)
    assert refused_by in refusal and says in refusal, refusal


@pytest.mark.parametrize("route", ROUTES)
def test_the_submitter_cannot_submit_into_another_namespace(cluster: Cluster, route: str) -> None:
    workflow = allowed_workflow(cluster.env["STEPS_IMAGE"])
    for namespace in ("argo", "kube-system"):
        name, refusal = submit(cluster, route, workflow, namespace)
        assert name is None and "forbidden" in refusal.lower(), refusal


def test_a_workflow_template_is_held_to_the_same_rules(cluster: Cluster) -> None:
    template = changed(allowed_workflow(cluster.env["STEPS_IMAGE"]), {"spec.podSpecPatch": PATCH})
    template.update(
        kind="WorkflowTemplate", metadata={"name": f"rights-test-{uuid.uuid4().hex[:6]}"}
    )
    name, refusal = submit(cluster, "api-server", template)
    if name:
        cluster.kubectl("delete", "workflowtemplate", name, "-n", NAMESPACE)
    assert WORKFLOW_POLICY in refusal and "podSpecPatch" in refusal, refusal


@pytest.fixture(scope="module")
def allowed_pod(cluster: Cluster) -> Iterator[Manifest]:
    """The pod Argo's controller built for the allowed workflow, run to the end: the pod policy's start."""
    name, refusal = submit(cluster, "argo-server", allowed_workflow(cluster.env["STEPS_IMAGE"]))
    assert name, refusal
    try:
        status = cluster.finished(name, timeout=180)["status"]
        assert status["phase"] == "Succeeded", status
        (pod,) = cluster.pods(name)
        yield pod
    finally:
        cluster.kubectl("delete", "workflow", name, "-n", NAMESPACE, "--wait=false")


def test_the_allowed_workflow_ran_and_its_step_holds_no_token(allowed_pod: Manifest) -> None:
    """Only Argo's init and wait containers mount the executor's token (Argo's docs/security.md)."""
    spec = allowed_pod["spec"]
    assert spec["serviceAccountName"] == names.SERVICE_ACCOUNT
    assert spec["automountServiceAccountToken"] is False
    (token,) = [volume for volume in spec["volumes"] if volume["name"] == "exec-sa-token"]
    assert token["secret"]["secretName"] == TOKEN_SECRET
    for container in spec["containers"] + spec["initContainers"]:
        mounts = {mount["name"] for mount in container.get("volumeMounts", [])}
        assert ("exec-sa-token" in mounts) == (container["name"] != "main"), container["name"]


def controller_creates(cluster: Cluster, pod: Manifest, change: Change | None = None) -> Any:
    """POD, changed, created as the controller in a server-side dry run: the stored pod, or the refusal."""
    fresh = copy.deepcopy(pod)
    fresh.pop("status", None)
    fresh["spec"].pop("nodeName", None)
    fresh["metadata"] = {
        "generateName": "rights-test-",
        "namespace": NAMESPACE,
        "labels": pod["metadata"]["labels"],
        "annotations": pod["metadata"].get("annotations", {}),
    }
    done = cluster.kubectl(
        "create", "--dry-run=server", f"--as={CONTROLLER}", "-o", "json", "-f", "-",
        input=json.dumps(changed(fresh, change or {})), check=False,
    )  # fmt: skip
    return json.loads(done.stdout) if done.returncode == 0 else done.stderr


# One case for each rule of the pod policy: (change, the refusal says).
POD_CASES: dict[str, tuple[Change, str]] = {
    "as-the-executor": ({"spec.serviceAccountName": EXECUTOR}, "serviceAccountName"),
    "token-automounted": ({f"spec.{AUTOMOUNT}": None}, AUTOMOUNT),
    "other-secret-volume": ({"spec.volumes+": OTHER_VOLUME}, "volumes"),
    "token-mounted-in-main": ({"main.volumeMounts+": ARGOS_TOKEN_MOUNT}, "exec-sa-token"),
    "secret-in-env": ({"main.env+": SECRET_ENV}, "Secret"),
    "secret-in-env-from": ({"main.envFrom": [{"secretRef": {"name": TOKEN_SECRET}}]}, "Secret"),
    "any-toleration": ({"spec.tolerations+": TOLERATE_ALL}, "tolerations"),
    "critical-priority": (
        {"spec.priority": None, "spec.priorityClassName": CLUSTER_CRITICAL},
        "priority",
    ),
    "shared-process-namespace": ({"spec.shareProcessNamespace": True}, "shareProcessNamespace"),
    "node-name": ({"spec.nodeName": "any-node"}, "nodeName"),
}


def test_the_controller_may_create_the_allowed_pod_again(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """The control for the cases below: unchanged, the pod passes every policy."""
    assert isinstance(controller_creates(cluster, allowed_pod), dict)


@pytest.mark.parametrize("case", sorted(POD_CASES))
def test_the_pod_policy_refuses_what_the_workflow_policy_cannot_see(
    cluster: Cluster, allowed_pod: Manifest, case: str
) -> None:
    change, says = POD_CASES[case]
    refusal = controller_creates(cluster, allowed_pod, change)
    assert isinstance(refusal, str) and POD_POLICY in refusal and says in refusal, refusal


def test_a_container_without_limits_gets_the_namespace_defaults(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """LimitRange: what a template leaves out is filled in, so no container is unbounded."""
    created = controller_creates(cluster, allowed_pod, {"main.resources": None})
    (main,) = [c for c in created["spec"]["containers"] if c["name"] == "main"]
    assert set(main["resources"].get("limits", {})) >= {"cpu", "memory"}, created


def test_a_pod_beyond_the_namespace_quota_is_refused(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    quotas = cluster.get("resourcequota", "-n", NAMESPACE)["items"]
    hard = {q["metadata"]["name"]: q["spec"].get("hard", {}) for q in quotas}
    counted = {key for limits in hard.values() for key in limits}
    assert {"requests.cpu", "limits.memory", "pods", "count/workflows.argoproj.io"} <= counted, hard
    over = {"memory": hard["mnist"]["requests.memory"]}
    refusal = controller_creates(
        cluster, allowed_pod, {"main.resources": {"requests": over, "limits": over}}
    )
    assert isinstance(refusal, str), "created"
    assert "exceeded quota: mnist" in refusal or "maximum memory usage" in refusal, refusal


def selects(policy: Manifest, labels: dict[str, str]) -> bool:
    """Whether POLICY's podSelector (matchLabels, matchExpressions In/Exists) picks a pod with LABELS."""
    selector = policy["spec"]["podSelector"]
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        if operator not in ("Exists", "In"):
            raise ClusterError(f"{policy['metadata']['name']}: operator {operator} not read here")
        if key not in labels or (operator == "In" and labels[key] not in expression["values"]):
            return False
    return True


def test_the_network_policies_are_admitted_and_select_the_projects_pods(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """The bridge CNI enforces no NetworkPolicy: the policies' selectors pick the pods the rules intend."""
    policies = {
        p["metadata"]["name"]: p for p in cluster.get("networkpolicy", "-n", NAMESPACE)["items"]
    }
    pages = cluster.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=mnist-page")["items"]
    page, run = pages[0]["metadata"]["labels"], allowed_pod["metadata"]["labels"]
    assert len(pages) == 1
    assert selects(policies["mnist-egress"], page) and selects(policies["mnist-egress"], run)
    assert selects(policies["mnist-page-ingress"], page)
    assert not selects(policies["mnist-page-ingress"], run)
    assert selects(policies["mnist-workflow-pods-no-ingress"], run)
    assert not selects(policies["mnist-workflow-pods-no-ingress"], page)
