"""A run whose publish fails, on the cluster: `--list` shows it Failed, and `--retry`, once the cause is
gone, runs only publish again, the trainers' work kept, and the run ends Succeeded."""

from __future__ import annotations

import copy
import secrets

import pytest

from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster

ALLOWED = "retry-test/allowed"  # publish fails while the bucket holds no such object
QUICK = {"workers": 2, "rounds": 1, "epochs": 1, "batch": 32, "limit": 3000, "retries": 0}


def failing_publish(workflow: dict, bucket: str) -> dict:
    """The workflow with its publish step first asking the bucket, as the step reads it, for ALLOWED."""
    altered = copy.deepcopy(workflow)
    publish = next(t for t in altered["spec"]["templates"] if t["name"] == "publish")
    ask = (
        "import sys; from steps.lib.storage import open_store; "
        f"sys.exit(open_store('gs://{bucket}').read_head('{ALLOWED}', 8) is None)"
    )
    script = f'python -c "{ask}" || {{ echo "publish: not allowed yet" >&2; exit 1; }}; '
    container = publish["container"]
    container["args"] = ["publish", *container["command"], *container["args"]]
    container["command"] = ["sh", "-c", script + 'exec "$@"']
    return altered


def pods(workflow: dict, phase: str | None = None) -> dict[str, list[str]]:
    """The IDs of the run's Pod nodes (of `phase`, if given) by their step's name."""
    found: dict[str, list[str]] = {}
    for node in workflow["status"]["nodes"].values():
        if node["type"] == "Pod" and phase in (None, node["phase"]):
            found.setdefault(node["displayName"], []).append(node["id"])
    return found


def test_a_failed_run_is_listed_then_retried_from_its_failed_step(cluster: Cluster) -> None:
    from workflows.pipeline.workflow import compile_workflow

    name = f"mnist-retry-{secrets.token_hex(3)}"
    workflow = failing_publish(compile_workflow(cluster.settings(**QUICK)), cluster.bucket)
    cluster.create(workflow, name)
    failed = cluster.finished(name)
    assert failed["status"]["phase"] == "Failed", failed["status"].get("message")
    listed = cluster.submit("--list")
    assert listed.returncode == 0, listed.stderr
    assert (
        next(line for line in listed.stdout.splitlines() if line.startswith(name)).split()[3]
        == "Failed"
    )
    done = pods(failed, "Succeeded")
    assert any(step.startswith("train-round-1(") for step in done), done

    cluster.put(ALLOWED, b"yes")
    retried = cluster.submit("--retry", name, "--watch", "--poll-seconds", "1")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert f"run {name} Succeeded" in retried.stdout
    after = pods(cluster.workflow(name))
    assert {step: after[step] for step in done} == done  # the same pods: kept, not run again
    assert len(after["publish"]) == 1  # its failed try gave way to the retried one
    refused = cluster.submit("--retry", name)
    assert refused.returncode == 2 and "succeeded: there is nothing to retry" in refused.stderr
