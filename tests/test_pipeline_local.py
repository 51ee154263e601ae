"""End to end: submit.py --local runs the compiled spec and publishes a model that really learned."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from steps.lib.registry import HISTORY_FILE, HISTORY_PLOT, latest_run, read_run_history, run_prefix
from steps.lib.storage import open_store
from tests.support.project import ROOT, SMALL_RUN, local_run, run_submit

pytestmark = pytest.mark.slow  # every test runs the pipeline

ACCURACY_FLOOR = 0.70  # 2 workers x 1500 digits, 1 epoch score ~0.85-0.9; chance is 0.10


def test_local_run_with_gcs_store(tmp_path: Path, mnist_path: Path, gcs_bucket: str) -> None:
    """The whole pipeline on a gs:// store (a folder store: the quick try below)."""
    store_uri = f"gs://{gcs_bucket}/mnist"
    result = run_submit(*local_run(store_uri, tmp_path / "logs", mnist_path, *SMALL_RUN))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not any((tmp_path).glob("store*")), "a gs:// store wrote nothing locally"
    store = open_store(store_uri)
    run = latest_run(store)
    published = (
        "model.h5",
        "metrics.json",
        "run.json",
        "confusion.png",
        HISTORY_FILE,
        HISTORY_PLOT,
    )
    assert {f"{run_prefix(run)}/{name}" for name in published} <= set(
        store.list_keys(run_prefix(run))
    )
    metrics = json.loads(store.read_text(f"{run_prefix(run)}/metrics.json"))
    assert metrics["test_samples"] == np.array(metrics["confusion_matrix"]).sum() == 10000
    assert metrics["accuracy"] > ACCURACY_FLOOR
    assert f"test accuracy: {metrics['accuracy']:.4f}" in result.stdout
    # every artifact the DAG exchanged sits under the run's own prefix
    kept = {key.removeprefix(f"{run}/") for key in store.list_keys(run)}
    exchanged = {"shards/0.npz", "shards/1.npz", "test.npz", "init/model.h5", "round-1/model.h5"}
    assert (
        exchanged | {"round-1/models/0.h5", "round-1/models/1.json", "evaluation/metrics.json"}
        <= kept
    )
    assert (tmp_path / "logs" / run / "train-round-1-0-0.log").read_text().count("epoch 1/1") == 1
    # the run says how training goes as it goes: each worker's epochs, then the round's score
    shown = result.stdout.splitlines()
    epochs = [
        i for i, line in enumerate(shown) if re.search(r"train-round-1\(\d:\d\): epoch 1/1: ", line)
    ]
    (round_line,) = [i for i, line in enumerate(shown) if "aggregate-round-1: round 1: " in line]
    assert len(epochs) == 2 and max(epochs) < round_line
    (record,) = read_run_history(store, run_prefix(run))["rounds"]
    assert (
        f"the average scores {record['held_out']['accuracy']:.2%} on 1000 held-out"
        in shown[round_line]
    )
    assert sorted(record["workers"]) == ["0", "1"]
    assert all(len(worker["accuracy"]) == 1 for worker in record["workers"].values())
    assert record["held_out"]["accuracy"] > ACCURACY_FLOOR


def test_failed_task_stops_the_run_with_its_name_and_log(tmp_path: Path, small_mnist: Path) -> None:
    result = run_submit(
        *local_run(tmp_path / "store", tmp_path / "logs", small_mnist, "--workers", "5000")
    )
    assert result.returncode == 1
    assert "split failed: exit code 2" in result.stderr
    assert "--workers 5000 is more than the 1000 training samples" in result.stderr  # 1000 held out
    assert not (tmp_path / "store" / "models").exists()


def test_bad_settings_are_one_line_and_exit_2_before_anything_runs(tmp_path: Path) -> None:
    result = run_submit("--local", "--workers", "0", "--artifacts", str(tmp_path / "store"))
    assert result.returncode == 2
    assert "error:" in result.stderr
    assert not (tmp_path / "store").exists()


def test_a_quick_try_after_a_full_run_succeeds_is_kept_and_can_be_served(
    tmp_path: Path, small_mnist: Path
) -> None:
    """The README's quick try after a complete run: kept under its --name, LATEST stays on the complete
    run, and the one line saying why gives the command that serves it anyway, which does."""
    store, logs = tmp_path / "store", tmp_path / "logs"
    full = ("--workers", "2", "--epochs", "1", "--batch", "32", "--rounds", "1")
    first = run_submit(*local_run(store, logs, small_mnist, *full, "--name", "full-run"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "served: models/mnist/LATEST → full-run (no model was served)" in first.stdout

    quick = (*full, "--limit", "1000", "--name", "quick-try")
    result = run_submit(*local_run(store, logs, small_mnist, *quick))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run quick-try Succeeded in " in result.stdout
    [line] = [line for line in result.stdout.splitlines() if "served" in line]
    assert line.startswith("not served: it is a partial run (--limit 1000)"), line
    assert "LATEST serves a complete one, full-run" in line
    assert latest_run(open_store(store)) == "full-run"
    assert (store / run_prefix("quick-try") / "model.h5").is_file()
    card = json.loads((store / run_prefix("quick-try") / "run.json").read_text())
    assert card["settings"]["limit"] == 1000 and card["settings"]["retry-backoff"] == "1s"

    command = line.split("to serve it anyway: ")[1]
    assert command.endswith(f"-m steps.promote quick-try --store {store}")
    served = subprocess.run(shlex.split(command), capture_output=True, text=True, cwd=ROOT)
    assert served.returncode == 0, served.stderr
    assert latest_run(open_store(store)) == "quick-try"
