"""Rights as the real API server grants them, and what a submitter cannot do with them.

Each account's `kubectl auth can-i --list` against docs/gke.md's table of rights; then the submitter tries to
escape, both through the Argo Server with its token (the way a submitter submits) and straight to the API
server as that account (`--as`): another account, a token, a Secret, the host, the system node, a higher
priority, more than the namespace's share. Each attempt must be refused, and the refusal must say by what:
the project's admission policies (infra/k8s/base/admission-policies.yaml), Pod Security `restricted`, the
LimitRange, or RBAC. The pods Argo's controller makes are checked by the pod policy as the controller itself
(`--as` its account, server-side dry run), starting from the pod of a workflow that was let through and ran.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
import urllib3  # noqa: F401  (its warning is filtered by name)

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
CONTROLLER = (
    "system:serviceaccount:argo:argo"  # Argo's install manifest: the workflow-controller's account
)
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


# --- rights ------------------------------------------------------------------------------------------


def can_i(cluster: Cluster, user: str, namespace: str) -> Rights:
    listing = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    return parse_can_i(listing)


TABLE = documented(ROOT / "docs" / "gke.md")


def test_the_table_of_rights_names_every_account_the_project_makes() -> None:
    accounts = {account for account, _ in TABLE}
    made = ("mnist-submitter", "mnist-pipeline", "mnist-executor", "mnist-page")
    assert accounts == {f"{NAMESPACE}/{name}" for name in made} | {"argo/argo-server"}, accounts


@pytest.mark.parametrize(("account", "namespace"), sorted(TABLE), ids="{0[0]}@{0[1]}".format)
def test_each_account_may_do_what_the_docs_say_and_no_more(
    cluster: Cluster, account: str, namespace: str
) -> None:
    """The API server's own answer (RBAC as bound on this cluster), less what any account may do."""
    account_namespace, name = account.split("/")
    user = f"system:serviceaccount:{account_namespace}:{name}"
    granted = beyond(can_i(cluster, user, namespace), can_i(cluster, NOBODY, namespace))
    assert granted == TABLE[(account, namespace)]


def test_the_submitter_cannot_read_a_secret(cluster: Cluster) -> None:
    for namespace in (NAMESPACE, "argo", "kube-system"):
        done = cluster.kubectl("get", "secrets", "-n", namespace, f"--as={SUBMITTER}", check=False)
        assert done.returncode != 0
        assert "forbidden" in done.stderr and 'cannot list resource "secrets"' in done.stderr


# --- submitting, the two ways ---------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    """What the cluster answered a submission: the Workflow's name, or why it was refused."""

    name: str | None
    refusal: str = ""


def through_argo_server(
    cluster: Cluster, workflow: Manifest, namespace: str = NAMESPACE
) -> Submitted:
    """POST /api/v1/workflows/{namespace} with the submitter's token, as submit.py and the Argo UI do."""
    answer = requests.post(
        f"{cluster.env['ARGO_SERVER']}/api/v1/workflows/{namespace}",
        json={"namespace": namespace, "workflow": workflow},
        headers={"Authorization": bearer(cluster.env["ARGO_TOKEN"])},
        verify=cluster.env.get("ARGO_INSECURE_SKIP_VERIFY") != "true",
        timeout=60,
    )
    if answer.ok:
        return Submitted(answer.json()["metadata"]["name"])
    return Submitted(None, f"{answer.status_code} {answer.text}")


def through_api_server(
    cluster: Cluster, workflow: Manifest, namespace: str = NAMESPACE
) -> Submitted:
    """`kubectl create` as the submitter's account."""
    done = cluster.kubectl(
        "create", "-n", namespace, f"--as={SUBMITTER}", "-o", "name", "-f", "-",
        input=json.dumps(workflow), check=False,
    )  # fmt: skip
    if done.returncode == 0:
        return Submitted(done.stdout.strip().rsplit("/", 1)[-1])
    return Submitted(None, done.stderr)


ROUTES = {"argo-server": through_argo_server, "api-server": through_api_server}


def bearer(token: str) -> str:
    return token if token.startswith("Bearer ") else f"Bearer {token}"


