"""The cluster the cluster tests run on: the local one (.cluster/env) or KUBECONFIG's (and KUBE_CONTEXT's)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from tests.support.project import ROOT, SUBMIT, free_port, run_submit, wait_for_port
from workflows.pipeline import resources as names
from workflows.pipeline.settings import PipelineSettings
from workflows.server.client import ArgoServer, create_workflow
from workflows.server.client import from_environment as argo_server_from

LOCAL_ENV = ROOT / ".cluster" / "env"
# What submit.py and the tests read from the environment of a cluster run.
CLUSTER_VARIABLES = (
    *("KUBECONFIG", "ARGO_SERVER", "ARGO_TOKEN", "ARGO_INSECURE_SKIP_VERIFY", "ARGO_NAMESPACE"),
    *("ARTIFACTS", "MNIST_SOURCE", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT", "STEPS_IMAGE"),
    *("TRAIN_IMAGE", "PAGE_IMAGE", "PAGE_URL", "PATH"),  # PAGE_URL: the page the Argo UI links to
)
NO_CLUSTER = (
    "no cluster to test on: run `make test-cluster` (or `make cluster-up` first), or set KUBECONFIG "
    "(and KUBE_CONTEXT) to an existing cluster with Argo and infra/k8s applied"
)
SUBMITTED = re.compile(r"^submitted (\S+) to ", re.MULTILINE)
ENDED = ("Succeeded", "Failed", "Error")
NODE_NAME_ANNOTATION = "workflows.argoproj.io/node-name"  # on every pod: its node's full name


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
        return run_submit(*self.submit_arguments(*args), env=self.process_env(), timeout=timeout)

    def submit_command(self, *args: str) -> list[str]:
        """The command line of `submit`, to start it as a process of one's own."""
        return [sys.executable, SUBMIT, *self.submit_arguments(*args)]

    def submit_arguments(self, *args: str) -> list[str]:
        flags = {"--argo-server": "ARGO_SERVER", "--artifacts": "ARTIFACTS"}
        flags |= {"--image": "STEPS_IMAGE", "--train-image": "TRAIN_IMAGE"}
        return [*(part for flag, name in flags.items() for part in (flag, self.env[name])), *args]

    def storage(self) -> Any:
        """A google-cloud-storage client for the bucket, as this cluster's environment says."""
        from google.cloud import storage

        emulator = {k: v for k, v in self.env.items() if k == "STORAGE_EMULATOR_HOST"}
        with mock.patch.dict(os.environ, emulator):  # the client reads it once, when made
            return storage.Client(project=self.env.get("GOOGLE_CLOUD_PROJECT", "local"))

    def keys(self, prefix: str) -> list[str]:
        return sorted(blob.name for blob in self.storage().list_blobs(self.bucket, prefix=prefix))

    def read(self, key: str) -> bytes:
        return self.storage().bucket(self.bucket).blob(key).download_as_bytes()

    def workflow(self, name: str) -> dict:
        return self.get("workflow", name, "-n", self.namespace)

    @property
    def argo_server(self) -> ArgoServer:
        """The Argo Server as the submitter reaches it (ARGO_SERVER, ARGO_TOKEN, ...)."""
        server = argo_server_from(self.env)
        assert server is not None, "no ARGO_SERVER for this cluster"
        return server

    def settings(self, **changes: Any) -> PipelineSettings:
        """Pipeline settings for a run on this cluster: its bucket, MNIST in it and its images."""
        where = {"store": self.env["ARTIFACTS"], "source": self.env["MNIST_SOURCE"]}
        where |= {"image": self.env["STEPS_IMAGE"], "train_image": self.env["TRAIN_IMAGE"]}
        return PipelineSettings(**(where | changes))

    def create(self, workflow: dict, name: str) -> str:
        """Submit a compiled (perhaps altered) Workflow through the Argo Server as the submitter."""
        metadata = {k: v for k, v in workflow["metadata"].items() if k != "generateName"}
        workflow = workflow | {"metadata": metadata | {"name": name}}
        return str(create_workflow(self.argo_server, workflow)["metadata"]["name"])

    def phase(self, name: str) -> str:
        return self.workflow(name).get("status", {}).get("phase", "")

    def finished(self, name: str, timeout: float = 900) -> dict:
        """The run once it has ended (Succeeded, Failed or Error)."""
        wait_until(f"run {name} to end", lambda: self.phase(name) in ENDED, timeout, every=2)
        return self.workflow(name)

    def put(self, key: str, data: bytes) -> str:
        """Write DATA at KEY in the bucket; its gs:// URI."""
        self.storage().bucket(self.bucket).blob(key).upload_from_string(data)
        return f"gs://{self.bucket}/{key}"

    def exists(self, key: str) -> bool:
        return bool(self.storage().bucket(self.bucket).blob(key).exists())

    def pods(self, run: str) -> list[dict]:
        selector = f"workflows.argoproj.io/workflow={run}"
        return list(self.get("pods", "-n", self.namespace, "-l", selector)["items"])

    def running_pods(self, run: str, template: str) -> list[str]:
        """The names of the run's pods of TEMPLATE whose main container runs."""
        return [
            pod["metadata"]["name"]
            for pod in self.pods(run)
            if pod["metadata"].get("labels", {}).get(f"{names.APP_LABEL}/step") == template
            and any(
                status["name"] == "main" and "running" in status.get("state", {})
                for status in pod["status"].get("containerStatuses", [])
            )
        ]

    def pod_of(self, run: str, task: str, timeout: float = 300) -> str:
        """The pod running TASK's current try (its node name ends in `.TASK(N)` or `.TASK`)."""

        def running() -> str | None:
            for pod in self.pods(run):
                node = pod["metadata"].get("annotations", {}).get(NODE_NAME_ANNOTATION, "")
                if node.rsplit(".", 1)[-1].startswith(task) and pod["status"]["phase"] == "Running":
                    return str(pod["metadata"]["name"])
            return None

        return str(wait_until(f"a running pod of {run}'s {task}", running, timeout, every=0.5))

    def kill_step(self, pod: str) -> None:
        """SIGKILL every process of the step's container but PID 1 (Argo's emissary), as the OOM killer does."""
        kill = "import os, signal; os.kill(-1, signal.SIGKILL)"
        self.kubectl("-n", self.namespace, "exec", pod, "-c", "main", "--", "python", "-c", kill)

    def log(self, workflow: dict, node: dict) -> str:
        """A Pod node's log as the controller archived it in the bucket (archiveLogs)."""
        return self.read(archived_log(workflow, node)).decode(errors="replace")

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


