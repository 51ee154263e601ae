"""The local runner against the real controller: one small run, the same name, seed, settings and data on
both engines, compared node by node (docs/local-runner.md, "The local runner against the controller"): the
nodes' phases, the output parameters, the files under the same keys (not the .npz bytes: the zip framing
depends on the Python), split's arrays, the published card. The accuracy may differ in
its last bits: TensorFlow sums in an order that depends on its thread count."""

from __future__ import annotations

import io
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support.cluster import Cluster, archived_log, task_nodes
from tests.support.project import run_submit

pytestmark = pytest.mark.cluster

# --serve never: publish's verdict depends on what LATEST served before, which differs between the stores
SMALL_RUN = ("--limit", "3000", "--workers", "2", "--rounds", "1", "--epochs", "1", "--seed", "7")
SMALL_RUN += ("--serve", "never")
ACCURACY_TOLERANCE = (
    0.01  # a few test digits either way; a lost shard or another seed moves it far more
)
SPLIT_FILES = ("shards/0.npz", "shards/1.npz", "test.npz", "validation.npz")


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
    paths = (f"--artifacts={store}", f"--logs-dir={logs}", f"--source={source}")
    here = run_submit(
        "--local", *SMALL_RUN, "--name", name, *paths, *images, env=cluster.process_env()
    )
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
        parameters = (node.get("outputs") or {}).get("parameters") or []
        cluster = {p["name"]: p.get("value") for p in parameters}
        local = both.local_nodes[name]["outputs"]
        if "accuracy" in cluster:
            difference = float(cluster.pop("accuracy")) - float(local.pop("accuracy"))
            assert abs(difference) <= ACCURACY_TOLERANCE
        assert local == cluster, name


def local_files(store: Path, prefix: str) -> dict[str, Path]:
    root = store / prefix
    return {str(path.relative_to(store)): path for path in root.rglob("*") if path.is_file()}


def test_the_same_files_under_the_same_keys(cluster: Cluster, both: Both) -> None:
    """The bucket holds the local store's files under the same keys, and the pods' logs; every key the
    controller recorded is one of them or a folder of them."""
    workflow = cluster.workflow(both.name)
    nodes = workflow["status"]["nodes"].values()
    logs = {archived_log(workflow, node) for node in nodes if node["type"] == "Pod"}  # archiveLogs
    bucket = set(cluster.keys(f"{both.name}/"))
    local = set(local_files(both.store, both.name))
    assert logs <= bucket
    assert local == bucket - logs
    recorded = {
        artifact["gcs"]["key"]
        for node in nodes
        for artifact in (node.get("outputs") or {}).get("artifacts") or []
        if "gcs" in artifact
    }
    for key in recorded - logs:
        assert key in local or any(k.startswith(f"{key}/") for k in local), key


def test_split_writes_the_same_arrays(cluster: Cluster, both: Both) -> None:
    for file in SPLIT_FILES:
        key = f"{both.name}/{file}"
        with np.load(io.BytesIO(cluster.read(key))) as there, np.load(both.store / key) as here:
            assert there.files == here.files, key
            for array in there.files:
                assert np.array_equal(there[array], here[array]), f"{key}: {array}"


def test_the_same_published_card(cluster: Cluster, both: Both) -> None:
    prefix = f"models/mnist/{both.name}"
    assert set(local_files(both.store, prefix)) == set(cluster.keys(f"{prefix}/"))
    there = json.loads(cluster.read(f"{prefix}/run.json"))
    here = json.loads((both.store / prefix / "run.json").read_text())
    for card in (there, here):
        card.pop("published_at")
    assert abs(there.pop("accuracy") - here.pop("accuracy")) <= ACCURACY_TOLERANCE
    assert here == there
