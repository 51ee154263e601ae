"""Fault injection on small local runs: killed trainers, failing shards, racing publishes, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from steps.lib.registry import LATEST_KEY, latest_run, run_prefix
from steps.lib.storage import open_store
from tests.support.faults import with_failing_shard
from tests.support.project import FIXTURE_SEED, SUBMIT, local_run
from tests.support.steps import copy_model, flags
from workflows.local.runner import LocalRunner
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

pytestmark = pytest.mark.slow  # every test runs the pipeline or its steps, and breaks them


def tagged_processes(tag: str) -> list[int]:
    """Live processes whose environment carries `tag` (the runner's children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"FAULT_TEST_TAG={tag}".encode() in (entry / "environ").read_bytes():
                status = (entry / "status").read_text()
                if "State:\tZ" not in status:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def default_ctrl_c() -> None:
    """SIGINT as in a terminal's foreground (a suite run in the background inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_submit(args: list[str], tag: str) -> subprocess.Popen:
    env = os.environ | {"FAULT_TEST_TAG": tag}
    return subprocess.Popen(
        [sys.executable, SUBMIT, *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_ctrl_c,
    )


def wait_for_line(path: Path, text: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise AssertionError(
                f"the run ended before {path.name} said {text!r}: "
                f"{process.stdout.read()} {process.stderr.read()}"
            )
        time.sleep(0.05)
    raise TimeoutError(f"{path} never said {text!r}")


def pid_running_in(tag: str, folder_prefix: str) -> int:
    for pid in tagged_processes(tag):
        try:
            cwd = Path(f"/proc/{pid}/cwd").resolve()  # <node>-XXXX/work: the try's folder
            if cwd.parent.name.startswith(folder_prefix):
                return pid
        except OSError:
            continue
    raise AssertionError(f"no process runs in a folder named {folder_prefix}*")


def test_a_killed_trainer_resumes_from_its_last_epoch(tmp_path: Path, mnist_path: Path) -> None:
    settings = f"--workers 2 --epochs 3 --batch 32 --rounds 1 --limit 5000 --seed {FIXTURE_SEED}"
    tag = uuid.uuid4().hex
    store, logs = tmp_path / "store", tmp_path / "logs"
    run = start_submit(local_run(store, logs, mnist_path, *settings.split()), tag)
    log = None
    deadline = time.monotonic() + 300
    while log is None and time.monotonic() < deadline:
        log = next(iter(logs.glob("*/train-round-1-0-0.log")), None)
        time.sleep(0.05)
    assert log is not None, "train-round-1(0:0) never started"
    wait_for_line(log, "checkpoint saved after epoch 1", run)
    os.kill(pid_running_in(tag, "train-round-1-0-0-"), signal.SIGKILL)  # in its second epoch
    stdout, stderr = run.communicate(timeout=900)
    assert run.returncode == 0, stdout + stderr
    text = log.read_text()
    assert "--- attempt 2" in text
    assert "resuming from checkpoint: 1 epoch(s) done, starting at epoch 2" in text
    resumed = text.split("--- attempt 2")[1]
    assert "epoch 1/3" not in resumed and "epoch 3/3" in resumed
    opened = open_store(store)
    metrics = json.loads(opened.read_text(f"{run_prefix(latest_run(opened))}/metrics.json"))
    assert metrics["accuracy"] > 0.5  # a trained model, not a fresh one


def run_failing_shard(tmp_path: Path, source: Path, shard: str, command: str, **changes) -> tuple:
    """A 3-worker run whose trainer of `shard` runs `command` instead: its result and progress."""
    small = dict(workers=3, batch=32, epochs=1, rounds=1, limit=1500, retry_backoff="0s")
    settings = PipelineSettings(
        **small, source=str(source), seed=FIXTURE_SEED, store=str(tmp_path / "store"), **changes
    )
    workflow = with_failing_shard(compile_workflow(settings), shard, command, python=sys.executable)
    lines: list[str] = []
    runner = LocalRunner(open_store(tmp_path / "store"), tmp_path / "logs", 2, echo=lines.append)
    return runner.run(workflow), "\n".join(lines)


def test_min_workers_lets_the_run_go_ahead_without_a_dead_shard(
    tmp_path: Path, mnist_path: Path
) -> None:
    lost_node = "echo 'node lost' >&2; exit 3"
    result, progress = run_failing_shard(tmp_path, mnist_path, "1", lost_node, min_workers=2)
    assert result.phase == "Succeeded", result.message
    [lost] = result.tolerated_failures
    assert lost.name == "train-round-1(1:1)" and lost.attempts == PipelineSettings().retries + 1
    store = open_store(tmp_path / "store")
    metrics = json.loads(store.read_text(f"{run_prefix(result.name)}/metrics.json"))
    assert metrics["missing_shards"] == {"1": ["1"]}
    assert metrics["accuracy"] > 0.5
    assert "retrying train-round-1(1:1)" in progress


def test_a_corrupt_shard_fails_its_trainer_once_and_by_default_the_run(
    tmp_path: Path, mnist_path: Path
) -> None:
    corrupt = "printf 'not a zip archive' > in/shard.npz"
    result, _ = run_failing_shard(tmp_path, mnist_path, "2", corrupt)
    assert result.phase == "Failed"
    trainer = next(n for n in result.nodes if n.name == "train-round-1(2:2)")
    assert trainer.attempts == 1, "bad input (exit 2) is not retried"
    assert "error: in/shard.npz: not a readable .npz file" in trainer.message
    assert "retryStrategy.expression evaluated to false" in trainer.message
    assert "Traceback" not in trainer.log.read_text()
    assert result.message.startswith("aggregate-round-1 failed")  # every worker must deliver
    assert "only 2 of 3 workers delivered a model" in result.message
    assert "missing shards: 2" in result.message
    assert latest_run(open_store(tmp_path / "store")) is None


def test_ctrl_c_stops_every_task_and_keeps_the_published_model(
    tmp_path: Path, mnist_path: Path
) -> None:
    store, logs, tag = tmp_path / "store", tmp_path / "logs", uuid.uuid4().hex
    open_store(store).write_text(LATEST_KEY, "mnist-previous")
    run = start_submit(
        local_run(store, logs, mnist_path, "--workers", "2", "--epochs", "5", "--limit", "20000"),
        tag,
    )
    deadline = time.monotonic() + 300
    while not list(logs.glob("*/train-round-1-*.log")) and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_for_line(next(logs.glob("*/train-round-1-*.log")), "training on", run)
    assert len(tagged_processes(tag)) >= 2, "the submit process and at least one trainer"
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130
    assert "interrupted" in stderr
    time.sleep(0.5)
    assert tagged_processes(tag) == []
    assert open_store(store).read_text(LATEST_KEY) == "mnist-previous"


def test_two_runs_publishing_at_once_leave_latest_complete(
    tmp_path: Path, strict_gcs_bucket: str
) -> None:
    store = f"gs://{strict_gcs_bucket}"  # a folder store's swap is the same rule (test_publish.py)
    model = copy_model(tmp_path / "model.h5")
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"accuracy": 0.9}))
    publish = [sys.executable, "-m", "steps.publish", "--serve=always"]  # the swap decides
    runs = [
        subprocess.Popen(
            [*publish, *flags(store=store, run=f"mnist-race{i}", model=model, metrics=metrics)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stdout + stderr
    opened = open_store(store)
    for name in ("mnist-race0", "mnist-race1"):  # both runs' models are intact
        opened.download_file(f"{run_prefix(name)}/model.h5", tmp_path / f"{name}.h5")
        assert (tmp_path / f"{name}.h5").read_bytes() == model.read_bytes()
    assert latest_run(opened) in ("mnist-race0", "mnist-race1")


def test_rerunning_a_step_gives_the_same_output_and_writes_only_its_own(
    tmp_path: Path, small_mnist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steps import split, train
    from steps.lib.entry_point import run
    from steps.lib.model_file import read_weights

    monkeypatch.chdir(tmp_path)
    argv = flags(source=small_mnist, workers=2, shards_dir="shards", test_out="test.npz")
    assert run(split.main, split.make_parser(), argv) == 0
    copy_model(tmp_path / "init.h5")
    before = {p.name for p in tmp_path.iterdir()}
    for attempt in ("a", "b"):
        argv = f"--shard shards/0.npz --model init.h5 --seed 4 --epochs 1 --out {attempt}/model.h5"
        argv += f" --stats-out {attempt}/stats.json"
        assert run(train.main, train.make_parser(), argv.split()) == 0
    assert {p.name for p in tmp_path.iterdir()} == before | {"a", "b"}
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["model.h5", "stats.json"]
    first, second = (read_weights(tmp_path / x / "model.h5") for x in "ab")
    assert all((x == y).all() for x, y in zip(first, second, strict=True))
    assert (tmp_path / "a/stats.json").read_text() == (tmp_path / "b/stats.json").read_text()
