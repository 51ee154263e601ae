"""Where a run goes wrong, on the real controller and on the local runner (docs/local-runner.md, "Against
the controller"): bad input, a killed trainer, `--min-workers`, a watched run stopped. Small seeded runs;
what is compared is the rule (which tries ran, how each ended, the waits, what was published)."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from steps.lib.registry import LATEST_KEY, METRICS_FILE, run_prefix
from steps.lib.storage import open_store
from tests.support.cluster import Cluster, task_nodes, tries, wait_until
from tests.support.faults import with_failing_shard
from tests.support.project import FIXTURE_SEED, ROOT, local_run, run_submit
from workflows.local.runner import LocalRunner
from workflows.pipeline.workflow import compile_workflow
from workflows.server.client import stop_workflow
from workflows.server.watch import watch

pytestmark = pytest.mark.cluster

SMALL = {"workers": 2, "rounds": 1, "epochs": 1, "batch": 32, "limit": 3000, "seed": FIXTURE_SEED}
SMALL_FLAGS = (*(part for key, value in SMALL.items() for part in (f"--{key}", str(value))),)
SMALL_FLAGS += ("--serve", "never")
BACKOFF_SECONDS = 10


def unique(prefix: str) -> str:
    return f"mnist-{prefix}-{secrets.token_hex(3)}"


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_bad_input_fails_its_step_once_after_the_backoff(
    cluster: Cluster, tmp_path: Path, mnist_path: Path
) -> None:
    """Exit code 2 is not retried, on either engine, and both decide so once the first backoff has passed
    (operator.go, processNodeRetries: the backoff before the retry expression)."""
    not_mnist = b"not a zip archive"
    flags = (*SMALL_FLAGS, "--retry-backoff", f"{BACKOFF_SECONDS}s")
    name = unique("bad")
    source = cluster.put(f"reference/{name}.npz", not_mnist)
    there = cluster.submit(*flags, "--name", name, "--source", source, "--watch")
    assert there.returncode == 1, there.stdout + there.stderr
    assert "not a readable .npz file" in there.stderr, there.stderr  # the step's own line
    workflow = cluster.workflow(name)
    [split] = tries(workflow, "split")
    assert split["outputs"]["exitCode"] == "2"
    assert "not a readable .npz file" in split["message"]
    assert task_nodes(workflow)["split"]["message"] == "retryStrategy.expression evaluated to false"
    waited = moment(workflow["status"]["finishedAt"]) - moment(split["finishedAt"])
    assert BACKOFF_SECONDS <= waited.total_seconds() < BACKOFF_SECONDS + 30, waited
    nodes = workflow["status"]["nodes"].values()
    omitted = {n["displayName"] for n in nodes if n["phase"] == "Omitted"}

    local_source = tmp_path / "not-mnist.npz"
    local_source.write_bytes(not_mnist)
    logs = tmp_path / "logs"
    here = run_submit(*local_run(tmp_path / "store", logs, local_source, *flags, "--name", name))
    assert here.returncode == 1, here.stdout + here.stderr
    summary = json.loads((logs / name / "summary.json").read_text())
    nodes = {node["name"]: node for node in summary["nodes"]}
    assert nodes["split"]["attempts"] == 1
    assert nodes["split"]["tries"][0]["exit_code"] == 2
    assert "retryStrategy.expression evaluated to false" in nodes["split"]["message"]
    assert {n for n, node in nodes.items() if node["phase"] == "Omitted"} == omitted
    local_wait = summary["seconds"] - nodes["split"]["tries"][0]["finished"]
    assert local_wait >= BACKOFF_SECONDS, local_wait


def test_a_killed_trainer_is_retried_and_resumes_from_its_checkpoint(cluster: Cluster) -> None:
    """SIGKILLed (as by the OOM killer) after its first checkpoint, a trainer's try fails with exit code
    137, and the next try carries on from that checkpoint."""
    name = unique("kill")
    settings = cluster.settings(**SMALL, serve="never", retry_backoff="2s")
    settings = replace(settings, limit=20000, epochs=8)
    cluster.create(compile_workflow(settings), name)
    checkpoint = f"{name}/round-1/checkpoints/0.npz"
    wait_until(f"{checkpoint} to be written", lambda: cluster.exists(checkpoint), 300, every=0.5)
    pod = cluster.pod_of(name, "train-round-1(0:0)")
    cluster.kill_step(pod)
    workflow = cluster.finished(name)
    assert workflow["status"]["phase"] == "Succeeded"
    first, second = tries(workflow, "train-round-1(0:0)")
    assert first["phase"] == "Failed" and first["outputs"]["exitCode"] == "137", first
    assert second["phase"] == "Succeeded"
    resumed = cluster.log(workflow, second)
    assert "resuming from checkpoint:" in resumed, resumed
    assert "epoch 1/8" not in resumed and "epoch 8/8" in resumed, resumed


def test_min_workers_goes_ahead_without_a_trainer_that_fails_for_good(
    cluster: Cluster, tmp_path: Path, mnist_path: Path
) -> None:
    """A trainer failing every try: with --min-workers 1 both engines retry it to its limit, then average
    the other, publish, and name the missing shard in the run's metrics."""
    name = unique("minw")
    settings = cluster.settings(**SMALL, serve="never", min_workers=1, retry_backoff="1s")
    fails = "echo 'node lost' >&2; exit 3"
    cluster.create(with_failing_shard(compile_workflow(settings), "1", fails), name)
    local = replace(settings, store=str(tmp_path / "store"), source=str(mnist_path))
    workflow = with_failing_shard(compile_workflow(local), "1", fails, python=sys.executable)
    workflow["metadata"] = {"name": name}
    store = open_store(tmp_path / "store")
    result = LocalRunner(store, tmp_path / "logs", parallelism=2).run(workflow)
    there = cluster.finished(name)
    assert there["status"]["phase"] == result.phase == "Succeeded"
    failing = tries(there, "train-round-1(1:1)")
    assert [t["outputs"]["exitCode"] for t in failing] == ["3"] * (settings.retries + 1)
    [lost] = result.tolerated_failures
    assert lost.name == "train-round-1(1:1)" and lost.attempts == settings.retries + 1
    assert {t.exit_code for t in lost.tries} == {3}
    cluster_metrics = json.loads(cluster.read(f"{run_prefix(name)}/{METRICS_FILE}"))
    local_metrics = json.loads(store.read_text(f"{run_prefix(name)}/{METRICS_FILE}"))
    assert cluster_metrics["missing_shards"] == local_metrics["missing_shards"] == {"1": ["1"]}


