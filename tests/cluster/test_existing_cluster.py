"""A cluster known only by its kubeconfig (kind, k3d, GKE), tried on this one: the Argo Server through a
port-forward, the submitter's token from `kubectl create token`, the bucket from the artifact repository."""

from __future__ import annotations

from contextlib import closing

import pytest

from tests.support.cluster import CLUSTER_VARIABLES, Cluster, existing_cluster

pytestmark = pytest.mark.cluster

# What a user of another cluster gives: its kubeconfig, images its nodes hold, a dataset its pods reach.
GIVEN = ("KUBECONFIG", "STEPS_IMAGE", "TRAIN_IMAGE", "MNIST_SOURCE", "PATH")
EMULATOR = "STORAGE_EMULATOR_HOST"  # for a GCS emulator, where the tests reach it


def test_a_cluster_given_by_its_kubeconfig_alone_runs_the_pipeline(cluster: Cluster) -> None:
    given = {name: cluster.env[name] for name in (*GIVEN, EMULATOR) if name in cluster.env}
    assert set(GIVEN) <= set(given), CLUSTER_VARIABLES
    with closing(existing_cluster(given)) as other:
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