# --- the workflows tried --------------------------------------------------------------------------


def restricted_container(image: str, script: str) -> Manifest:
    """A container as the project's steps have them: it passes Pod Security `restricted` by itself."""
    return {
        "image": image,
        "command": ["python", "-c", script],
        "securityContext": plain(names.container_security_context()),
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "250m", "memory": "128Mi"},
        },
    }


def plain(value: Any) -> Any:
    """A Hera model (or a list of them) as the JSON the cluster reads."""
    if isinstance(value, list):
        return [plain(item) for item in value]
    return (
        value.model_dump(by_alias=True, exclude_none=True)
        if hasattr(value, "model_dump")
        else value
    )


def allowed_workflow(image: str) -> Manifest:
    """The smallest workflow the trust model lets through: the project's pod fields, one short step."""
    fields = {key: plain(value) for key, value in names.workflow_pod_fields().items()}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "rights-test-", "labels": {TEST_LABEL: "true"}},
        "spec": {
            "entrypoint": "main",
            "serviceAccountName": fields["service_account_name"],
            "automountServiceAccountToken": fields["automount_service_account_token"],
            "executor": fields["executor"],
            "securityContext": fields["security_context"],
            "tolerations": fields["tolerations"],
            "activeDeadlineSeconds": 300,
            "templates": [
                {"name": "main", "container": restricted_container(image, "print('ok')")}
            ],
        },
    }


PRINT_TOKEN = "print(open('/token/token').read()[:40])"
Change = Callable[[Manifest], None]


def template(workflow: Manifest) -> Manifest:
    return workflow["spec"]["templates"][0]


def security(workflow: Manifest) -> Manifest:
    return template(workflow)["container"]["securityContext"]


def mount(workflow: Manifest, volume: Manifest, path: str = "/token") -> None:
    template(workflow)["volumes"] = [volume]
    template(workflow)["container"]["volumeMounts"] = [{"name": volume["name"], "mountPath": path}]
    template(workflow)["container"]["command"][-1] = PRINT_TOKEN


def pod_spec_patch(workflow: Manifest) -> None:
    patch = {"containers": [{"name": "main", "securityContext": {"privileged": True}}]}
    workflow["spec"]["podSpecPatch"] = json.dumps(patch)


def token_in_environment(workflow: Manifest) -> None:
    container = template(workflow)["container"]
    reference = {"secretKeyRef": {"name": TOKEN_SECRET, "key": "token"}}
    container["env"] = [{"name": "TOKEN", "valueFrom": reference}]
    container["command"][-1] = "import os; print(os.environ['TOKEN'][:40])"


def secret_as_artifact_credential(workflow: Manifest) -> None:
    """An S3 output whose access key is a Secret of the namespace: Argo mounts that Secret into `wait`
    (workflowpod.go, createSecretVolumesAndMounts), which would send it to the endpoint named here."""
    secret = {"name": OTHER_SECRET, "key": "key"}
    s3 = {
        "endpoint": "10.77.0.1:9", "bucket": "b", "key": "k", "insecure": True,
        "accessKeySecret": secret, "secretKeySecret": secret,
    }  # fmt: skip
    template(workflow)["outputs"] = {"artifacts": [{"name": "out", "path": "/tmp/out", "s3": s3}]}


def oversized(workflow: Manifest) -> None:
    limits = {"cpu": "64", "memory": "1Ti"}
    template(workflow)["container"]["resources"] = {"requests": limits, "limits": limits}


def spec_hidden_in_status(workflow: Manifest) -> None:
    """A spec for the controller to run from status (Argo's CRDs have no status subresource)."""
    hidden = copy.deepcopy(workflow["spec"])
    hidden["podSpecPatch"] = json.dumps({"hostNetwork": True})
    workflow["status"] = {"storedWorkflowTemplateSpec": hidden}


@dataclass(frozen=True)
class Attempt:
    """A change to the allowed workflow, and where it must be refused: at submission (the Workflow itself)
    or when the controller creates its pod; REFUSED_BY and SAYS are in the refusal's message."""

    change: Change
    at: str  # "submit" or "pod"
    refused_by: str
    says: str


