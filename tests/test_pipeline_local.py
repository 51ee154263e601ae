"""End to end: submit.py --local runs the compiled spec and publishes a model that really learned."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from steps.lib.registry import LATEST_KEY, latest_run, run_prefix
from steps.lib.storage import open_store
from tests.support.project import SMALL_RUN, local_run, run_submit

pytestmark = pytest.mark.slow  # every test runs the pipeline

# 2 workers x 1500 digits, 1 epoch: the averaged model scores ~0.85-0.9 on 10000 test digits.
# Chance is 0.10; 0.70 leaves room for seeds while failing anything that did not learn.
ACCURACY_FLOOR = 0.70


def check_published(store_uri: str) -> dict:
    store = open_store(store_uri)
    run = latest_run(store)
    assert run, f"{LATEST_KEY} was not written"
    prefix = run_prefix(run)
    keys = store.list_keys(prefix)
    for name in ("model.h5", "metrics.json", "run.json", "confusion.png"):
        assert f"{prefix}/{name}" in keys
    metrics = json.loads(store.read_text(f"{prefix}/metrics.json"))
    assert metrics["test_samples"] == 10000
    assert np.array(metrics["confusion_matrix"]).sum() == 10000
    assert metrics["accuracy"] > ACCURACY_FLOOR
    return metrics


def test_local_run_with_folder_store(tmp_path: Path, mnist_path: Path) -> None:
    store = tmp_path / "store"
    result = run_submit(*local_run(store, tmp_path / "logs", mnist_path, *SMALL_RUN))
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = check_published(str(store))
    assert f"test accuracy: {metrics['accuracy']:.4f}" in result.stdout
    run = latest_run(open_store(store))
    # every artifact the DAG exchanged sits under the run's own prefix
    kept = {p.relative_to(store / run).as_posix() for p in (store / run).rglob("*") if p.is_file()}
    assert {
        "shards/0.npz",
        "shards/1.npz",
        "test.npz",
        "init/model.h5",
        "round-1/models/0.h5",
        "round-1/models/1.json",
        "round-1/model.h5",
        "evaluation/metrics.json",
    } <= kept
    assert (tmp_path / "logs" / run / "train-round-1-0-0.log").read_text().count("epoch 1/1") == 1


def test_local_run_with_gcs_store(tmp_path: Path, mnist_path: Path, gcs_bucket: str) -> None:
    store = f"gs://{gcs_bucket}/mnist"
    result = run_submit(*local_run(store, tmp_path / "logs", mnist_path, *SMALL_RUN))
    assert result.returncode == 0, result.stdout + result.stderr
    check_published(store)
    assert not any((tmp_path).glob("store*")), "a gs:// store wrote nothing locally"


def test_failed_task_stops_the_run_with_its_name_and_log(tmp_path: Path, small_mnist: Path) -> None:
    result = run_submit(
        "--local",
        "--workers",
        "5000",
        "--source",
        str(small_mnist),
        "--artifacts",
        str(tmp_path / "store"),
        "--logs-dir",
        str(tmp_path / "logs"),
    )
    assert result.returncode == 1
    assert "split failed: exit code 2" in result.stderr
    assert "--workers 5000 is more than the 2000 training samples" in result.stderr
    assert not (tmp_path / "store" / "models").exists()


@pytest.mark.parametrize("flags", [["--workers", "0"], ["--epochs", "-1"], ["--batch", "x"]])
def test_bad_settings_are_refused_before_anything_runs(tmp_path: Path, flags: list[str]) -> None:
    result = run_submit("--local", *flags, "--artifacts", str(tmp_path / "store"))
    assert result.returncode == 2
    assert "error:" in result.stderr
    assert not (tmp_path / "store").exists()
