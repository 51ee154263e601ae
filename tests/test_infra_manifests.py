"""The Kubernetes manifests under infra/k8s: assembled by kustomize, validated against Kubernetes' own
schemas and Argo's, and holding the names the pipeline and the page rely on."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from steps.lib.registry import run_prefix
from tests.reference import required
from tests.support.argo_schema import WORKFLOW_SCHEMA
from tests.support.kustomize import build, gke_lib, identity, needs_kubectl, one, render_overlay
from tests.support.project import ROOT
from tests.support.rights import documented
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

pytestmark = needs_kubectl
K8S = ROOT / "infra" / "k8s"
CLUSTER_SCOPED = {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
# The newest Kubernetes the validator knows, and an older minor still offered by GKE's stable channel.
KUBERNETES_VERSIONS = [kubernetes_validate.latest_version(), "1.33.0"]
# Settings of a rendered overlay: what infra/gke/up.sh writes for a project.
PROJECT, BUCKET, REGION, TAG = "test-project", "test-bucket", "europe-west1", "abc1234"
DIGEST = "sha256:" + "4d" * 32
# The committed example overlay: what up.sh writes for these settings.
EXAMPLE = {"PROJECT_ID": "my-project", "IMAGE_TAG": "0.1.0"}
EXAMPLE_DIGEST = "sha256:" + "0123456789abcdef" * 4


# What up.sh writes with the page public over HTTPS behind IAP.
PUBLIC = {"PAGE_DOMAIN": "mnist.example.com", "PAGE_IAP_MEMBERS": "user:a@example.com"}
# Kinds of GKE's own CRDs, which the Kubernetes schemas do not hold.
GKE_KINDS = {"ManagedCertificate", "FrontendConfig", "BackendConfig"}


def overlay_for(tmp_path: Path, name: str, extra: dict[str, str]) -> Path:
    settings = {"PROJECT_ID": PROJECT, "BUCKET": BUCKET, "REGION": REGION, "IMAGE_TAG": TAG}
    return render_overlay(tmp_path, name, {**settings, **extra}, DIGEST)


@pytest.fixture(scope="module")
def rendered_overlay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay_for(tmp_path_factory.mktemp("rendered"), "test", {})


@pytest.fixture(scope="module")
def public_overlay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay_for(tmp_path_factory.mktemp("public"), "public", PUBLIC)


def directory_of(overlay: str, rendered: Path, public: Path) -> Path:
    return {"rendered": rendered, "rendered-public": public}.get(overlay, K8S / overlay)


@pytest.mark.parametrize("overlay", ["base", "overlays/example", "rendered", "rendered-public"])
def test_every_manifest_validates_against_kubernetes(
    overlay: str, rendered_overlay: Path, public_overlay: Path
) -> None:
    """GKE's own kinds (certificate, frontend and backend configs) are outside Kubernetes' schemas."""
    directory = directory_of(overlay, rendered_overlay, public_overlay)
    manifests = [m for m in build(directory) if m["kind"] not in GKE_KINDS]
    kinds = {m["kind"] for m in manifests}
    assert kinds >= {"Namespace", "ServiceAccount", "Deployment", "Service"}
    for version in KUBERNETES_VERSIONS:
        for manifest in manifests:
            try:
                kubernetes_validate.validate(manifest, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(
                    f"{overlay}: {identity(manifest)} is invalid for Kubernetes {version}: {error}"
                )


def test_an_invalid_manifest_is_rejected() -> None:
    """The validator really checks: a Deployment with a misspelt field fails in strict mode."""
    deployment = one(build(K8S / "base"), "Deployment", "mnist-page")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)


def test_example_overlay_is_what_up_sh_writes(tmp_path: Path) -> None:
    """The committed example is the renderer's output for the example settings, so it cannot go stale."""
    written = render_overlay(tmp_path, "example", EXAMPLE, EXAMPLE_DIGEST) / "kustomization.yaml"
    assert written.read_text() == (K8S / "overlays" / "example" / "kustomization.yaml").read_text()


def test_rendered_overlay_points_everything_at_the_project(rendered_overlay: Path) -> None:
    manifests = build(rendered_overlay)
    namespaces = {
        m["metadata"].get("namespace") for m in manifests if m["kind"] not in CLUSTER_SCOPED
    }
    assert namespaces == {"mnist"}
    assert all("namespace" not in m["metadata"] for m in manifests if m["kind"] in CLUSTER_SCOPED)
    annotation = "iam.gke.io/gcp-service-account"
    for account in ("mnist-pipeline", "mnist-page"):
        annotations = one(manifests, "ServiceAccount", account)["metadata"]["annotations"]
        assert annotations[annotation] == f"{account}@{PROJECT}.iam.gserviceaccount.com"
    pod = one(manifests, "Deployment", "mnist-page")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"{REGION}-docker.pkg.dev/{PROJECT}/mnist/mnist-argo-page@{DIGEST}"
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MODEL_URI"] == f"gs://{BUCKET}/models/mnist/LATEST"
    repositories = one(manifests, "ConfigMap", "artifact-repositories")["data"]
    assert yaml.safe_load(repositories["default-v1"])["gcs"]["bucket"] == BUCKET
    assert "PROJECT_ID" not in json.dumps(manifests) and '"BUCKET' not in json.dumps(manifests)