# One attempt for each rule that refuses: the workflow policy's, the pod policy's, Pod Security's, the
# LimitRange's.
ATTEMPTS = {
    "pod-spec-patch": Attempt(pod_spec_patch, "submit", WORKFLOW_POLICY, "podSpecPatch"),
    "template-pod-spec-patch": Attempt(
        lambda w: template(w).update(podSpecPatch=json.dumps({"shareProcessNamespace": True})),
        "submit",
        WORKFLOW_POLICY,
        "podSpecPatch",
    ),
    "executor-token-volume": Attempt(
        lambda w: mount(w, {"name": "token", "secret": {"secretName": TOKEN_SECRET}}),
        "submit",
        WORKFLOW_POLICY,
        "emptyDir",
    ),
    "host-network": Attempt(
        lambda w: w["spec"].update(hostNetwork=True), "pod", RESTRICTED, "hostNetwork=true"
    ),
    # The local cluster's API server runs with --allow-privileged=false and refuses it before admission;
    # where privileged containers are allowed (GKE), Pod Security refuses it.
    "privileged-container": Attempt(
        lambda w: security(w).update(privileged=True, allowPrivilegeEscalation=True),
        "pod",
        "",
        "privileged",
    ),
    "as-the-executor": Attempt(
        lambda w: template(w).update(serviceAccountName=names.EXECUTOR_ACCOUNT),
        "submit",
        WORKFLOW_POLICY,
        "serviceAccountName",
    ),
    "automount-token": Attempt(
        lambda w: w["spec"].update(automountServiceAccountToken=True),
        "submit",
        WORKFLOW_POLICY,
        "automountServiceAccountToken",
    ),
    "another-executor": Attempt(
        lambda w: w["spec"].update(executor={"serviceAccountName": "mnist-page"}),
        "submit",
        WORKFLOW_POLICY,
        "executor.serviceAccountName",
    ),
    "token-in-environment": Attempt(token_in_environment, "pod", POD_POLICY, "Secret"),
    "secret-as-artifact-credential": Attempt(
        secret_as_artifact_credential, "pod", POD_POLICY, "volumes"
    ),
    "system-pool-toleration": Attempt(
        lambda w: template(w).update(tolerations=[{"operator": "Exists"}]),
        "pod",
        POD_POLICY,
        "tolerations",
    ),
    "critical-priority": Attempt(
        lambda w: template(w).update(priorityClassName="system-node-critical"),
        "pod",
        POD_POLICY,
        "priority",
    ),
    "oversized": Attempt(
        oversized,
        "pod",
        "maximum cpu usage per Container is 2",
        "maximum memory usage per Container is 4Gi",
    ),
    "spec-hidden-in-status": Attempt(
        spec_hidden_in_status, "submit", WORKFLOW_POLICY, "podSpecPatch"
    ),
}
# Refused at submission, an attempt is tried both ways; a pod the controller makes is made the same either way.
TRIED = [
    (attempt, route)
    for attempt in sorted(ATTEMPTS)
    for route in sorted(ROUTES)
    if ATTEMPTS[attempt].at == "submit" or route == "argo-server"
]


@pytest.fixture(scope="module")
def other_secret(cluster: Cluster) -> Iterator[str]:
    """A Secret of the namespace that is not the executor's token, for a workflow to try to read."""
    cluster.kubectl(
        "create", "secret", "generic", OTHER_SECRET, "-n", NAMESPACE, "--from-literal=key=value"
    )
    cluster.kubectl("label", "secret", OTHER_SECRET, "-n", NAMESPACE, f"{TEST_LABEL}=true")
    yield OTHER_SECRET
    cluster.kubectl("delete", "secret", OTHER_SECRET, "-n", NAMESPACE, "--ignore-not-found")


@pytest.fixture
def created(cluster: Cluster) -> Iterator[list[str]]:
    """Names of the Workflows a test created; each is deleted afterwards, its pods with it."""
    workflows: list[str] = []
    yield workflows
    for name in workflows:
        cluster.kubectl(
            "delete", "workflow", name, "-n", NAMESPACE, "--ignore-not-found", "--wait=false"
        )


