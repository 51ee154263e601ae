"""Where a pipeline run's time went, from the local runner's run summary (`<logs>/<run>/summary.json`), the
compiled workflow it ran, the trainers' per-epoch log lines and the benchmark's import probe.

Pure functions over those records: the benchmark's tests feed them made-up runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workflows.local.spec import substitute, templates_by_name

# steps.lib.keras_model.EpochLogger's line in a trainer's log: "epoch 2/2: accuracy 0.98 loss 0.06 (7.9 s)"
EPOCH_LINE = re.compile(r"^epoch \d+/\d+: .*\((\d+(?:\.\d+)?) s\)$")
TRAINING_STEP = "train"
AVERAGING_STEP = "aggregate"


def epoch_seconds(line: str) -> float | None:
    """The seconds an epoch line reports; None for any other line."""
    match = EPOCH_LINE.match(line.strip())
    return float(match.group(1)) if match else None


def dag_tasks(workflow: Mapping[str, Any]) -> dict[str, dict]:
    """Every DAG task of the compiled workflow by name."""
    return {
        task["name"]: task
        for template in workflow["spec"]["templates"]
        for task in template.get("dag", {}).get("tasks", [])
    }


def task_arguments(task: Mapping[str, Any]) -> dict[str, str]:
    return {
        p["name"]: str(p.get("value", "")) for p in task.get("arguments", {}).get("parameters", [])
    }


def rounds_of(summary: Mapping[str, Any], workflow: Mapping[str, Any]) -> dict[str, int]:
    """Node name → the round its task belongs to (the task's `round` argument in the spec)."""
    tasks = dag_tasks(workflow)
    rounds = {}
    for node in summary["nodes"]:
        arguments = task_arguments(tasks.get(node["task"], {}))
        if "round" in arguments:
            rounds[node["name"]] = int(arguments["round"])
    return rounds


def round_model_keys(summary: Mapping[str, Any], workflow: Mapping[str, Any]) -> dict[int, str]:
    """Round → the store key of the model its averaging step wrote (the spec's output artifact)."""
    template = templates_by_name(workflow)[AVERAGING_STEP]
    (artifact,) = [a for a in template["outputs"]["artifacts"] if a["name"] == "model"]
    tasks = dag_tasks(workflow)
    keys = {}
    for node in summary["nodes"]:
        if node["template"] != AVERAGING_STEP or node["phase"] != "Succeeded":
            continue
        arguments = task_arguments(tasks[node["task"]])
        values = {"workflow.name": summary["name"]} | {
            f"inputs.parameters.{name}": value for name, value in arguments.items()
        }
        keys[int(arguments["round"])] = substitute(artifact["gcs"]["key"], values, node["name"])
    return dict(sorted(keys.items()))


def round_seconds(summary: Mapping[str, Any], rounds: Mapping[str, int]) -> list[dict]:
    """Each round from its first trainer's start to the end of its averaging, in the runner's seconds."""
    spans: dict[int, dict] = {}
    for node in summary["nodes"]:
        if node["name"] not in rounds or node["started"] is None:
            continue
        span = spans.setdefault(rounds[node["name"]], {"start": None, "end": None})
        if node["template"] == TRAINING_STEP:
            if span["start"] is None or node["started"] < span["start"]:
                span["start"] = node["started"]
        elif node["template"] == AVERAGING_STEP:
            span["end"] = node["finished"]
    return [
        {
            "round": number,
            "start": span["start"],
            "end": span["end"],
            "seconds": span["end"] - span["start"],
        }
        for number, span in sorted(spans.items())
        if span["start"] is not None and span["end"] is not None
    ]


def step_seconds(summary: Mapping[str, Any]) -> dict[str, list[float]]:
    """Seconds of each node that is not a trainer, by its template (split, init, aggregate, ...)."""
    seconds: dict[str, list[float]] = {}
    for node in summary["nodes"]:
        if node["template"] == TRAINING_STEP or node["started"] is None or node["finished"] is None:
            continue
        seconds.setdefault(node["template"], []).append(node["finished"] - node["started"])
    return seconds


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def epoch_intervals(seen: Iterable[tuple[float, str]]) -> list[tuple[float, float]]:
    """(when an epoch line appeared, the line) → the epoch's span, ending when its line appeared."""
    spans = []
    for at, line in seen:
        seconds = epoch_seconds(line)
        if seconds is not None:
            spans.append((at - seconds, at))
    return spans


def outside_training(wall_seconds: float, epochs: Iterable[tuple[float, float]]) -> dict:
    """The run's wall time during which no trainer was inside its epochs, and its share of the run."""
    training = union_seconds((max(0.0, start), min(end, wall_seconds)) for start, end in epochs)
    outside = wall_seconds - training
    return {
        "training_seconds": round(training, 1),
        "outside_seconds": round(outside, 1),
        "outside_share": round(outside / wall_seconds, 3) if wall_seconds else None,
    }


def tensorflow_imports(probes: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """Step (the module a process ran) → whether any of its processes had TensorFlow loaded at exit."""
    loaded: dict[str, bool] = {}
    for probe in probes:
        if not probe.get("argv"):
            continue
        step = Path(probe["argv"][0]).stem
        loaded[step] = loaded.get(step, False) or bool(probe["tensorflow"])
    return loaded
