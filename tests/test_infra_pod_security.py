"""Every pod of a run, and the page's, passes the Pod Security level its namespace enforces, as Argo v4.1.2
would build it (tests/support/argo_pods.py) from the rendered spec and the controller config up.sh installs;
and the steps hold no Kubernetes token. The check itself (tests/support/pod_security.py) is shown to refuse each
control it covers."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.argo_pods import TOKEN_VOLUME, NotModelled, token_secret, workflow_pods
from tests.support.dockerfile import DOCKERFILE, image_user
from tests.support.kustomize import build
from tests.support.pod_security import violations
from tests.support.project import ROOT
from workflows.pipeline import resources as cluster
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow

K8S = ROOT / "infra" / "k8s"


def controller_executor(tmp_path: Path) -> dict:
    """The `executor` block of the workflow-controller-configmap that up.sh applies (lib.sh)."""
    directory = tmp_path / "argo"
    script = (
        f"source infra/gke/config.sh && source infra/gke/lib.sh && render_argo_config {directory}"
    )
    subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PROJECT_ID": "p"},
        check=True,
    )
    patch = yaml.safe_load((directory / "workflow-controller-configmap.yaml").read_text())
    return yaml.safe_load(patch["data"]["executor"])


def enforced_level() -> str:
    (namespace,) = [m for m in build(K8S / "base") if m["kind"] == "Namespace"]
    return namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]


def run_pods(executor: dict) -> list[dict]:
    """The pods of a default run and of one started from the registered template."""
    settings = PipelineSettings()
    return workflow_pods(compile_workflow(settings), executor) + workflow_pods(
        compile_template(settings), executor
    )


def test_the_namespace_enforces_restricted() -> None:
    (namespace,) = [m for m in build(K8S / "base") if m["kind"] == "Namespace"]
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


def test_every_pod_of_a_run_passes_the_namespaces_level(tmp_path: Path) -> None:
    pods = run_pods(controller_executor(tmp_path))
    names = {pod["metadata"]["name"] for pod in pods}
    assert names >= {"split", "init", "train", "aggregate", "evaluate", "publish"}
    for pod in pods:
        assert {c["name"] for c in pod["spec"]["containers"]} == {"wait", "main"}
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["init"]
        found = violations(pod, enforced_level())
        assert not found, (pod["metadata"]["name"], found)


def test_without_the_controllers_executor_settings_argos_containers_fail() -> None:
    """What the executor block fixes: Argo's own containers carry no securityContext by default."""
    pod = run_pods({})[0]
    found = violations(pod, "restricted")
    assert any("initContainers[init]" in line for line in found)
    assert any("containers[wait]" in line for line in found)
    assert not [line for line in found if "[main]" in line]


def test_the_page_passes_the_namespaces_level() -> None:
    for overlay in ("base", "overlays/example"):
        (deployment,) = [m for m in build(K8S / overlay) if m["kind"] == "Deployment"]
        pod = {"metadata": deployment["spec"]["template"]["metadata"]}
        pod["spec"] = deployment["spec"]["template"]["spec"]
        assert not violations(pod, enforced_level()), overlay


def test_the_steps_hold_no_kubernetes_token(tmp_path: Path) -> None:
    """Only Argo's init and wait containers mount a token, the executor account's; the steps' account has
    no role at all (Argo's docs/security.md, "Workflow Pod Permissions"; docs/workflow-rbac.md)."""
    manifests = build(K8S / "base")
    for pod in run_pods(controller_executor(tmp_path)):
        spec = pod["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["serviceAccountName"] == cluster.SERVICE_ACCOUNT
        (token,) = [volume for volume in spec["volumes"] if volume["name"] == TOKEN_VOLUME]
        assert token["secret"]["secretName"] == token_secret(cluster.EXECUTOR_ACCOUNT)
        for container in spec["containers"] + spec["initContainers"]:
            mounts = {mount["name"] for mount in container.get("volumeMounts", [])}
            assert (TOKEN_VOLUME in mounts) == (container["name"] != "main"), container["name"]
    (secret,) = [m for m in manifests if m["kind"] == "Secret"]
    assert secret["metadata"]["name"] == token_secret(cluster.EXECUTOR_ACCOUNT)
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": cluster.EXECUTOR_ACCOUNT
    }
    bound = {
        subject["name"]
        for binding in manifests
        if binding["kind"] == "RoleBinding"
        for subject in binding["subjects"]
    }
    assert cluster.EXECUTOR_ACCOUNT in bound and cluster.SERVICE_ACCOUNT not in bound
    accounts = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ServiceAccount"}
    assert accounts[cluster.SERVICE_ACCOUNT]["automountServiceAccountToken"] is False


# The images whose containers the namespace runs: the two step images (workflows/pipeline/resources.py gives every step
# pod runAsUser STEPS_USER, whichever image it runs) and the page's.
IMAGE_TARGETS = ("steps", "train", "page")