def node_refusal(cluster: Cluster, name: str) -> str:
    """The message of the workflow's failed pod node once the controller gave up creating its pod."""

    def failed() -> str:
        workflow = cluster.workflow(name)
        status = workflow.get("status", {})
        messages = [node.get("message", "") for node in status.get("nodes", {}).values()]
        messages.append(status.get("message", ""))
        if status.get("phase") in ("Failed", "Error") or any("forbidden" in m for m in messages):
            return "\n".join(m for m in messages if m) or status.get("phase", "")
        if status.get("phase") == "Succeeded":
            return "the workflow Succeeded"
        return ""

    return wait_until(f"workflow {name} to fail", failed, timeout=120)


@pytest.mark.parametrize(("attempt", "route"), TRIED)
def test_the_submitter_cannot_escape(
    cluster: Cluster, other_secret: str, created: list[str], attempt: str, route: str
) -> None:
    tried = ATTEMPTS[attempt]
    workflow = allowed_workflow(cluster.env["STEPS_IMAGE"])
    tried.change(workflow)
    submitted = ROUTES[route](cluster, workflow)
    if submitted.name:
        created.append(submitted.name)
    if tried.at == "submit":
        assert submitted.name is None, f"{attempt}: {route} admitted the workflow {submitted.name}"
        refusal = submitted.refusal
    else:
        assert submitted.name, (
            f"{attempt}: refused at submission, not by the pod: {submitted.refusal}"
        )
        refusal = node_refusal(cluster, submitted.name)
    assert tried.says in refusal, refusal
    refused_by = tried.refused_by or (RESTRICTED if RESTRICTED in refusal else PRIVILEGED_OFF)
    assert refused_by in refusal, refusal


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_submitter_cannot_submit_into_another_namespace(cluster: Cluster, route: str) -> None:
    for namespace in ("argo", "kube-system"):
        submitted = ROUTES[route](cluster, allowed_workflow(cluster.env["STEPS_IMAGE"]), namespace)
        assert submitted.name is None
        assert "forbidden" in submitted.refusal.lower(), submitted.refusal


def test_a_workflow_template_is_held_to_the_same_rules(cluster: Cluster) -> None:
    workflow = allowed_workflow(cluster.env["STEPS_IMAGE"])
    pod_spec_patch(workflow)
    workflow.update(
        kind="WorkflowTemplate", metadata={"name": f"rights-test-{uuid.uuid4().hex[:6]}"}
    )
    done = cluster.kubectl(
        "create", "-n", NAMESPACE, f"--as={SUBMITTER}", "-f", "-", input=json.dumps(workflow),
        check=False,
    )  # fmt: skip
    if done.returncode == 0:
        cluster.kubectl("delete", "workflowtemplate", workflow["metadata"]["name"], "-n", NAMESPACE)
    assert WORKFLOW_POLICY in done.stderr and "podSpecPatch" in done.stderr, done.stderr


# --- the pods the controller makes ----------------------------------------------------------------


@pytest.fixture(scope="module")
def allowed_pod(cluster: Cluster) -> Iterator[Manifest]:
    """The workflow the trust model lets through, submitted through the Argo Server: it runs to the end,
    and its pod, as Argo's controller built it, is the start of the pod policy's cases."""
    submitted = through_argo_server(cluster, allowed_workflow(cluster.env["STEPS_IMAGE"]))
    assert submitted.name, submitted.refusal
    try:
        phase = wait_until(
            f"workflow {submitted.name} to end",
            lambda: (
                cluster.workflow(submitted.name).get("status", {}).get("phase")
                in ("Succeeded", "Failed", "Error")
                and cluster.workflow(submitted.name)["status"]["phase"]
            ),
            timeout=180,
        )
        assert phase == "Succeeded", cluster.workflow(submitted.name)["status"]
        pods = cluster.get(
            "pods", "-n", NAMESPACE, "-l", f"workflows.argoproj.io/workflow={submitted.name}"
        )
        (pod,) = pods["items"]
        yield pod
    finally:
        cluster.kubectl("delete", "workflow", submitted.name, "-n", NAMESPACE, "--wait=false")


