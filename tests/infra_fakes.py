"""Stand-ins for `gcloud`, `kubectl`, `docker` and `gke-gcloud-auth-plugin`, to run infra/gke's scripts where no
Google Cloud project can be reached: each logs its call, and `gcloud` also records its exact argv (so the
real CLI can parse every command line afterwards, see test_infra_gcloud_cli.py) and answers the few queries
the scripts read, saying which resources already exist. The scripts themselves run for real."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import ROOT

PROJECT, PROJECT_NUMBER, TAG = "test-project", "123456789", "abc1234"
# The programs the stand-ins replace: the sandbox's PATH holds no real one, so none can run by mistake.
STOOD_IN = ("gcloud", "kubectl", "docker", "gke-gcloud-auth-plugin")

# `describe` succeeds for the kinds listed in FAKE_EXISTING; lists answer from FAKE_* variables.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
echo "gcloud $*" >>"${FAKE_LOG}"
printf '%q ' "$@" >>"${FAKE_ARGV_LOG}"
printf '\n' >>"${FAKE_ARGV_LOG}"
# Keep a copy of each temporary file passed, which the script deletes, for the command's replay.
for argument in "$@"; do
    if [[ "${argument}" == "${TMPDIR}"/* && -f "${argument}" ]]; then cp "${argument}" "${argument}.kept"; fi
done
exists() { [[ " ${FAKE_EXISTING} " == *" $1 "* ]]; }
case "$*" in
    "config get-value project") exit 0 ;;
    *"--format value(workloadIdentityConfig.workloadPool)"*)
        exists no-workload-identity || echo "${PROJECT_ID}.svc.id.goog" ;;
    *"--format value(projectNumber)"*) echo 123456789 ;;
    *"--format value(image_summary.digest)"*) echo "sha256:$(printf '%064d' 7)" ;;
    "builds get-default-service-account"*) echo 123456789-compute@developer.gserviceaccount.com ;;
    "compute zones list"*) printf '%s\n' ${FAKE_ZONES} ;;
    "container clusters list"*) ! exists cluster || printf 'mnist-argo\t%s\n' "${FAKE_CLUSTER_ZONE}" ;;
    "container clusters describe"*) exists cluster ;;
    "container node-pools list"*) echo default-pool ;;
    "storage buckets describe gs://"*"-build "*) exists build-bucket ;;
    "storage buckets describe"*) exists bucket ;;
    "storage buckets get-iam-policy"*) printf '%b' "${FAKE_POLICY}" ;;
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
    "config get-contexts --output name") printf '%s\n' ${FAKE_CONTEXTS} ;;
    "config current-context") echo "${FAKE_CURRENT_CONTEXT}" ;;
    "config get-clusters" | "config get-users") printf 'NAME\n'; printf '%s\n' ${FAKE_CONTEXTS} ;;
    "create token"* | *" create token "*) echo fake-token ;;
    *"port-forward"*) sleep "${FAKE_PORT_FORWARD_SECONDS:-0}" ;;
    *) cat >/dev/null 2>&1 || true ;;
esac
"""
FAKE_AUTH_PLUGIN = "#!/usr/bin/env bash\nexit 0\n"

# A zone list as Compute Engine gives it: europe-west1 has no "-a", and europe-west10 must not pass for it.
ZONES = "us-central1-a us-central1-b us-central1-c europe-west1-d europe-west1-b europe-west10-a"


def system_bin(directory: Path) -> Path:
    """The machine's /usr/bin without the stood-in programs, as a folder of links."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir("/usr/bin"):
        if entry.name not in STOOD_IN:
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
    for name, body in (
        ("gcloud", FAKE_GCLOUD),
        ("kubectl", FAKE_KUBECTL),
        ("docker", FAKE_DOCKER),
        ("gke-gcloud-auth-plugin", FAKE_AUTH_PLUGIN),
    ):
        (fakes / name).write_text(body)
        (fakes / name).chmod(0o755)
    (tmp_path / "tmp").mkdir()
    log, argv_log = tmp_path / "calls.log", tmp_path / "gcloud-argv.log"
    log.touch()
    argv_log.touch()
    env = {
        "PATH": f"{fakes}:{system}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path / "tmp"),
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "FAKE_LOG": str(log),
        "FAKE_ARGV_LOG": str(argv_log),
        "FAKE_EXISTING": "",
        "FAKE_ZONES": ZONES,
        "FAKE_CLUSTER_ZONE": "us-central1-c",
        "FAKE_POLICY": "",
        "FAKE_CONTEXTS": "",
        "FAKE_CURRENT_CONTEXT": "",
        "PROJECT_ID": PROJECT,
        "IMAGE_TAG": TAG,
    }
    return Sandbox(tmp_path / "repo", env, log, argv_log, fakes)