@functools.cache
def artifact_repository_validator() -> jsonschema.Draft7Validator:
    """Argo's ArtifactRepository definition, unknown keys refused in it and its GCS block (Argo allows any)."""
    schema = json.loads(required(WORKFLOW_SCHEMA).read_text())
    definitions = schema["definitions"]
    for name in ("ArtifactRepository", "GCSArtifactRepository"):
        definitions[f"io.argoproj.workflow.v1alpha1.{name}"]["additionalProperties"] = False
    gcs = definitions["io.argoproj.workflow.v1alpha1.GCSArtifactRepository"]
    gcs["required"] = ["bucket"]
    root = {
        "definitions": definitions,
        "$ref": "#/definitions/io.argoproj.workflow.v1alpha1.ArtifactRepository",
    }
    return jsonschema.Draft7Validator(root)


@pytest.mark.parametrize("overlay", ["base", "overlays/example", "rendered"])
def test_artifact_repository_is_a_valid_argo_gcs_one(overlay: str, rendered_overlay: Path) -> None:
    directory = rendered_overlay if overlay == "rendered" else K8S / overlay
    config_map = one(build(directory), "ConfigMap", "artifact-repositories")
    key = config_map["metadata"]["annotations"]["workflows.argoproj.io/default-artifact-repository"]
    repository = yaml.safe_load(config_map["data"][key])
    artifact_repository_validator().validate(repository)
    assert set(repository) == {"gcs", "archiveLogs"}, "GCS alone, no key (Workload Identity)"
    assert repository["gcs"]["keyFormat"].startswith("{{workflow.name}}/")


def test_the_schema_check_catches_a_misspelt_field() -> None:
    with pytest.raises(jsonschema.ValidationError):
        artifact_repository_validator().validate({"gcs": {"bukket": "b"}})


# What the Argo Server does with the caller's token (--auth-mode=client) for each action of the UI and of
# submit.py; from Argo's server/workflow/workflow_server.go and server/workflowtemplate (v3.5 to v4).
ARGO_UI_ACTIONS = {
    "list and watch runs": [("workflows", verb) for verb in ("list", "watch", "get")],
    "submit": [("workflows", "create")],
    "submit from the template": [("workflowtemplates", "get"), ("workflows", "create")],
    "register the template": [("workflowtemplates", verb) for verb in ("create", "update", "get")],
    # RetryWorkflow: FormulateRetryWorkflow, then the failed nodes' pods deleted, then the Workflow updated.
    "retry": [("workflows", "get"), ("pods", "delete"), ("workflows", "update")],
    # ResubmitWorkflow: FormulateResubmitWorkflow, then SubmitWorkflow creates a new Workflow.
    "resubmit": [("workflows", "get"), ("workflows", "create")],
    "stop, terminate, suspend, resume": [("workflows", "update")],
    "delete a run": [("workflows", "delete")],
    "logs and events of a step": [
        ("pods", "get"),
        ("pods/log", "get"),
        ("events", "list"),
        ("events", "watch"),
    ],
    # docs/security.md, "UI Access": the read-only role of a namespace's UI user.
    "event flow page": [("workfloweventbindings", "list")],
}


@pytest.mark.parametrize("action", sorted(ARGO_UI_ACTIONS))
def test_submitter_may_do_what_the_argo_ui_does(action: str) -> None:
    """By docs/gke.md's table of rights, which tests/cluster/test_rights.py holds the real cluster to."""
    rights = documented(ROOT / "docs" / "gke.md")[("mnist/mnist-submitter", "mnist")]
    for resource, verb in ARGO_UI_ACTIONS[action]:
        assert verb in rights.get(resource, frozenset()), f"{action}: {verb} {resource}"


def test_page_is_probed_served_on_port_80_and_locked_down() -> None:
    manifests = build(K8S / "base")
    deployment = one(manifests, "Deployment", "mnist-page")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["serviceAccountName"] == "mnist-page"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"http": 8501}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    assert container["resources"]["requests"] and container["resources"]["limits"]
    env = {item["name"]: item["value"] for item in container["env"]}
    writable = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert env["HOME"] in writable, "Streamlit and Keras write under HOME on a read-only root"
    service = one(manifests, "Service", "mnist-page")
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


PUBLIC_KINDS = {"Ingress", "Gateway", "HTTPRoute"}