def test_the_pods_user_is_the_images_user() -> None:
    """Each image runs as the pods' user: its last USER, its own or one it inherits, is STEPS_USER (a pod
    whose runAsUser differs from its image's user may not own /work, which the image gives that user)."""
    expected = f"{cluster.STEPS_USER}:{cluster.STEPS_USER}"
    for target in IMAGE_TARGETS:
        assert image_user(target) == expected, target
    (deployment,) = [m for m in build(K8S / "base") if m["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == (
        cluster.STEPS_USER
    )


@pytest.mark.parametrize(
    "change",
    [
        ("FROM step-runtime AS train", "FROM runtime AS train"),  # built where no USER is set
        (
            "COPY --from=build-train /opt/venv /opt/venv",
            "COPY --from=build-train /opt/venv /opt/venv\nUSER 0",
        ),
    ],
)
def test_a_step_image_with_another_user_is_seen(change: tuple[str, str], tmp_path: Path) -> None:
    """The check follows each target's stages: the train image losing the steps' user is caught, though every
    USER line left in the file still names it in the first case."""
    dockerfile = tmp_path / "Dockerfile"
    text = DOCKERFILE.read_text()
    assert change[0] in text
    dockerfile.write_text(text.replace(change[0], change[1]))
    assert image_user("train", dockerfile) != f"{cluster.STEPS_USER}:{cluster.STEPS_USER}"
    assert image_user("steps", dockerfile) == f"{cluster.STEPS_USER}:{cluster.STEPS_USER}"


def test_argo_refuses_no_token_without_an_executor_account(tmp_path: Path) -> None:
    workflow = compile_workflow(PipelineSettings())
    del workflow["spec"]["executor"]
    with pytest.raises(ValueError, match=r"executor\.serviceAccountName must not be empty"):
        workflow_pods(workflow, controller_executor(tmp_path))


def test_a_pod_spec_patch_is_not_passed_unchecked(tmp_path: Path) -> None:
    workflow = compile_workflow(PipelineSettings())
    workflow["spec"]["podSpecPatch"] = '{"hostNetwork": true}'
    with pytest.raises(NotModelled):
        workflow_pods(workflow, controller_executor(tmp_path))


COMPLIANT = {
    "metadata": {"name": "ok", "annotations": {}},
    "spec": {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "x"}}],
        "initContainers": [],
        "containers": [
            {
                "name": "c",
                "image": "i",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                },
            }
        ],
    },
}


def mutated(path: str, value: object) -> dict:
    """COMPLIANT with one field set: `path` is dotted, `c` naming the container's securityContext."""
    pod = copy.deepcopy(COMPLIANT)
    parts = path.split(".")
    if parts[0] == "c":
        target = pod["spec"]["containers"][0]["securityContext"]
        parts = parts[1:]
    elif parts[0] == "container":
        target = pod["spec"]["containers"][0]
        parts = parts[1:]
    else:
        target = pod
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value
    return pod


# (field set, value, the rule's words, whether baseline already forbids it)
CONTROLS = [
    ("spec.hostNetwork", True, "host namespaces", True),
    ("spec.hostPID", True, "host namespaces", True),
    ("spec.hostIPC", True, "host namespaces", True),
    ("c.privileged", True, "privileged", True),
    ("c.capabilities.add", ["SYS_ADMIN"], "capabilities", True),
    ("c.capabilities.add", ["NET_RAW"], "capabilities", True),
    ("c.capabilities.drop", [], "does not drop ALL", False),
    ("spec.volumes", [{"name": "h", "hostPath": {"path": "/"}}], "hostPath", True),
    ("spec.volumes", [{"name": "g", "gcePersistentDisk": {"pdName": "d"}}], "volume types", False),
    ("container.ports", [{"containerPort": 80, "hostPort": 80}], "host ports", True),
    ("c.procMount", "Unmasked", "/proc mount", True),
    ("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "sysctls", True),
    ("c.seccompProfile", {"type": "Unconfined"}, "seccomp", True),
    ("spec.securityContext.seccompProfile", None, "seccomp", False),
    ("spec.securityContext.runAsNonRoot", False, "non-root", False),
    ("c.runAsNonRoot", False, "non-root", False),
    ("c.runAsUser", 0, "non-root user", False),
    ("spec.securityContext.runAsUser", 0, "non-root user", False),
    ("c.allowPrivilegeEscalation", True, "privilege escalation", False),
    ("c.allowPrivilegeEscalation", None, "privilege escalation", False),
    ("c.seLinuxOptions", {"type": "spc_t"}, "SELinux", True),
    ("c.seLinuxOptions", {"user": "root"}, "SELinux", True),
    ("c.appArmorProfile", {"type": "Unconfined"}, "AppArmor", True),
    (
        "metadata.annotations",
        {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"},
        "AppArmor",
        True,
    ),
    ("c.windowsOptions", {"hostProcess": True}, "HostProcess", True),
]


def test_the_compliant_pod_passes() -> None:
    assert violations(COMPLIANT, "restricted") == []


@pytest.mark.parametrize("path, value, rule, in_baseline", CONTROLS)
def test_the_check_refuses_each_control(
    path: str, value: object, rule: str, in_baseline: bool
) -> None:
    pod = mutated(path, value)
    found = violations(pod, "restricted")
    assert any(rule in line for line in found), found
    assert bool([line for line in violations(pod, "baseline") if rule in line]) == in_baseline
    assert violations(pod, "privileged") == []


def test_a_rule_holds_for_init_containers_too() -> None:
    pod = copy.deepcopy(COMPLIANT)
    pod["spec"]["initContainers"] = [{"name": "i", "image": "i"}]
    found = violations(pod, "restricted")
    assert any("initContainers[i]" in line and "does not drop ALL" in line for line in found)