def test_the_allowed_workflow_ran_and_its_step_holds_no_token(allowed_pod: Manifest) -> None:
    """Only Argo's init and wait containers mount a token, the executor account's; the step's account
    has no role at all (Argo's docs/security.md, "Workflow Pod Permissions")."""
    spec = allowed_pod["spec"]
    assert spec["serviceAccountName"] == names.SERVICE_ACCOUNT
    assert spec["automountServiceAccountToken"] is False
    (token,) = [volume for volume in spec["volumes"] if volume["name"] == "exec-sa-token"]
    assert token["secret"]["secretName"] == TOKEN_SECRET
    for container in spec["containers"] + spec["initContainers"]:
        mounts = {mount["name"] for mount in container.get("volumeMounts", [])}
        assert ("exec-sa-token" in mounts) == (container["name"] != "main"), container["name"]


def as_new_pod(pod: Manifest) -> Manifest:
    """POD as a create request: no status, no server-set fields, a new name, not yet bound to a node."""
    fresh = copy.deepcopy(pod)
    fresh.pop("status", None)
    metadata = fresh["metadata"]
    fresh["metadata"] = {
        "generateName": "rights-test-",
        "namespace": NAMESPACE,
        "labels": metadata["labels"],
        "annotations": metadata.get("annotations", {}),
    }
    fresh["spec"].pop("nodeName", None)
    return fresh


def controller_creates(cluster: Cluster, pod: Manifest) -> str:
    """The pod created by the controller's account, server-side dry run: nothing is stored or started."""
    done = cluster.kubectl(
        "create", "--dry-run=server", f"--as={CONTROLLER}", "-o", "name", "-f", "-",
        input=json.dumps(pod), check=False,
    )  # fmt: skip
    return "" if done.returncode == 0 else done.stderr


def containers(pod: Manifest, name: str) -> Manifest:
    return next(
        c for c in pod["spec"]["containers"] + pod["spec"]["initContainers"] if c["name"] == name
    )


def pod_tolerates_all(pod: Manifest) -> None:
    pod["spec"]["tolerations"].append({"operator": "Exists"})


def pod_priority(pod: Manifest) -> None:
    pod["spec"].pop("priority", None)
    pod["spec"]["priorityClassName"] = "system-cluster-critical"


def pod_token_in_main(pod: Manifest) -> None:
    mount = {"name": "exec-sa-token", "mountPath": "/token", "readOnly": True}
    containers(pod, "main")["volumeMounts"].append(mount)


def pod_secret_env(pod: Manifest) -> None:
    reference = {"secretKeyRef": {"name": TOKEN_SECRET, "key": "token"}}
    containers(pod, "main").setdefault("env", []).append({"name": "T", "valueFrom": reference})


# One case for each rule of the pod policy.
POD_CASES = {
    "as-the-executor": (
        lambda pod: pod["spec"].update(serviceAccountName=names.EXECUTOR_ACCOUNT),
        "serviceAccountName",
    ),
    "token-automounted": (
        lambda pod: pod["spec"].pop("automountServiceAccountToken"),
        "automountServiceAccountToken",
    ),
    "other-secret-volume": (
        lambda pod: pod["spec"]["volumes"].append(
            {"name": "other", "secret": {"secretName": OTHER_SECRET}}
        ),
        "volumes",
    ),
    "token-mounted-in-main": (pod_token_in_main, "exec-sa-token"),
    "secret-in-env": (pod_secret_env, "Secret"),
    "secret-in-env-from": (
        lambda pod: containers(pod, "main").update(envFrom=[{"secretRef": {"name": TOKEN_SECRET}}]),
        "Secret",
    ),
    "any-toleration": (pod_tolerates_all, "tolerations"),
    "critical-priority": (pod_priority, "priority"),
    "shared-process-namespace": (
        lambda pod: pod["spec"].update(shareProcessNamespace=True),
        "shareProcessNamespace",
    ),
    "node-name": (lambda pod: pod["spec"].update(nodeName="any-node"), "nodeName"),
}


