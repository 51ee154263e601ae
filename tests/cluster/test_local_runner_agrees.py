"""The local runner against the real controller: one small run, the same name, seed, settings and data, on
both engines, compared node by node (docs/local-runner.md, "The local runner against the controller").

What must agree exactly: the DAG's nodes and their phases, every output parameter but the accuracy, the
artifacts' keys and the files under them (but the pods' logs, which the controller archives in the bucket
and the local runner keeps in its logs folder), the arrays split writes and init's weights, the published
run's card but its time and accuracy. The .npz files' bytes need not agree: the zip framing depends on the
Python that wrote them (the image's Debian 3.11 writes a ZIP64 version field that a newer 3.11 rewrites).
The accuracy and the trained weights may differ in the last bits of floating point: TensorFlow sums in an
order that depends on its thread count, which the local runner sets from this machine's cores and a pod
from its CPU limit."""

from __future__ import annotations

import io
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from tests.support.cluster import Cluster, archived_log, task_nodes
from tests.support.project import run_submit

pytestmark = pytest.mark.cluster

# --serve never: publish's verdict depends on what LATEST served before, which differs between the bucket
# and a new local store; neither run then moves the cluster's LATEST.
SMALL_RUN = ("--limit", "3000", "--workers", "2", "--rounds", "1", "--epochs", "1", "--seed", "7")
SMALL_RUN += ("--serve", "never")
# The accuracy of two models trained alike but summed in another order: a few test digits either way
# out of the 3000 * 0.2 held out; a real difference (a shard lost, another seed) moves it by far more.
ACCURACY_TOLERANCE = 0.01
# Arrays that depend only on the data and the seed, not on floating point.
SPLIT_FILES = ("shards/0.npz", "shards/1.npz", "test.npz", "validation.npz")
INIT_MODEL = "init/model.h5"


@dataclass(frozen=True)
class Both:
    name: str
    cluster_nodes: dict[str, dict]  # task nodes by display name
    local_nodes: dict[str, dict]  # summary.json's nodes by name
    store: Path  # the local run's folder store


@pytest.fixture(scope="module")
def both(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Both:
    name = f"mnist-agree-{secrets.token_hex(3)}"
    on_cluster = cluster.submit(*SMALL_RUN, "--name", name, "--watch")
    assert on_cluster.returncode == 0, on_cluster.stdout + on_cluster.stderr
    folder = tmp_path_factory.mktemp("local")
    images = ("--image", cluster.env["STEPS_IMAGE"], "--train-image", cluster.env["TRAIN_IMAGE"])
    store, logs, source = folder / "store", folder / "logs", cluster.env["MNIST_SOURCE"]
    arguments = (
        "--local",
        *SMALL_RUN,
        "--name",
        name,
        "--artifacts",
        str(store),
        "--logs-dir",
        str(logs),
    )
    here = run_submit(*arguments, "--source", source, *images, env=cluster.process_env())
    assert here.returncode == 0, here.stdout + here.stderr
    summary = json.loads((folder / "logs" / name / "summary.json").read_text())
    return Both(
        name=name,
        cluster_nodes=task_nodes(cluster.workflow(name)),
        local_nodes={node["name"]: node for node in summary["nodes"]},
        store=folder / "store",
    )


def test_the_same_nodes_end_in_the_same_phases(both: Both) -> None:
    cluster = {name: node["phase"] for name, node in both.cluster_nodes.items()}
    local = {name: node["phase"] for name, node in both.local_nodes.items()}
    assert local == cluster
    assert set(local.values()) == {"Succeeded"}


def test_the_same_output_parameters(both: Both) -> None:
    for name, node in both.cluster_nodes.items():
        cluster = {
            p["name"]: p.get("value") for p in (node.get("outputs") or {}).get("parameters") or []
        }
        local = both.local_nodes[name]["outputs"]
        if "accuracy" in cluster:
            assert (
                abs(float(cluster.pop("accuracy")) - float(local.pop("accuracy")))
                <= ACCURACY_TOLERANCE
            )
        assert local == cluster, name


def local_files(store: Path, prefix: str) -> dict[str, Path]:
    root = store / prefix
    return {str(path.relative_to(store)): path for path in root.rglob("*") if path.is_file()}


def archived_logs(workflow: dict) -> set[str]:
    """The keys of the pods' logs the controller archives (archiveLogs)."""
    return {
        archived_log(workflow, node)
        for node in workflow["status"]["nodes"].values()
        if node["type"] == "Pod"
    }


def test_the_same_files_under_the_same_keys(cluster: Cluster, both: Both) -> None:
    """The bucket holds the local store's files under the same keys, and the pods' logs; every key the
    controller recorded is one of them or a folder of them."""
    workflow = cluster.workflow(both.name)
    logs = archived_logs(workflow)
    bucket = set(cluster.keys(f"{both.name}/"))
    local = set(local_files(both.store, both.name))
    assert logs <= bucket
    assert local == bucket - logs
    recorded = {
        artifact["gcs"]["key"]
        for node in workflow["status"]["nodes"].values()
        for artifact in (node.get("outputs") or {}).get("artifacts") or []
        if "gcs" in artifact
    }
    for key in recorded - logs:
        assert key in local or any(k.startswith(f"{key}/") for k in local), key


def test_split_writes_the_same_arrays_and_init_the_same_weights(
    cluster: Cluster, both: Both
) -> None:
    for file in SPLIT_FILES:
        key = f"{both.name}/{file}"
        with np.load(io.BytesIO(cluster.read(key))) as there, np.load(both.store / key) as here:
            assert there.files == here.files, key
            for array in there.files:
                assert np.array_equal(there[array], here[array]), f"{key}: {array}"
    key = f"{both.name}/{INIT_MODEL}"
    there, here = weights(io.BytesIO(cluster.read(key))), weights(both.store / key)
    assert there.keys() == here.keys()
    for dataset, values in there.items():
        assert np.array_equal(values, here[dataset]), dataset


def weights(file: Any) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 model file by its path."""
    found: dict[str, np.ndarray] = {}
    with h5py.File(file, "r") as model:
        model.visititems(
            lambda path, item: (
                found.__setitem__(path, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return found


def test_the_same_published_card(cluster: Cluster, both: Both) -> None:
    prefix = f"models/mnist/{both.name}"
    assert set(local_files(both.store, prefix)) == set(cluster.keys(f"{prefix}/"))
    there = json.loads(cluster.read(f"{prefix}/run.json"))
    here = json.loads((both.store / prefix / "run.json").read_text())
    for card in (there, here):
        card.pop("published_at")
    assert abs(there.pop("accuracy") - here.pop("accuracy")) <= ACCURACY_TOLERANCE
    assert here == there
