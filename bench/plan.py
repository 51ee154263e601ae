"""Plan past this machine: the pipeline's critical path for W workers on W nodes, from measured task times.

Calibration (all from runs of this benchmark on this machine):
- every step's own time, each running alone: the `calibration` run (1 worker, 1 round, one task at a time);
- a trainer: its fixed part (process start, imports, loading the shard and model, saving) and its seconds
  per sample and epoch, from the same run's trainer (its log's epoch lines against its task time);
- averaging: a fixed part plus a part per model read, fitted over the runs' worker counts;
- the accuracy a run of W workers and R rounds publishes: the pipeline's own runs where they exist (seed
  of the first run), else the one-process FedAvg simulation (bench/fedavg.py); W workers need the fewest
  R tried that reach the target, and time to the target is undefined where no R tried reaches it.

Measured on the local cluster, a real Kubernetes and Argo controller (`python -m bench.cluster_timing`,
bench/cluster_timing.json): each pod's start (POD_START_SECONDS), and the controller's wait between DAG
levels (level_gap), at the requeue time infra/gke/up.sh configures and at Argo's default.

Assumed, not measured here (each node is of this machine's kind and runs one trainer): GCS transfer of
each task's inputs and outputs (GCS_* below: the local cluster's GCS is an emulator on the same machine);
the registry's throughput and image streaming's start (REGISTRY_*, STREAM_START_SECONDS: the local
cluster imports its images, it pulls none); that a GKE node starts a pod as fast as the local one.

The first run on fresh nodes adds what fetching the images costs (first_run): their compressed sizes and
the time to unpack them, measured here by bench/images.py (bench/images.json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np

from steps.lib.mnist import IMAGE_SHAPE

PLAN_WORKERS = (1, 2, 3, 4, 8, 16, 32)  # issue 14 asks for powers of two; 3 is the default
# The workflow controller's DEFAULT_REQUEUE_TIME (workflow/controller/rate_limiters.go GetRequeueTime): 10 s
# unless set, and its comment suggests 2 s for workflows of short steps; infra/gke/up.sh installs the
# controller with REQUEUE_TIME, whose default is declared in infra/gke/config.sh and read from there. The
# first is the headline.
GKE_CONFIG = Path(__file__).resolve().parent.parent / "infra" / "gke" / "config.sh"
CLUSTER_TIMING_JSON = Path(__file__).resolve().parent / "cluster_timing.json"


def configured_requeue_seconds(config: Path = GKE_CONFIG) -> float:
    """The default REQUEUE_TIME of infra/gke/config.sh (a line `REQUEUE_TIME="${REQUEUE_TIME:-2s}"`)."""
    found = re.search(
        r'^REQUEUE_TIME="\$\{REQUEUE_TIME:-(\d+(?:\.\d+)?)s\}"$', config.read_text(), re.M
    )
    if found is None:
        raise ValueError(f"{config}: no default REQUEUE_TIME in seconds")
    return float(found.group(1))


def cluster_figures(path: Path = CLUSTER_TIMING_JSON) -> dict[str, Any]:
    """The figures bench/cluster_timing.py measured on the local cluster (its --save)."""
    return json.loads(path.read_text())["figures"]


CONFIGURED_REQUEUE_SECONDS = configured_requeue_seconds()
ARGO_DEFAULT_REQUEUE_SECONDS = 10.0
REQUEUE_SECONDS = (CONFIGURED_REQUEUE_SECONDS, ARGO_DEFAULT_REQUEUE_SECONDS)
CLUSTER = cluster_figures()
# Pod creation to the main container's start on a node with the image cached, Argo's init container
# (argoexec, which downloads the inputs, here from the emulator) included: the mean over every pod of the
# local cluster's runs.
POD_START_SECONDS: float = CLUSTER["pod_start"]["mean"]
# A new run is queued without the requeue wait (workflow/controller/controller.go: the workflow
# informer's AddFunc, AddAfter the configuration's initialDelay, none by default): its first pods are
# created this long after it starts.
FIRST_LEVEL_SECONDS: float = mean(v["first_level"]["mean"] for v in CLUSTER["requeue"].values())
# What the controller's wait after a level measured above the rule of level_gap: after a pod that lived
# less than the requeue (only a requeue above the pods' lives has such levels: one figure), and after one
# that lived longer, for each requeue measured (a look due from the previous one can come before the
# requeue after the pod's end: the measured mean takes it in).
GAP_EXCESS_SHORT: float = CLUSTER["excess_after_short"]["mean"]
GAP_EXCESS_LONG: dict[float, float] = {
    value["seconds"]: value["excess_after_long"]["mean"]
    for value in CLUSTER["requeue"].values()
    if value["excess_after_long"]["n"]
}


def level_gap(requeue: float, life: float) -> float:
    """Seconds from a level's pod ending to the next level's pods being created, for a pod that lived
    `life` seconds from its creation. A change of a run (its status, which the controller writes when it
    creates a pod: controller.go, the workflow informer's UpdateFunc) or a significant change of one of
    its pods (workflow/controller/pod/significant.go) queues the run `requeue` later (rate_limiters.go),
    and a later change keeps the earlier time (client-go v0.35 util/workqueue/delaying_queue.go,
    waitingLoop). So a pod that ends within `requeue` of its creation is seen at its creation plus
    `requeue`; a longer one was seen running, and the next change is its end, seen `requeue` later
    unless a look already due (the previous look changed the run) comes sooner. Measured on the local
    cluster: the rule, and the excess over it."""
    if life < requeue:
        return requeue - life + GAP_EXCESS_SHORT
    return requeue + GAP_EXCESS_LONG.get(requeue, CLUSTER["excess_after_long"]["mean"])


# A node fetches an image's compressed layers from Artifact Registry, which serves them from Cloud
# Storage in the region: the same stream throughput as GCS_BYTES_PER_SECOND, assumed, not measured; then
# it unpacks them (measured here: bench/images.py).
REGISTRY_BYTES_PER_SECOND = 100e6
# GKE image streaming (infra/gke/up.sh turns it on for the trainers' image): the container is Running "in
# a couple of seconds (regardless of container size)" (Google Cloud blog, "Introducing GKE image
# streaming for fast application startup and autoscaling", 2021); the rest of the image follows in the
# background, and the files the trainer reads first are read from the network (not modelled). GKE's
# image streaming page: the first pull of a new image is not sped up, until the streaming cache holds it.
STREAM_START_SECONDS = 2.0
IMAGES_JSON = Path(__file__).resolve().parent / "images.json"
# GCS from a node in the bucket's region: a per-object request latency and a stream's throughput.
GCS_SECONDS_PER_OBJECT = 0.05
GCS_BYTES_PER_SECOND = 100e6
SAMPLE_BYTES = (
    int(np.prod(IMAGE_SHAPE)) + 1
)  # a uint8 image and its uint8 label, as shards store them
TEST_SAMPLES = 10_000

MEASURED = [
    f"each pod starts {POD_START_SECONDS:.1f} s after it is created: creation to the main container "
    "running, the image cached and Argo's init container (its download from the GCS emulator) "
    f"included, the mean of {CLUSTER['pod_start']['n']} pods "
    f"({CLUSTER['pod_start']['min']:.0f} to {CLUSTER['pod_start']['max']:.0f} s)",
    "the controller creates a level's pods when it next looks at the run after the previous level's "
    "pod ended: DEFAULT_REQUEUE_TIME after it created that pod, if the pod ended sooner, else about "
    "DEFAULT_REQUEUE_TIME after the pod ended (workflow/controller/rate_limiters.go, "
    f"pod/significant.go; bench/plan.py level_gap); measured {GAP_EXCESS_SHORT:+.1f} s off the first "
    "case, and off the second "
    + ", ".join(f"{excess:+.1f} s at {seconds:g} s" for seconds, excess in GAP_EXCESS_LONG.items())
    + f"; a run's first pods are created {FIRST_LEVEL_SECONDS:.1f} s after it starts",
]

ASSUMPTIONS = [
    "a GKE node starts a pod as the local cluster's node does (its sandbox, network and disk differ; "
    "not measured)",
    f"GCS moves {GCS_BYTES_PER_SECOND / 1e6:.0f} MB/s and costs {GCS_SECONDS_PER_OBJECT * 1000:.0f} ms "
    f"per object; shards hold {SAMPLE_BYTES} bytes per digit, models their measured size (the local "
    "cluster's GCS is an emulator on the same machine, whose speed says nothing of GCS's)",
    "each node is this machine's kind and runs one task at a time, so each task takes its time "
    "measured alone here; everything else in the cluster is idle",
    f"the first run on fresh nodes fetches each image from Artifact Registry at "
    f"{REGISTRY_BYTES_PER_SECOND / 1e6:.0f} MB/s of compressed layers (GCS's throughput above, as the "
    "registry serves layers from Cloud Storage; the local cluster imports its images and pulls none), "
    "then unpacks it as fast as it unpacked here "
    "(`python -m bench.images`); a streamed image (GKE image streaming, on for the trainers' image as "
    f'infra/gke/up.sh configures it) runs {STREAM_START_SECONDS:.0f} s after its pod starts ("a couple '
    "of seconds, regardless of container size\", Google's announcement of image streaming), though not "
    "on the very first pull of a new image, before the streaming cache holds it (GKE's image streaming "
    "page: then the trainers pay the whole pull, the next column); an upper bound: every light level "
    "after the first lands on a node without the light image while one is left",
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
    """Seconds from submitting to the published model, and how much of it is training: each level's pod
    starts, runs its step, and the controller waits (level_gap) before creating the next level's."""
    split = c.split + transfer((c.train_samples + TEST_SAMPLES) * SAMPLE_BYTES, workers + 2)
    init = c.init + transfer(c.model_bytes, 1)
    aggregate = (
        c.aggregate_fixed
        + c.aggregate_per_model * workers
        + transfer((workers + 1) * c.model_bytes, 2 * workers + 2)
    )
    evaluate = c.evaluate + transfer(c.model_bytes + TEST_SAMPLES * SAMPLE_BYTES, 6)
    publish = c.publish + transfer(3 * c.model_bytes, 8)
    steps = [max(split, init), *[train_seconds(c, workers), aggregate] * rounds, evaluate, publish]
    # each level: the wait before its pods (none for the first), their start, its step
    levels = [POD_START_SECONDS + steps[0]]
    for before, step in pairwise(steps):
        levels.append(level_gap(requeue, POD_START_SECONDS + before) + POD_START_SECONDS + step)
    total = c.submit + FIRST_LEVEL_SECONDS + sum(levels)
    per_round = sum(levels[1 : 1 + 2 * rounds]) / rounds
    training = rounds * (c.train_samples / workers) * c.epochs * c.train_per_sample_epoch
    return {"seconds": total, "round_seconds": per_round, "training_seconds": training}


@dataclass(frozen=True)
class ImageCosts:
    """Seconds a node spends fetching an image: its compressed layers at REGISTRY_BYTES_PER_SECOND, then
    unpacking them as measured here. The steps and train images share their base's layers."""

    steps: float  # the light image, to a node holding neither
    steps_beside_train: float  # the light image, to a node holding the train image
    train: float
    train_beside_steps: float


def image_costs(images: Mapping[str, Any]) -> ImageCosts:
    """From bench/images.json (bench/images.py)."""
    shared = images["shared_bytes"]["steps+train"]

    def fetch(record: Mapping[str, Any], kept: int = 0) -> float:
        fetched = record["compressed_bytes"] - kept
        unpack = record["unpack_seconds"] * fetched / record["compressed_bytes"]
        return fetched / REGISTRY_BYTES_PER_SECOND + unpack

    steps, train = images["images"]["steps"], images["images"]["train"]
    return ImageCosts(fetch(steps), fetch(steps, shared), fetch(train), fetch(train, shared))


def load_image_costs(path: Path = IMAGES_JSON) -> tuple[ImageCosts, dict] | None:
    """The costs and the measurement they come from; None when bench/images.py has not run."""
    try:
        images = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return image_costs(images), images


# The first run on W fresh nodes: the trainers' image streamed (as infra/gke/up.sh configures GKE), both
# images pulled whole, and one TensorFlow image for every step (the project before the light image).
FIRST_RUNS = ("streamed", "pulled", "one image")


def first_run_extra(costs: ImageCosts, workers: int, rounds: int, first_run: str) -> float:
    """Seconds W fresh nodes add to the warm run's critical path, an upper bound: the first level
    (split beside init) pulls the light image; round 1's slowest trainer fetches the train image (a
    node that ran split or init keeps the shared base; with W > 1 one may have run neither); each later
    light level (every aggregate, evaluate, publish) lands on a node without the light image while one
    is left (split and init shared one node, so W - 1 are). Later rounds find every image in place."""
    if first_run == "one image":  # every node holds the one image once it ran one pod of it
        return costs.train + (costs.train if workers > 1 else 0.0)
    if first_run == "streamed":
        trainers = STREAM_START_SECONDS
    elif first_run == "pulled":
        trainers = costs.train if workers > 1 else costs.train_beside_steps
    else:
        raise ValueError(f"unknown first run: {first_run}")
    later = min(rounds + 2, workers - 1) * costs.steps_beside_train
    return costs.steps + trainers + later


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
    images: ImageCosts | None = None,
) -> list[dict]:
    """One row per W: the fewest rounds tried that reach `target`, and the predicted time then, warm
    (every image on every node) and, given the images' costs, on fresh nodes at the configured requeue."""
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
            if images is not None:
                warm = row["predicted"][f"{CONFIGURED_REQUEUE_SECONDS:g}"]["seconds"]
                row["first_run"] = {
                    name: round(warm + first_run_extra(images, workers, row["rounds"], name), 1)
                    for name in FIRST_RUNS
                }
        rows.append(row)
    return rows


