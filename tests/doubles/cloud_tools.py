"""Stand-ins for `gcloud`, `kubectl`, `docker`, `curl` and `gke-gcloud-auth-plugin` (no Google Cloud here): each
logs its call, gcloud its exact argv too (test_infra_gcloud_cli.py has the real CLI parse them), and they
answer what the scripts read: which resources exist, and whether up.sh made them. The scripts run for real."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.project import ROOT

PROJECT_NUMBER = "123456789"
# The backend service GKE names after the page's Service (ingress.kubernetes.io/backends on its Ingress).
BACKEND_SERVICE = "k8s1-0a1b2c3d-mnist-mnist-page-80-4e5f6a7b"
DESCRIPTION = "Created by mnist-argo infra/gke/up.sh"
NODE_ACCOUNT = "mnist-nodes@test-project.iam.gserviceaccount.com"
BUILD_ACCOUNT = "mnist-build@test-project.iam.gserviceaccount.com"
PIPELINE_ACCOUNT = "mnist-pipeline@test-project.iam.gserviceaccount.com"
PAGE_ACCOUNT = "mnist-page@test-project.iam.gserviceaccount.com"
ARGO_SERVER_PRINCIPAL = (
    f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/"
    "workloadIdentityPools/test-project.svc.id.goog/subject/ns/argo/sa/argo-server"
)
# The policies `get-iam-policy` lists after up.sh (role, a tab, member): its grants, one to an account
# since deleted, and others' grants (IAP's in the project's policy too), which down.sh must keep.
BUCKET_POLICY = f"""roles/storage.legacyBucketOwner\tprojectOwner:test-project
roles/storage.objectUser\tserviceAccount:{PIPELINE_ACCOUNT}
roles/storage.objectViewer\tdeleted:serviceAccount:{PAGE_ACCOUNT}?uid=1234567890
roles/storage.objectViewer\t{ARGO_SERVER_PRINCIPAL}
roles/storage.objectViewer\tuser:someone@example.com
"""
PROJECT_POLICY = f"""roles/owner\tuser:someone@example.com
roles/container.defaultNodeServiceAccount\tserviceAccount:{NODE_ACCOUNT}
roles/logging.logWriter\tdeleted:serviceAccount:{BUILD_ACCOUNT}?uid=42
roles/logging.logWriter\tserviceAccount:other@test-project.iam.gserviceaccount.com
roles/iap.httpsResourceAccessor\tuser:a@example.com
"""
IAP_POLICY = (
    "roles/iap.httpsResourceAccessor\tuser:a@example.com\n"
    "roles/iap.httpsResourceAccessor\tuser:b@example.com\n"
    "roles/iap.admin\tuser:a@example.com\n"
)
MADE_CONTEXT = "gke_test-project_us-central1-c_mnist-argo"  # the cluster's in FAKE_CLUSTER_ZONE
# What down.sh finds where up.sh made everything with the page public behind IAP, beside others' grants.
ALL_MADE = {
    "FAKE_EXISTING": "cluster bucket build-bucket account registry address",
    "FAKE_POLICY": BUCKET_POLICY,
    "FAKE_PROJECT_POLICY": PROJECT_POLICY,
    "FAKE_IAP_POLICY": IAP_POLICY,
    "FAKE_CONTEXTS": f"{MADE_CONTEXT} gke_other-project_us-central1-a_mnist-argo",
    "FAKE_CURRENT_CONTEXT": MADE_CONTEXT,
    "PAGE_DOMAIN": "mnist.example.com",
    "PAGE_IAP_MEMBERS": "user:a@example.com",
}
# Argo's release as the stand-in `kubectl kustomize` prints it: the three objects up.sh patches, written out
# here and not shared with lib.sh, so that the real `kubectl kustomize` shows each patch finds its object.
ARGO_MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata: {name: workflow-controller-configmap, namespace: argo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: workflow-controller, namespace: argo}
spec:
  selector: {matchLabels: {app: workflow-controller}}
  template:
    metadata: {labels: {app: workflow-controller}}
    spec:
      containers:
        - name: workflow-controller
          image: quay.io/argoproj/workflow-controller:v4.1.2
          env: [{name: LEADER_ELECTION_IDENTITY, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argo-server, namespace: argo}
spec:
  selector: {matchLabels: {app: argo-server}}
  template:
    metadata: {labels: {app: argo-server}}
    spec: {containers: [{name: argo-server, image: "quay.io/argoproj/argocli:v4.1.2"}]}
"""

