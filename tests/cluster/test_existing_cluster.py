"""The cluster tests on a cluster known only by its kubeconfig (kind, k3d, minikube, GKE), tried on this
cluster given that way: the Argo Server found through a port-forward the tests start and stop, the
submitter's token made with `kubectl create token`, the bucket read from the artifact repository."""

from __future__ import annotations

import pytest

from tests.support.cluster import CLUSTER_VARIABLES, Cluster, existing_cluster, opened

pytestmark = pytest.mark.cluster

# What a user of another cluster gives: its kubeconfig, images its nodes hold, a dataset its pods reach,
# and, for a GCS emulator, where the tests reach it.
GIVEN = (
    "KUBECONFIG",
    "STEPS_IMAGE",
    "TRAIN_IMAGE",
    "MNIST_SOURCE",
    "STORAGE_EMULATOR_HOST",
    "PATH",
)


def test_a_cluster_given_by_its_kubeconfig_alone_runs_the_pipeline(cluster: Cluster) -> None:
    given = {name: cluster.env[name] for name in GIVEN if name in cluster.env}
    assert set(GIVEN) - set(given) <= {"STORAGE_EMULATOR_HOST"}, CLUSTER_VARIABLES
    with opened(existing_cluster(given)) as other:
        assert other.env["ARGO_SERVER"].startswith("https://127.0.0.1:"), "a port-forward"
        assert other.env["ARGO_TOKEN"].startswith("Bearer ")
        assert other.bucket == cluster.bucket, "read from the namespace's artifact repository"
        done = other.submit(
            "--limit", "3000", "--workers", "2", "--rounds", "1", "--epochs", "1", "--watch"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert " Succeeded" in done.stdout
        (forward,) = other.processes
    assert forward.poll() is not None, "the port-forward was stopped"