def test_the_controller_may_create_the_allowed_pod_again(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """The control for the cases below: unchanged, the pod passes every policy."""
    assert controller_creates(cluster, as_new_pod(allowed_pod)) == ""


@pytest.mark.parametrize("case", sorted(POD_CASES))
def test_the_pod_policy_refuses_what_the_workflow_policy_cannot_see(
    cluster: Cluster, allowed_pod: Manifest, case: str
) -> None:
    """Whatever the controller was asked to make (a status edited by hand, a template Argo fills in), the
    API server refuses a workflow's pod that leaves the trust model."""
    change, says = POD_CASES[case]
    pod = as_new_pod(allowed_pod)
    change(pod)
    refusal = controller_creates(cluster, pod)
    assert POD_POLICY in refusal and says in refusal, refusal or "created"


def test_a_container_without_limits_gets_the_namespace_defaults(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """LimitRange: what a template leaves out is filled in, so no container is unbounded."""
    pod = as_new_pod(allowed_pod)
    containers(pod, "main").pop("resources")
    done = cluster.kubectl(
        "create", "--dry-run=server", f"--as={CONTROLLER}", "-o", "json", "-f", "-",
        input=json.dumps(pod),
    )  # fmt: skip
    resources = containers(json.loads(done.stdout), "main")["resources"]
    assert set(resources.get("limits", {})) >= {"cpu", "memory"}, resources


def test_the_namespace_has_a_quota_that_counts_runs_and_pods(cluster: Cluster) -> None:
    quotas = cluster.get("resourcequota", "-n", NAMESPACE)["items"]
    hard = {key for quota in quotas for key in quota["spec"].get("hard", {})}
    assert {"requests.cpu", "limits.memory", "pods", "count/workflows.argoproj.io"} <= hard, hard


def test_a_pod_beyond_the_quota_is_refused(cluster: Cluster, allowed_pod: Manifest) -> None:
    quota = cluster.get("resourcequota", "mnist", "-n", NAMESPACE)
    pod = as_new_pod(allowed_pod)
    over = quota["spec"]["hard"]["requests.memory"]
    containers(pod, "main")["resources"] = {
        "requests": {"memory": over},
        "limits": {"memory": over},
    }
    refusal = controller_creates(cluster, pod)
    assert "exceeded quota: mnist" in refusal or "maximum memory usage" in refusal, refusal


# --- what the network policies select ---------------------------------------------------------------


def selects(policy: Manifest, labels: dict[str, str]) -> bool:
    """Whether POLICY's podSelector (matchLabels, matchExpressions In/Exists) picks a pod with LABELS."""
    selector = policy["spec"]["podSelector"]
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        if operator == "Exists" and key not in labels:
            return False
        if operator == "In" and labels.get(key) not in expression["values"]:
            return False
        if operator not in ("Exists", "In"):
            raise ClusterError(f"{policy['metadata']['name']}: operator {operator} not read here")
    return True


def test_the_network_policies_are_admitted_and_select_the_projects_pods(
    cluster: Cluster, allowed_pod: Manifest
) -> None:
    """The local cluster's bridge CNI does not enforce NetworkPolicy; the API server holds the policies, and
    their selectors pick the page's pod and a workflow's pod as the rules intend."""
    policies = {
        p["metadata"]["name"]: p for p in cluster.get("networkpolicy", "-n", NAMESPACE)["items"]
    }
    (page,) = cluster.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=mnist-page")[
        "items"
    ]
    page_labels, run_labels = page["metadata"]["labels"], allowed_pod["metadata"]["labels"]
    egress = policies["mnist-egress"]
    assert selects(egress, page_labels) and selects(egress, run_labels)
    assert selects(policies["mnist-page-ingress"], page_labels)
    assert not selects(policies["mnist-page-ingress"], run_labels)
    assert selects(policies["mnist-workflow-pods-no-ingress"], run_labels)
    assert not selects(policies["mnist-workflow-pods-no-ingress"], page_labels)