# `describe` succeeds for the kinds listed in FAKE_EXISTING ("foreign-<kind>": it exists, but up.sh did not
# make it); lists answer from FAKE_* variables.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
echo "gcloud $*" >>"${FAKE_LOG}"
printf '%q ' "$@" >>"${FAKE_ARGV_LOG}"
printf '\n' >>"${FAKE_ARGV_LOG}"
# Keep a copy of each temporary file passed, which the script deletes, for the command's replay.
for argument in "$@"; do
    if [[ "${argument}" == "${TMPDIR}"/* && -f "${argument}" ]]; then cp "${argument}" "${argument}.kept"; fi
done
exists() { [[ " ${FAKE_EXISTING} " == *" $1 "* || " ${FAKE_EXISTING} " == *" foreign-$1 "* ]]; }
# What a describe of kind $1 prints for the label or description asked: up.sh's mark, unless foreign.
mark() {
    exists "$1" || exit 1
    [[ " ${FAKE_EXISTING} " == *" foreign-$1 "* ]] && { echo other; exit 0; }
    if [[ "$*" == *"value(description)"* ]]; then echo "Created by mnist-argo infra/gke/up.sh"; else echo mnist-argo-up; fi
}
case "$*" in
    "config get-value project") echo test-project ;;  # where PROJECT_ID is unset
    *"--format value(workloadIdentityConfig.workloadPool)"*)
        exists no-workload-identity || echo "${PROJECT_ID}.svc.id.goog" ;;
    *"--format value(controlPlaneEndpointsConfig"*)
        if exists open-control-plane; then printf '\t\n'; else printf 'True\tTrue\n'; fi ;;
    "container clusters describe"*"--format value(status,"*)
        exists cluster || exit 1
        label="$(mark cluster)"
        printf '%s\t%s\n' "${FAKE_CLUSTER_STATUS:-RUNNING}" "${label}" ;;
    "container clusters describe"*"--format value(resourceLabels."*) mark cluster "$*" ;;
    *"--format value(projectNumber)"*) echo 123456789 ;;
    *"--format value(image_summary.digest)"*) echo "sha256:$(printf '%064d' 7)" ;;
    "compute zones list"*) printf '%s\n' ${FAKE_ZONES} ;;
    "compute addresses describe"*"value(address)"*) echo 203.0.113.9 ;;
    "compute addresses describe"*) mark address "$*" ;;
    "container clusters list"*) ! exists cluster || printf 'mnist-argo\t%s\n' "${FAKE_CLUSTER_ZONE}" ;;
    "container node-pools describe default-pool"*"value(config.taints[].key)"*)
        exists untainted-system-pool || echo components.gke.io/gke-managed-components ;;
    "container node-pools describe"*) exists cluster ;;
    "container node-pools list"*) echo default-pool ;;
    "storage buckets describe gs://"*"-build "*) mark build-bucket "$*" ;;
    "storage buckets describe"*) mark bucket "$*" ;;
    "storage buckets get-iam-policy"*) printf '%b' "${FAKE_POLICY}" ;;
    "projects get-iam-policy"*) printf '%b' "${FAKE_PROJECT_POLICY}" ;;
    "iap web get-iam-policy"*) printf '%b' "${FAKE_IAP_POLICY}" ;;
    "iam service-accounts describe"*) mark account "$*" ;;
    "artifacts repositories describe"*) mark registry "$*" ;;
    # FAKE_MISSING_IMAGE: one image name (e.g. mnist-argo-train) absent while the others exist.
    "artifacts docker images describe"*)
        exists image && [[ -z "${FAKE_MISSING_IMAGE:-}" || "$*" != *"/${FAKE_MISSING_IMAGE}:"* ]] ;;
    # FAKE_BUILD_REFUSALS: a file holding how many builds are refused for a permission before one succeeds.
    "builds submit"*)
        refusals="$(cat "${FAKE_BUILD_REFUSALS:-/dev/null}" 2>/dev/null || true)"
        if [[ "${refusals:-0}" -gt 0 ]]; then
            echo $((refusals - 1)) >"${FAKE_BUILD_REFUSALS}"
            echo "ERROR: (gcloud.builds.submit) PERMISSION_DENIED: caller does not have permission" >&2
            exit 1
        fi ;;
    *) exit 0 ;;
esac
"""
# docker and curl log their calls and answer nothing.
LOG_ONLY = r"""#!/usr/bin/env bash
echo "${0##*/} $*" >>"${FAKE_LOG}"
"""
FAKE_KUBECTL = r"""#!/usr/bin/env bash
echo "kubectl $*" >>"${FAKE_LOG}"
case "$*" in
    "kustomize --load-restrictor=LoadRestrictionsNone https://github.com/argoproj/argo-workflows//manifests/cluster-install?ref="*)
        printf '%s' "${FAKE_ARGO_MANIFEST}" ;;
    "config get-contexts --output name") printf '%s\n' ${FAKE_CONTEXTS} ;;
    "config current-context") echo "${FAKE_CURRENT_CONTEXT}" ;;
    "config get-clusters" | "config get-users") printf 'NAME\n'; printf '%s\n' ${FAKE_CONTEXTS} ;;
    "create token"* | *" create token "*) echo fake-token ;;
    *"port-forward"*) sleep "${FAKE_PORT_FORWARD_SECONDS:-0}" ;;
    *"delete namespace"*) [[ -z "${FAKE_NAMESPACE_TIMES_OUT:-}" ]] || { echo "error: timed out" >&2; exit 1; } ;;
    # FAKE_QUOTA_PENDING, FAKE_INGRESS_PENDING: files holding how many reads find the quota counting one of
    # the two resources it bounds (a custom resource not discovered yet), or no backend service yet.
    *"get resourcequota mnist -o go-template={{with .spec.hard}}"*) printf 'count/workflows.argoproj.io requests.cpu ' ;;
    *"get resourcequota mnist -o go-template={{with .status.used}}"*)
        pending="$(cat "${FAKE_QUOTA_PENDING:-/dev/null}" 2>/dev/null || true)"
        if [[ "${pending:-0}" -gt 0 ]]; then echo $((pending - 1)) >"${FAKE_QUOTA_PENDING}"; printf 'requests.cpu '; exit 0; fi
        printf 'count/workflows.argoproj.io requests.cpu ' ;;
    *"get ingress mnist-page"*)
        pending="$(cat "${FAKE_INGRESS_PENDING:-/dev/null}" 2>/dev/null || true)"
        if [[ "${pending:-0}" -gt 0 ]]; then echo $((pending - 1)) >"${FAKE_INGRESS_PENDING}"; exit 0; fi
        printf '%s' "${FAKE_INGRESS_BACKENDS}" ;;
    *) cat >/dev/null 2>&1 || true ;;