@pytest.mark.parametrize("overlay", ["base", "overlays/example", "rendered"])
def test_nothing_is_public_by_default(overlay: str, rendered_overlay: Path) -> None:
    """No Service reachable from outside the cluster and no Ingress or Gateway: the page is reached by a
    port-forward to localhost, where browsers give the camera tab a camera."""
    manifests = build(directory_of(overlay, rendered_overlay, rendered_overlay))
    services = [m for m in manifests if m["kind"] == "Service"]
    assert services
    for service in services:
        assert service["spec"].get("type", "ClusterIP") == "ClusterIP", identity(service)
        assert not service["spec"].get("externalIPs"), identity(service)
    assert not [m for m in manifests if m["kind"] in PUBLIC_KINDS]


def test_the_public_page_is_https_only_with_a_managed_certificate(public_overlay: Path) -> None:
    manifests = build(public_overlay)
    ingress = one(manifests, "Ingress", "mnist-page")
    annotations = ingress["metadata"]["annotations"]
    certificate = one(
        manifests, "ManagedCertificate", annotations["networking.gke.io/managed-certificates"]
    )
    assert certificate["spec"]["domains"] == ["mnist.example.com"]
    frontend = one(
        manifests, "FrontendConfig", annotations["networking.gke.io/v1beta1.FrontendConfig"]
    )
    assert frontend["spec"]["redirectToHttps"]["enabled"] is True
    assert annotations["kubernetes.io/ingress.global-static-ip-name"] == "mnist-page"
    assert ingress["spec"]["defaultBackend"]["service"]["name"] == "mnist-page"
    service = one(manifests, "Service", "mnist-page")
    assert service["spec"]["type"] == "ClusterIP", "reached through the load balancer's NEG only"
    backend = json.loads(service["metadata"]["annotations"]["cloud.google.com/backend-config"])
    config = one(manifests, "BackendConfig", backend["default"])
    assert config["spec"]["healthCheck"]["requestPath"] == "/_stcore/health"
    assert config["spec"]["timeoutSec"] >= 600, "Streamlit's WebSocket outlives 30 s"
    assert config["spec"]["iap"] == {"enabled": True}


def test_iap_is_an_option_of_the_public_page(tmp_path: Path) -> None:
    overlay = overlay_for(tmp_path, "public-no-iap", {"PAGE_DOMAIN": "mnist.example.com"})
    config = one(build(overlay), "BackendConfig", "mnist-page")
    assert "iap" not in config["spec"]


def test_lifecycle_rule_deletes_old_runs_and_keeps_published_models(tmp_path: Path) -> None:
    """GCS deletes an object when all of a rule's conditions hold: here its age and its name's start."""
    settings = {"PROJECT_ID": PROJECT, "ARTIFACT_TTL_DAYS": "5"}
    (rule,) = json.loads(gke_lib(tmp_path, settings, "render_lifecycle"))["rule"]
    (prefix,) = rule["condition"]["matchesPrefix"]
    assert rule == {
        "action": {"type": "Delete"},
        "condition": {"age": 5, "matchesPrefix": [prefix]},
    }
    # Run artifacts are keyed "<workflow name>/..."; the workflow's generateName is that name's start.
    generate_name = compile_workflow(PipelineSettings())["metadata"]["generateName"]
    assert generate_name.startswith(prefix)
    for name in (f"{run_prefix(generate_name + 'x7k2p')}/model.h5", "models/mnist/LATEST"):
        assert not name.startswith(prefix), name


def test_overlay_refuses_anything_but_an_image_digest(tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failure:
        overlay = str(tmp_path / "o")
        gke_lib(tmp_path, {"PROJECT_ID": PROJECT}, "render_overlay", overlay, "../../base", TAG)
    assert "not an image digest" in failure.value.stderr
    assert not (tmp_path / "o" / "kustomization.yaml").exists()


@pytest.mark.parametrize(
    ("prefix", "refusal"),
    [
        ("m", "would match published models"),
        ("models", "would match published models"),
        ("models/", "must be the start of a workflow's name"),  # no workflow's name has a slash
        ("models/mnist/", "must be the start of a workflow's name"),
    ],
)
def test_settings_that_would_delete_published_models_are_refused(
    prefix: str, refusal: str, tmp_path: Path
) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failure:
        gke_lib(tmp_path, {"PROJECT_ID": PROJECT, "RUN_PREFIX": prefix}, "check_settings")
    assert failure.value.returncode == 2
    assert failure.value.stderr.startswith("error: RUN_PREFIX") and refusal in failure.value.stderr


def test_a_run_prefix_beside_models_is_accepted(tmp_path: Path) -> None:
    gke_lib(tmp_path, {"PROJECT_ID": PROJECT, "RUN_PREFIX": "mnist-"}, "check_settings")
