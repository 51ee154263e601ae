"""The cluster the cluster tests run on: the local one (`make cluster-up`, read from its .cluster/env) or any
existing cluster named by KUBECONFIG (and KUBE_CONTEXT), such as kind, k3d, minikube or GKE.

For an existing cluster, what is not given in the environment is found on the cluster: the Argo Server
through a `kubectl port-forward` the tests start and stop, a submitter token from `kubectl create token`, the
bucket from the namespace's artifact repository. Images (STEPS_IMAGE, TRAIN_IMAGE) and MNIST_SOURCE must be
ones that cluster can reach; with a GCS emulator, STORAGE_EMULATOR_HOST as the tests should reach it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.project import ROOT, free_port, run_submit, wait_for_port
from workflows.pipeline import cluster as names

LOCAL_ENV = ROOT / ".cluster" / "env"
# What submit.py and the tests read from the environment of a cluster run.
CLUSTER_VARIABLES = (
    "KUBECONFIG",
    "ARGO_SERVER",
    "ARGO_TOKEN",
    "ARGO_INSECURE_SKIP_VERIFY",
    "ARGO_NAMESPACE",
    "ARTIFACTS",
    "MNIST_SOURCE",
    "STORAGE_EMULATOR_HOST",
    "GOOGLE_CLOUD_PROJECT",
    "STEPS_IMAGE",
    "TRAIN_IMAGE",
    "PAGE_IMAGE",
    "PATH",
)
NO_CLUSTER = (
    "no cluster to test on: run `make test-cluster` (or `make cluster-up` first), or set KUBECONFIG "
    "(and KUBE_CONTEXT) to an existing cluster with Argo and infra/k8s applied"
)


class ClusterError(AssertionError):
    """The cluster did not answer as a test needs; the message says what was asked and what it said."""


@dataclass
class Cluster:
    """One cluster: how to reach its API server, its Argo Server and its bucket."""

    env: dict[str, str]
    context: str | None = None
    local: bool = False
    # What the tests started for this cluster (port-forwards), stopped by close().
    processes: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def bucket(self) -> str:
        return self.env["ARTIFACTS"].removeprefix("gs://").split("/", 1)[0]

    @property
    def namespace(self) -> str:
        return self.env.get("ARGO_NAMESPACE", names.NAMESPACE)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        context = ["--context", self.context] if self.context else []
        done = subprocess.run(
            ["kubectl", *context, *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.process_env(),
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise ClusterError(f"kubectl {shlex.join(args)}: {done.stderr.strip()}")
        return done

    def get(self, *args: str) -> Any:
        """`kubectl get ARGS -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def process_env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, **self.env, **extra}

    def submit(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        """`python workflows/submit.py` against this cluster's Argo Server, with its store and images."""
        return run_submit(
            "--argo-server",
            self.env["ARGO_SERVER"],
            "--artifacts",
            self.env["ARTIFACTS"],
            "--image",
            self.env["STEPS_IMAGE"],
            "--train-image",
            self.env["TRAIN_IMAGE"],
            *args,
            env=self.process_env(),
            timeout=timeout,
        )

    def storage(self) -> Any:
        """A google-cloud-storage client for the bucket, as this cluster's environment says."""
        from google.cloud import storage

        previous = {name: os.environ.get(name) for name in ("STORAGE_EMULATOR_HOST",)}
        try:
            if "STORAGE_EMULATOR_HOST" in self.env:
                os.environ["STORAGE_EMULATOR_HOST"] = self.env["STORAGE_EMULATOR_HOST"]
            return storage.Client(project=self.env.get("GOOGLE_CLOUD_PROJECT", "local"))
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def keys(self, prefix: str) -> list[str]:
        return sorted(blob.name for blob in self.storage().list_blobs(self.bucket, prefix=prefix))

    def read(self, key: str) -> bytes:
        return self.storage().bucket(self.bucket).blob(key).download_as_bytes()

    def workflow(self, name: str) -> dict:
        return self.get("workflow", name, "-n", self.namespace)

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


def task_nodes(workflow: dict) -> dict[str, dict]:
    """The controller's node of each DAG task by its display name: a Retry node (its tries are Pod nodes
    named after it with `(N)`), or the Pod of a template without retries."""
    return {
        node["displayName"]: node
        for node in workflow["status"]["nodes"].values()
        if node["type"] == "Retry"
        or (node["type"] == "Pod" and not node["displayName"].endswith(")"))
    }


def sourced(env_file: Path) -> dict[str, str]:
    """The variables `source ENV_FILE` sets in bash, of those the cluster tests read."""
    script = f"set -a; source {shlex.quote(str(env_file))}; env -0"
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, check=True, env={"PATH": os.environ["PATH"]}
    )
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return {name: value for name, value in pairs if name in CLUSTER_VARIABLES}


def from_environment(environ: Mapping[str, str] = os.environ) -> Cluster:
    """The cluster to test: KUBECONFIG's if it is set, else the local cluster's; neither fails the test."""
    if environ.get("KUBECONFIG"):
        given = {name: environ[name] for name in CLUSTER_VARIABLES if environ.get(name)}
        return existing_cluster(given, context=environ.get("KUBE_CONTEXT") or None)
    if LOCAL_ENV.is_file():
        return Cluster(env=sourced(LOCAL_ENV), local=True)
    raise ClusterError(NO_CLUSTER)


def existing_cluster(given: dict[str, str], context: str | None = None) -> Cluster:
    """A cluster known only by its kubeconfig and what is GIVEN; the rest is asked of the cluster."""
    target = Cluster(env=dict(given), context=context)
    target.env.setdefault("ARGO_NAMESPACE", names.NAMESPACE)
    missing = [name for name in ("STEPS_IMAGE", "TRAIN_IMAGE", "MNIST_SOURCE") if name not in given]
    if missing:
        raise ClusterError(
            f"set {', '.join(missing)} for the cluster at KUBECONFIG: images it can pull and an "
            "mnist.npz its pods can read (a gs:// URI)"
        )
    if "ARTIFACTS" not in given:
        target.env["ARTIFACTS"] = f"gs://{repository_bucket(target)}"
    if "ARGO_TOKEN" not in given:
        token = target.kubectl(
            "-n", target.namespace, "create", "token", names.SUBMITTER_ACCOUNT, "--duration", "1h"
        ).stdout.strip()
        target.env["ARGO_TOKEN"] = f"Bearer {token}"
    if "ARGO_SERVER" not in given:
        target.env["ARGO_SERVER"] = f"https://127.0.0.1:{port_forward(target)}"
        target.env["ARGO_INSECURE_SKIP_VERIFY"] = "true"
    return target


def repository_bucket(target: Cluster) -> str:
    """The bucket of the namespace's default artifact repository (infra/k8s/base/artifact-repositories.yaml)."""
    config = target.get("configmap", "artifact-repositories", "-n", target.namespace)
    key = config["metadata"]["annotations"]["workflows.argoproj.io/default-artifact-repository"]
    return yaml.safe_load(config["data"][key])["gcs"]["bucket"]


def port_forward(
    target: Cluster,
    resource: str = "service/argo-server",
    remote: int = 2746,
    namespace: str = "argo",
) -> int:
    """`kubectl port-forward` to RESOURCE's port REMOTE (by default the Argo Server's) on a free local
    port; stopped by its PID at close()."""
    port = free_port()
    context = ["--context", target.context] if target.context else []
    process = subprocess.Popen(
        ["kubectl", *context, "-n", namespace, "port-forward", resource, f"{port}:{remote}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=target.process_env(),
    )
    target.processes.append(process)
    wait_for_port(port, timeout=60)
    return port


@contextmanager
def opened(target: Cluster) -> Iterator[Cluster]:
    try:
        yield target
    finally:
        target.close()


def wait_until(what: str, check: Any, timeout: float, every: float = 1.0) -> Any:
    """check() until it returns something true; that value, or ClusterError naming WHAT."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