esac
"""
# The programs the stand-ins replace: the sandbox's PATH holds no real one, so none can run by mistake.
FAKES = {
    "gcloud": FAKE_GCLOUD,
    "kubectl": FAKE_KUBECTL,
    "docker": LOG_ONLY,
    "curl": LOG_ONLY,
    "gke-gcloud-auth-plugin": "#!/usr/bin/env bash\nexit 0\n",
}

# A zone list as Compute Engine gives it: europe-west1 has no "-a", and europe-west10 must not pass for it.
ZONES = "us-central1-a us-central1-b us-central1-c europe-west1-d europe-west1-b europe-west10-a"


def system_bin(directory: Path) -> Path:
    """The machine's /usr/bin without the stood-in programs, as a folder of links."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir("/usr/bin"):
        if entry.name not in FAKES:
            (directory / entry.name).symlink_to(entry.path)
    return directory


@dataclass
class Sandbox:
    """A copy of infra/ to run the scripts in, the stand-ins on PATH, and the settings of a test project."""

    root: Path
    env: dict[str, str]
    log: Path
    argv_log: Path
    fakes: Path

    def run(
        self, script: str, check: bool = True, timeout: float = 60, **settings: str
    ) -> tuple[subprocess.CompletedProcess, list[str]]:
        """Run infra/gke/<script> once; return its result and the stand-ins' calls."""
        self.log.write_text("")
        result = subprocess.run(
            ["bash", str(self.root / "infra" / "gke" / script)],
            env={**self.env, **settings},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result, self.log.read_text().splitlines()

    def gcloud_argvs(self) -> list[list[str]]:
        """Every gcloud argv recorded since the sandbox was made, in order."""
        return [shlex.split(line) for line in self.argv_log.read_text().splitlines()]


def make_sandbox(tmp_path: Path, system: Path) -> Sandbox:
    shutil.copytree(ROOT / "infra", tmp_path / "repo" / "infra")
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    for name, body in FAKES.items():
        (fakes / name).write_text(body)
        (fakes / name).chmod(0o755)
    (tmp_path / "tmp").mkdir()
    log, argv_log = tmp_path / "calls.log", tmp_path / "gcloud-argv.log"
    argv_log.touch()
    env = {
        "PATH": f"{fakes}:{system}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path / "tmp"),
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "FAKE_LOG": str(log),
        "FAKE_ARGV_LOG": str(argv_log),
        "FAKE_ZONES": ZONES,
        "FAKE_CLUSTER_ZONE": "us-central1-c",
        "FAKE_INGRESS_BACKENDS": json.dumps({BACKEND_SERVICE: "HEALTHY"}),
        "FAKE_ARGO_MANIFEST": ARGO_MANIFEST,
        "PROJECT_ID": "test-project",
        "IMAGE_TAG": "abc1234",
    }
    return Sandbox(tmp_path / "repo", env, log, argv_log, fakes)
