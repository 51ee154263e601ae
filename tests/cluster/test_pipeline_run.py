"""The pipeline on a real cluster as a user submits it (`submit.py --watch`), its artifacts and its model."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import requests
import urllib3  # noqa: F401  (its warning is filtered by name)
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import Cluster, Run, port_forward, submitted
from tests.support.project import ROOT, run_python
from workflows.pipeline import resources as names

pytestmark = pytest.mark.cluster

# --serve always: other cluster tests publish better models, and LATEST must name this run.
SMALL_RUN = (
    *("--limit", "6000", "--workers", "2", "--rounds", "2"),
    *("--epochs", "1", "--serve", "always"),
)


@pytest.fixture(scope="module")
def small_run(cluster: Cluster) -> Run:
    return submitted(cluster, *SMALL_RUN, "--watch")


def test_the_small_run_succeeds(cluster: Cluster, small_run: Run) -> None:
    assert f"run {small_run.name} Succeeded" in small_run.output
    workflow = cluster.workflow(small_run.name)
    assert workflow["status"]["phase"] == "Succeeded"
    pods = [node for node in workflow["status"]["nodes"].values() if node["type"] == "Pod"]
    # split, init, 2 rounds of (2 trainers + aggregate), evaluate, publish
    assert len(pods) == 2 + 2 * 3 + 2, sorted(node["displayName"] for node in pods)
    assert {node["phase"] for node in pods} == {"Succeeded"}


def test_every_pod_of_the_run_was_admitted_under_pod_security_restricted(
    cluster: Cluster, small_run: Run
) -> None:
    """The namespace enforces `restricted`, and none of the API server's warnings or refusals names the run."""
    labels = cluster.get("namespace", cluster.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    events = cluster.get("events", "-n", cluster.namespace)["items"]
    refusals = [  # of this run: other tests' refused escapes leave events of their own
        event["message"]
        for event in events
        if "PodSecurity" in event.get("message", "")
        and (
            small_run.name in event["message"]
            or event.get("involvedObject", {}).get("name", "").startswith(small_run.name)
        )
    ]
    assert not refusals, refusals


def test_the_artifacts_are_in_the_bucket_under_the_specs_keys(
    cluster: Cluster, small_run: Run
) -> None:
    """argoexec stored every output artifact the controller recorded under its key (a folder's files under it)."""
    keys = set(cluster.keys(f"{small_run.name}/"))
    recorded = {
        artifact["gcs"]["key"]
        for node in cluster.workflow(small_run.name)["status"]["nodes"].values()
        for artifact in (node.get("outputs") or {}).get("artifacts") or []
    }
    assert len(recorded) > 10, recorded
    for key in recorded:
        assert key in keys or any(k.startswith(f"{key}/") for k in keys), key
    for key in ("shards/0.npz", "shards/1.npz", "test.npz", "init/model.h5", "round-2/model.h5"):
        assert f"{small_run.name}/{key}" in keys, sorted(keys)


def test_latest_names_the_run_and_the_page_and_predict_serve_it(
    cluster: Cluster, small_run: Run
) -> None:
    latest = cluster.read("models/mnist/LATEST").decode().strip()
    assert latest == small_run.name
    published = cluster.keys(f"models/mnist/{small_run.name}/")
    assert f"models/mnist/{small_run.name}/model.h5" in published, published
    predicted = run_python(
        "from ui.predict import main; raise SystemExit(main())",
        str(ROOT / "samples" / "7-mnist.png"),
        env=cluster.process_env(MODEL_URI=f"gs://{cluster.bucket}/models/mnist/LATEST"),
        timeout=300,
    )
    assert predicted.returncode == 0, predicted.stderr
    answer = json.loads(predicted.stdout.splitlines()[0])
    assert answer["run"] == small_run.name if "run" in answer else True
    assert 0 <= answer["digit"] <= 9


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_controller_exports_the_runs_accuracy_and_duration(
    cluster: Cluster, small_run: Run
) -> None:
    """docs/argo.md's port-forward to the controller's metrics serves the run's accuracy and duration gauges."""
    port = port_forward(cluster, "deployment/workflow-controller", 9090, "argo")
    text = requests.get(f"https://127.0.0.1:{port}/metrics", verify=False, timeout=30).text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    workflow = cluster.workflow(small_run.name)
    accuracy = next(
        float(parameter["value"])
        for node in workflow["status"]["nodes"].values()
        if node.get("templateName") == "evaluate" and node["type"] == "Pod"
        for parameter in node["outputs"]["parameters"]
        if parameter["name"] == "accuracy"
    )
    assert samples[(f"argo_workflows_{names.ACCURACY_METRIC}", ())] == accuracy
    duration = samples[(f"argo_workflows_{names.DURATION_METRIC}", (("status", "Succeeded"),))]
    started, finished = (
        datetime.fromisoformat(workflow["status"][k]) for k in ("startedAt", "finishedAt")
    )
    assert abs(duration - (finished - started).total_seconds()) <= 5, duration


def test_argos_controller_and_server_run_with_a_memory_limit(cluster: Cluster) -> None:
    """As infra/gke/lib.sh's argo_resources sets it, not lost to the local cluster's own patch."""
    for name in ("workflow-controller", "argo-server"):
        limit = cluster.kubectl(
            "-n", "argo", "get", "deployment", name,
            "-o", "jsonpath={.spec.template.spec.containers[0].resources.limits.memory}",
        ).stdout  # fmt: skip
        assert limit == "1Gi", name


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_run_from_the_registered_template_succeeds_and_its_logs_are_served(
    cluster: Cluster,
) -> None:
    registered = cluster.submit("--register")
    assert registered.returncode == 0, registered.stderr
    run = submitted(cluster, *SMALL_RUN, "--rounds", "1", "--from-template", "--watch")
    assert f"run {run.name} Succeeded" in run.output
    workflow = cluster.workflow(run.name)
    assert workflow["spec"]["workflowTemplateRef"]["name"] == names.TEMPLATE_NAME
    evaluate = next(
        node
        for node in workflow["status"]["nodes"].values()
        if node.get("templateName") == "evaluate" and node["type"] == "Pod"
    )
    # The pods are gone (podGC): the server serves the archived log (server/artifacts/artifact_server.go).
    logs = requests.get(
        f"{cluster.env['ARGO_SERVER']}/artifact-files/{cluster.namespace}/workflows/{run.name}/"
        f"{evaluate['id']}/outputs/main-logs",
        headers={"Authorization": cluster.env["ARGO_TOKEN"]},
        verify=False,
        timeout=60,
    )
    assert logs.status_code == 200, logs.text
    assert "accuracy" in logs.text, logs.text[:2000]