def test_ctrl_c_stops_watching_a_cluster_run_and_the_run_goes_on(cluster: Cluster) -> None:
    """Ctrl-C while watching a cluster run stops the watch, not the run (a local run's Ctrl-C stops every
    task); the Argo UI's Stop, the server's StopWorkflow, then ends it Failed, publishing nothing."""
    latest = cluster.read(LATEST_KEY) if cluster.exists(LATEST_KEY) else None
    name = unique("ctrlc")
    args = cluster.submit_command(*SMALL_FLAGS, "--limit", "20000", "--epochs", "8", "--name", name)
    watching = subprocess.Popen(
        [*args, "--watch"],
        env=cluster.process_env(),
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_until(f"{name}'s trainers", lambda: cluster.running_pods(name, "train"), 300)
    finally:
        watching.send_signal(signal.SIGINT)
        _, stderr = watching.communicate(timeout=60)
    assert watching.returncode == 130, stderr
    assert f"stopped watching; {name} goes on" in stderr
    time.sleep(5)
    assert cluster.phase(name) == "Running"
    stop_workflow(cluster.argo_server, name, "stopped by the test")
    workflow = cluster.finished(name, timeout=300)
    assert workflow["status"]["phase"] == "Failed"
    assert "Stopped with strategy 'Stop'" in workflow["status"].get("message", "")
    assert not cluster.keys(f"{run_prefix(name)}/")
    assert (cluster.read(LATEST_KEY) if cluster.exists(LATEST_KEY) else None) == latest


def test_a_step_whose_image_cannot_be_pulled_stops_the_watched_run(cluster: Cluster) -> None:
    """The trainers' image cannot be pulled: after STUCK_SECONDS (on a clock 20 times as fast) the watch
    stops the run as the Argo UI's Stop does."""
    name = unique("pull")
    missing = "localhost/mnist-argo-missing:0.0.0"
    settings = cluster.settings(**SMALL, serve="never", train_image=missing)
    cluster.create(compile_workflow(settings), name)
    lines: list[str] = []
    started = time.monotonic()
    final = watch(
        cluster.argo_server,
        name,
        echo=lines.append,
        interval=2,
        clock=lambda: started + (time.monotonic() - started) * 20,
    )
    stopping = [line for line in lines if line.startswith(f"stopping {name}: ")]
    assert stopping, lines
    assert "cannot start: " in stopping[0], stopping
    assert "ErrImagePull" in stopping[0] or "ImagePullBackOff" in stopping[0], stopping
    assert final["status"]["phase"] == "Failed"
    assert "Stopped with strategy 'Stop'" in final["status"].get("message", "")
