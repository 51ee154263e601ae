"""Plan past this machine: the pipeline's critical path for W workers on W nodes, from measured task times.

Calibration (all from runs of this benchmark on this machine):
- every step's own time, each running alone: the `calibration` run (1 worker, 1 round, one task at a time);
- a trainer: its fixed part (process start, imports, loading the shard and model, saving) and its seconds
  per sample and epoch, from the same run's trainer (its log's epoch lines against its task time);
- averaging: a fixed part plus a part per model read, fitted over the runs' worker counts;
- the accuracy a run of W workers and R rounds publishes: the pipeline's own runs where they exist (seed
  of the first run), else the one-process FedAvg simulation (bench/fedavg.py); W workers need the fewest
  R tried that reach the target, and time to the target is undefined where no R tried reaches it.

Assumed, not measured here (each node is of this machine's kind and runs one trainer):
- POD_START_SECONDS per pod; the controller's DEFAULT_REQUEUE_TIME per DAG level (both values in
  REQUEUE_SECONDS); GCS transfer of each task's inputs and outputs (GCS_* below).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import mean
from typing import Any

import numpy as np

from steps.dataset import IMAGE_SHAPE

PLAN_WORKERS = (1, 2, 3, 4, 8, 16, 32)  # issue 14 asks for powers of two; 3 is the default
# Pod creation to the main container's start on a node with the image cached, Argo's init container
# (argoexec, which downloads the inputs) included: Kubernetes' start-up SLO is 5 s at the 99th
# percentile without image pulls or init containers (sig-scalability/slos/pod_startup_latency.md).
POD_START_SECONDS = 4.0
# The workflow controller re-reads a workflow DEFAULT_REQUEUE_TIME after a pod of it changed
# (workflow/controller/rate_limiters.go): 10 s by default, as low as 2 s suggested for short steps.
REQUEUE_SECONDS = (2.0, 10.0)
# GCS from a node in the bucket's region: a per-object request latency and a stream's throughput.
GCS_SECONDS_PER_OBJECT = 0.05
GCS_BYTES_PER_SECOND = 100e6
SAMPLE_BYTES = (
    int(np.prod(IMAGE_SHAPE)) + 1
)  # a uint8 image and its uint8 label, as shards store them
TEST_SAMPLES = 10_000

ASSUMPTIONS = [
    f"each pod starts {POD_START_SECONDS:.0f} s after it is created, the image cached and the "
    "init container's artifact download included (Kubernetes' start-up SLO: 5 s at the 99th "
    "percentile, without image pulls or init containers)",
    "the controller takes DEFAULT_REQUEUE_TIME to start the next DAG level after a pod ends: "
    + " or ".join(f"{s:.0f} s" for s in REQUEUE_SECONDS)
    + " (Argo's default is 10 s; its source suggests 2 s for workflows of short steps)",
    f"GCS moves {GCS_BYTES_PER_SECOND / 1e6:.0f} MB/s and costs {GCS_SECONDS_PER_OBJECT * 1000:.0f} ms "
    f"per object; shards hold {SAMPLE_BYTES} bytes per digit, models their measured size",
    "each node is this machine's kind and runs one task at a time, so each task takes its time "
    "measured alone here; everything else in the cluster is idle",
]


@dataclass(frozen=True)
class Calibration:
    """Seconds measured alone on this machine, and sizes."""

    submit: float
    split: float
    init: float
    evaluate: float
    publish: float
    train_fixed: float
    train_per_sample_epoch: float
    aggregate_fixed: float
    aggregate_per_model: float
    model_bytes: int
    train_samples: int
    epochs: int


def calibrate(
    alone: Mapping[str, Any], runs: list[Mapping[str, Any]], train_samples: int
) -> Calibration:
    """From the run whose tasks ran one at a time (`alone`), and the averaging times of all `runs`."""
    (trainer,) = alone["trainers"]
    epochs = alone["settings"]["epochs"]
    samples = alone["settings"]["limit"] or train_samples
    workers, seconds = [], []
    for run in runs:
        for value in run["steps"].get("aggregate", []):
            workers.append(run["settings"]["workers"])
            seconds.append(value)
    if len(set(workers)) > 1:
        per_model, fixed = np.polyfit(workers, seconds, 1)
        per_model = max(0.0, float(per_model))
        fixed = mean(seconds) - per_model * mean(workers)
    else:
        per_model, fixed = 0.0, mean(seconds)
    return Calibration(
        submit=alone["submit_seconds"],
        split=mean(alone["steps"]["split"]),
        init=mean(alone["steps"]["init"]),
        evaluate=mean(alone["steps"]["evaluate"]),
        publish=mean(alone["steps"]["publish"]),
        train_fixed=trainer["seconds"] - trainer["epoch_seconds"],
        train_per_sample_epoch=trainer["epoch_seconds"] / (samples * epochs),
        aggregate_fixed=float(fixed),
        aggregate_per_model=per_model,
        model_bytes=alone["model_bytes"],
        train_samples=samples,
        epochs=epochs,
    )


def transfer(size: float, objects: int) -> float:
    return size / GCS_BYTES_PER_SECOND + objects * GCS_SECONDS_PER_OBJECT


def train_seconds(c: Calibration, workers: int) -> float:
    """One trainer on its own node: fixed part, its shard's epochs, and moving shard and models."""
    shard = c.train_samples / workers
    moved = transfer(
        shard * SAMPLE_BYTES + 2 * c.model_bytes, 4
    )  # shard, start model; model, stats
    return c.train_fixed + shard * c.epochs * c.train_per_sample_epoch + moved