@dataclass(frozen=True)
class Run:
    name: str
    output: str


def submitted(cluster: Cluster, *args: str) -> Run:
    """The run `submit.py ARGS` submitted, once it exited 0, and what it printed."""
    done = cluster.submit(*args)
    assert done.returncode == 0, (
        f"submit.py exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    match = SUBMITTED.search(done.stdout)
    assert match, done.stdout
    return Run(match[1], done.stdout)


def archived_log(workflow: dict, node: dict) -> str:
    """RUN/RUN-TEMPLATE-HASH/main.log, the node's ID being RUN-HASH (Argo's workflow/util/pod_name.go)."""
    name = workflow["metadata"]["name"]
    return f"{name}/{name}-{node['templateName']}-{node['id'].rsplit('-', 1)[1]}/main.log"


def tries(workflow: dict, task: str) -> list[dict]:
    """The Pod nodes of one DAG task, oldest first: a Retry node's children, or the task's one Pod."""
    nodes = workflow["status"]["nodes"]
    node = task_nodes(workflow)[task]
    if node["type"] != "Retry":
        return [node]
    return [nodes[child] for child in node.get("children", []) if nodes[child]["type"] == "Pod"]


def task_nodes(workflow: dict) -> dict[str, dict]:
    """Each DAG task's Retry node (its tries are Pods named `TASK(N)`), or its one Pod, by display name."""
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
    """`kubectl port-forward` to RESOURCE's port REMOTE on a free local port; stopped by its PID at close()."""
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
