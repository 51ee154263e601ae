"""Faults while a run trains (docs/failures.md, "On a real cluster"): it still ends Succeeded and publishes a
complete model LATEST names; a run ending in Error is deleted at its spec's TTL."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import pytest

from steps.lib import registry
from tests.support.cluster import Cluster, tries, wait_until
from tests.support.local_cluster import LOCAL_CLUSTER
from tests.support.project import FIXTURE_SEED
from workflows.pipeline.workflow import compile_workflow

pytestmark = pytest.mark.cluster

# Trainers that take about half a minute on the local cluster's node, long enough to be hurt mid-round.
LONG_ENOUGH = {"workers": 2, "rounds": 1, "epochs": 8, "batch": 32, "limit": 20000}
PUBLISHED = {registry.MODEL_FILE, registry.METRICS_FILE, registry.RUN_FILE, registry.CONFUSION_FILE}
PUBLISHED |= {registry.HISTORY_FILE, registry.HISTORY_PLOT}
KUBELET_DOWN_SECONDS = 30


def daemon(cluster: Cluster, script: str, name: str) -> None:
    """Stop (down.sh) or start (up.sh) one daemon of the local cluster."""
    if not cluster.local:
        pytest.skip(f"{name} is a process of the local cluster only (make cluster-up)")
    done = subprocess.run(
        ["bash", str(LOCAL_CLUSTER / script), name], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr


def delete_a_trainers_pod(cluster: Cluster, run: str) -> None:
    """`kubectl delete pod`, as a person or a node drain does: the pod gets its grace period."""
    pod = cluster.pod_of(run, "train-round-1(0:0)")
    cluster.kubectl("-n", cluster.namespace, "delete", "pod", pod)


def stop_the_kubelet(cluster: Cluster, run: str) -> None:
    daemon(cluster, "down.sh", "kubelet")
    time.sleep(KUBELET_DOWN_SECONDS)
    daemon(cluster, "up.sh", "kubelet")  # waits until the node is Ready again


def kill_the_controller(cluster: Cluster, run: str) -> None:
    """The controller's pod deleted at once, without its grace period; its Deployment makes another."""
    selector = "app=workflow-controller"
    cluster.kubectl("-n", "argo", "delete", "pod", "-l", selector, "--grace-period=0", "--force")
    cluster.kubectl(
        "-n", "argo", "rollout", "status", "deployment/workflow-controller", timeout=300
    )


def restart_the_api_server(cluster: Cluster, run: str) -> None:
    daemon(cluster, "down.sh", "kube-apiserver")
    daemon(cluster, "up.sh", "kube-apiserver")  # waits until it is ready again


FAULTS: dict[str, Callable[[Cluster, str], None]] = {
    "pod-deleted": delete_a_trainers_pod,
    "kubelet-stopped": stop_the_kubelet,
    "controller-killed": kill_the_controller,
    "api-server-restarted": restart_the_api_server,
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_run_hurt_mid_round_publishes_a_complete_model(cluster: Cluster, fault: str) -> None:
    name = f"mnist-{fault}-{secrets.token_hex(3)}"
    settings = cluster.settings(**LONG_ENOUGH, seed=FIXTURE_SEED, serve="always")
    cluster.create(compile_workflow(replace(settings, retry_backoff="2s")), name)
    checkpoint = f"{name}/round-1/checkpoints/0.npz"
    wait_until(f"{checkpoint} to be written", lambda: cluster.exists(checkpoint), 300, every=0.5)
    hurt = time.time()
    FAULTS[fault](cluster, name)
    recovered = time.time()
    workflow = cluster.finished(name)
    trainer = tries(workflow, "train-round-1(0:0)")
    retried = [datetime.fromisoformat(t["startedAt"]).timestamp() - hurt for t in trainer[1:]]
    ended = datetime.fromisoformat(workflow["status"]["finishedAt"]).timestamp() - hurt
    print(  # what docs/failures.md tables
        f"\n{fault}: back in {recovered - hurt:.0f} s; the run {workflow['status']['phase']}"
        f" {ended:.0f} s after the fault; train-round-1(0:0): "
        + ", ".join(f"{t['phase']} {t.get('message', '')[:70]!r}" for t in trainer)
        + (f"; its next try started {retried[0]:.0f} s after the fault" if retried else "")
    )
    assert workflow["status"]["phase"] == "Succeeded", workflow["status"].get("message")
    published = {key.rsplit("/", 1)[1] for key in cluster.keys(f"{registry.run_prefix(name)}/")}
    assert published >= PUBLISHED, sorted(published)
    assert cluster.read(registry.LATEST_KEY).decode().strip() == name


def test_a_run_that_ends_in_error_is_deleted_at_its_ttl(cluster: Cluster) -> None:
    """Argo itself fails it (an input artifact not in the bucket); deleted with its pods after the spec's
    ttlStrategy.secondsAfterCompletion (gccontroller/gc_controller.go: its Failed TTL counts only Failed)."""
    name = f"mnist-error-{secrets.token_hex(3)}"
    settings = cluster.settings(
        workers=1, rounds=1, epochs=1, limit=2000, seed=FIXTURE_SEED, serve="never", retries=0
    )
    workflow = compile_workflow(settings)
    evaluate = next(t for t in workflow["spec"]["templates"] if t["name"] == "evaluate")
    evaluate["inputs"]["artifacts"][0]["gcs"]["key"] = f"{name}/nothing-here.h5"
    ttl = 5
    workflow["spec"]["ttlStrategy"]["secondsAfterCompletion"] = ttl
    cluster.create(workflow, name)
    ended = cluster.finished(name)
    assert ended["status"]["phase"] == "Error", ended["status"]
    finished = datetime.fromisoformat(ended["status"]["finishedAt"])
    get = ("-n", cluster.namespace, "get", "workflow", name)
    wait_until(
        f"{name} to be deleted", lambda: cluster.kubectl(*get, check=False).returncode, ttl + 120
    )
    wait_until(f"{name}'s pods to be deleted with it", lambda: not cluster.pods(name), 120)
    print(
        f"\nError run deleted {(time.time() - finished.timestamp()):.0f} s after it ended (TTL {ttl} s)"
    )