def critical_path(c: Calibration, workers: int, rounds: int, requeue: float) -> dict:
    """Seconds from submitting to the published model, and how much of it is training."""
    level = POD_START_SECONDS + requeue
    split = c.split + transfer((c.train_samples + TEST_SAMPLES) * SAMPLE_BYTES, workers + 2)
    init = c.init + transfer(c.model_bytes, 1)
    aggregate = (
        c.aggregate_fixed
        + c.aggregate_per_model * workers
        + transfer((workers + 1) * c.model_bytes, 2 * workers + 2)
    )
    evaluate = c.evaluate + transfer(c.model_bytes + TEST_SAMPLES * SAMPLE_BYTES, 6)
    publish = c.publish + transfer(3 * c.model_bytes, 8)
    per_round = train_seconds(c, workers) + level + aggregate + level
    total = (
        c.submit + max(split, init) + level + rounds * per_round + evaluate + publish + 2 * level
    )
    training = rounds * (c.train_samples / workers) * c.epochs * c.train_per_sample_epoch
    return {"seconds": total, "round_seconds": per_round, "training_seconds": training}


def accuracy_by_rounds(runs: list[Mapping[str, Any]], simulated: list[Mapping[str, Any]]) -> dict:
    """Workers → {rounds R: (the accuracy a run of R rounds published, where from)}.

    The learning rate steps down over a run's R rounds, so only a run's last round tells what R
    rounds reach. A pipeline run's own result wins over the simulation's.
    """
    table: dict[int, dict[int, tuple[float, str]]] = {}
    for line in simulated:
        if line["round"] == line["rounds"]:
            table.setdefault(line["workers"], {})[line["rounds"]] = (line["accuracy"], "simulated")
    for run in runs:
        settings = run["settings"]
        table.setdefault(settings["workers"], {})[settings["rounds"]] = (
            run["accuracy"],
            "pipeline",
        )
    return table


def rounds_needed(by_rounds: Mapping[int, tuple[float, str]], target: float) -> tuple | None:
    """(rounds, accuracy, source) of the fewest rounds tried that reach `target`; None if none does."""
    for rounds in sorted(by_rounds):
        accuracy, source = by_rounds[rounds]
        if accuracy >= target:
            return rounds, accuracy, source
    return None


def predict(
    c: Calibration,
    accuracies: Mapping[int, Mapping[int, tuple[float, str]]],
    target: float,
    workers_list: tuple[int, ...] = PLAN_WORKERS,
) -> list[dict]:
    """One row per W: the fewest rounds tried that reach `target`, and the predicted time then."""
    rows = []
    for workers in workers_list:
        by_rounds = accuracies.get(workers, {})
        most = max(by_rounds, default=0)
        needed = rounds_needed(by_rounds, target)
        row: dict[str, Any] = {
            "workers": workers,
            "rounds_tried": sorted(by_rounds),
            "rounds": None,
            "accuracy": by_rounds[most][0] if by_rounds else None,
            "source": by_rounds[most][1] if by_rounds else None,
            "predicted": {},
        }
        if needed is not None:
            row["rounds"], row["accuracy"], row["source"] = needed
            for requeue in REQUEUE_SECONDS:
                path = critical_path(c, workers, row["rounds"], requeue)
                row["predicted"][f"{requeue:g}"] = {k: round(v, 1) for k, v in path.items()}
        rows.append(row)
    return rows


def unresolved_workers(
    runs: list[Mapping[str, Any]], target: float, workers_list: tuple[int, ...] = PLAN_WORKERS
) -> list[int]:
    """The W of the plan whose pipeline runs (if any) did not reach `target` in any round."""
    measured = accuracy_by_rounds(runs, [])
    return [w for w in workers_list if rounds_needed(measured.get(w, {}), target) is None]