def replan(rows: list[dict], c: Calibration, images: ImageCosts | None) -> list[dict]:
    """The rows again with this model's predictions, from their rounds and accuracies (results.json)."""
    accuracies = {
        row["workers"]: {row["rounds"]: (row["accuracy"], row["source"])}
        for row in rows
        if row["rounds"] is not None
    }
    fresh = predict(c, accuracies, 0.0, tuple(row["workers"] for row in rows), images)
    kept = [{key: value for key, value in row.items() if key != "first_run"} for row in rows]
    return [
        row | {key: new[key] for key in ("predicted", "first_run") if key in new}
        if row["rounds"] is not None
        else row
        for row, new in zip(kept, fresh, strict=True)
    ]


def unresolved_workers(
    runs: list[Mapping[str, Any]], target: float, workers_list: tuple[int, ...] = PLAN_WORKERS
) -> list[int]:
    """The W of the plan whose pipeline runs (if any) did not reach `target` in any round."""
    measured = accuracy_by_rounds(runs, [])
    return [w for w in workers_list if rounds_needed(measured.get(w, {}), target) is None]


def plan_details(c: Calibration, rows: list[dict], path: Path = IMAGES_JSON) -> dict:
    """What results.json keeps of the plan: the calibration, the rows (again with this model's
    predictions), and the images' measurement the first runs come from, if any."""
    loaded = load_image_costs(path)
    costs, images = loaded if loaded else (None, None)
    details: dict[str, Any] = {"calibration": asdict(c), "rows": replan(rows, c, costs)}
    if images is not None:
        details["images"] = images
    return details
