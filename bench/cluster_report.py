"""The figures and the table of bench/cluster_timing.py's measurements, from its saved records alone.

A measurement holds cluster runs (each with its Workflow and pods, analysed by bench/cluster_levels.py)
at one or more DEFAULT_REQUEUE_TIME values, and local runs (their totals). Every figure is a mean with
its minimum, maximum and count: the gap between levels per requeue value, the pods' start over every run
(Kubernetes' part, which the requeue does not touch), and the runs' totals.

The gap follows from how the controller queues a workflow: a significant change of one of its pods
(workflow/controller/pod/significant.go) adds it to the queue DEFAULT_REQUEUE_TIME later
(rate_limiters.go), and a later change does not push that back (client-go's delaying queue keeps the
earliest time). The controller last looked at the run when it created the level's pods, so a pod that
ends within the requeue of its creation is seen at its creation plus the requeue: a gap of the requeue
less the pod's life. A pod that lives longer was seen running, and the next change is its end: a gap of
about the requeue. Each gap is split by which case it is, with its excess over what the rule gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from statistics import mean
from typing import Any

from bench.cluster_levels import RunTiming, analyse

TRAIN_TEMPLATE = "train"
PARTS = {
    "gaps": "the controller's gaps",
    "starts": "the pods' starts",
    "steps": "the steps (main containers)",
    "uploads": "the wait containers after them",
    "end": "the run's end after its last pod",
}
ARGO_DEFAULT_REQUEUE = 10.0  # workflow/controller/rate_limiters.go: envRequeueTime's default
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def requeue_seconds(value: str) -> float:
    """A DEFAULT_REQUEUE_TIME as seconds: a Go duration (`2s`, `1m30s`), or `unset` for Argo's default."""
    if value == "unset":
        return ARGO_DEFAULT_REQUEUE
    parts = DURATION.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        raise ValueError(f"not a duration: {value!r}")
    return sum(float(number) * UNITS[unit] for number, unit in parts)


def stats(values: Iterable[float]) -> dict[str, float]:
    found = list(values)
    if not found:
        return {"n": 0}
    return {
        "n": len(found),
        "mean": round(mean(found), 2),
        "min": round(min(found), 2),
        "max": round(max(found), 2),
    }


def analysed(record: Mapping[str, Any]) -> RunTiming:
    return analyse(record["workflow"], record["pods"])


def trains(level: Any) -> bool:
    return all(pod.template == TRAIN_TEMPLATE for pod in level.pods)


def run_line(record: Mapping[str, Any]) -> str:
    """One line for a run as it ends."""
    if record["engine"] == "local":
        return f"local   {record['run']} seed {record['seed']}: {record['total']:.1f} s"
    timing = analysed(record)
    gaps = ", ".join(f"{level.gap:.0f}" for level in timing.levels)
    starts = ", ".join(f"{pod.start:.0f}" for level in timing.levels for pod in level.pods)
    return (
        f"cluster {timing.name} seed {record['seed']} requeue {record['requeue']}: "
        f"{timing.total:.0f} s; gaps {gaps} s; pod starts {starts} s"
    )


def combined(measurements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Measurements of the same settings as one: their runs, and the figures over them all."""
    if not measurements:
        raise ValueError("no measurement")
    first = measurements[0]
    for other in measurements[1:]:
        if other["settings"] != first["settings"]:
            raise ValueError(f"different settings: {first['settings']} and {other['settings']}")
    runs = [run for measured in measurements for run in measured["runs"]]
    return {
        "measured": [m["measured"] for m in measurements],
        "commands": [m["command"] for m in measurements],
        "settings": first["settings"],
        "seeds": sorted({run["seed"] for run in runs}),
        "machine": first["machine"],
        "runs": runs,
        "figures": figures(runs),
    }


def figures(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures over these runs (the records of bench/cluster_timing.py)."""
    by_requeue: dict[str, list[RunTiming]] = {}
    for record in runs:
        if record["engine"] == "cluster":
            by_requeue.setdefault(record["requeue"], []).append(analysed(record))
    timings = [timing for group in by_requeue.values() for timing in group]
    pods = [pod for timing in timings for level in timing.levels for pod in level.pods]
    requeue = {}
    excess: dict[str, list[float]] = {"short": [], "long": []}
    for value, group in by_requeue.items():
        seconds = requeue_seconds(value)
        later = [level for timing in group for level in timing.levels[1:]]
        short = [level for level in later if (level.after_life or 0) < seconds]
        long = [level for level in later if (level.after_life or 0) >= seconds]
        excess["short"] += [level.gap - (seconds - (level.after_life or 0)) for level in short]
        excess["long"] += [level.gap - seconds for level in long]
        requeue[value] = {
            "seconds": seconds,
            "runs": len(group),
            "first_level": stats(timing.levels[0].gap for timing in group),
            "gap": stats(level.gap for level in later),
            "gap_into_train": stats(level.gap for level in later if trains(level)),
            "gap_into_others": stats(level.gap for level in later if not trains(level)),
            "noticed": stats(level.noticed for level in later if level.noticed is not None),
            "gap_after_short": stats(level.gap for level in short),
            "excess_after_short": stats(
                level.gap - seconds + (level.after_life or 0) for level in short
            ),
            "gap_after_long": stats(level.gap for level in long),
            "excess_after_long": stats(level.gap - seconds for level in long),
            "total": stats(timing.total for timing in group),
            "parts": {
                part: stats(timing.parts()[part] for timing in group)
                for part in ("gaps", "starts", "steps", "uploads", "end")
            },
        }
    return {
        "requeue": requeue,
        "excess_after_short": stats(excess["short"]),
        "excess_after_long": stats(excess["long"]),
        "pod_start": stats(pod.start for pod in pods),
        "pod_start_train": stats(pod.start for pod in pods if pod.template == TRAIN_TEMPLATE),
        "pod_start_others": stats(pod.start for pod in pods if pod.template != TRAIN_TEMPLATE),
        "scheduling": stats(pod.scheduling for pod in pods),
        "init": stats(pod.init for pod in pods),
        "local_total": stats(run["total"] for run in runs if run["engine"] == "local"),
    }


def spread(figure: Mapping[str, float], digits: int = 1) -> str:
    """`2.1 s (2 to 3)`, or an empty cell."""
    if not figure.get("n"):
        return ""
    return f"{figure['mean']:.{digits}f} s ({figure['min']:.0f} to {figure['max']:.0f})"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def level_rows(runs: Sequence[Mapping[str, Any]], requeues: list[str]) -> list[list[str]]:
    """One row per level: its tasks, the gap before it at each requeue value, its pods' start."""
    levels: dict[int, dict[str, Any]] = {}
    for record in runs:
        if record["engine"] != "cluster":
            continue
        for level in analysed(record).levels:
            entry = levels.setdefault(level.number, {"tasks": set(), "gaps": {}, "pods": []})
            entry["tasks"].update(level.tasks)
            entry["gaps"].setdefault(record["requeue"], []).append(level.gap)
            entry["pods"].extend(level.pods)
    rows = []
    for number, entry in sorted(levels.items()):
        pods = entry["pods"]
        rows.append(
            [
                str(number),
                ", ".join(sorted(entry["tasks"])),
                *(spread(stats(entry["gaps"].get(value, []))) for value in requeues),
                spread(stats(pod.start for pod in pods)),
                spread(stats(pod.scheduling for pod in pods)),
                spread(stats(pod.init for pod in pods)),
            ]
        )
    return rows


def totals(values: Iterable[float]) -> str:
    found = list(values)
    return ", ".join(f"{value:.0f}" for value in found) + " s" if found else ""


def markdown(report: Mapping[str, Any]) -> str:
    """The measurement's description, the per-level table and the summary table."""
    settings, machine, figures_ = report["settings"], report["machine"], report["figures"]
    requeues = list(figures_["requeue"])
    flags = " ".join(f"--{name} {value}" for name, value in settings.items())
    nodes = ", ".join(f"{node['name']} ({node['cpu']} CPUs)" for node in machine["nodes"])
    intro = (
        f"Measured {', '.join(report['measured'])} with "
        + "; ".join(f"`{command}`" for command in report["commands"])
        + f": runs of `{flags} --serve never`, seeds {', '.join(map(str, report['seeds']))}, on "
        f"{machine['kubernetes']} ({nodes}; {machine['controller_image']}); CPU {machine['cpu_model']}. "
        "Kubernetes and Argo stamp times to the second: each value is within a second of the truth; "
        "mean (min to max) over the runs."
    )
    levels = table(
        [
            "Level",
            "Tasks",
            *(f"Gap before it, requeue {value}" for value in requeues),
            "Pod start (creation to main running)",
            "of it: scheduling",
            "init container",
        ],
        level_rows(report["runs"], requeues),
    )
    local = [run["total"] for run in report["runs"] if run["engine"] == "local"]

    def row(label: str, key: str) -> list[str]:
        return [label, *(spread(figures_["requeue"][value][key]) for value in requeues), ""]

    cluster_totals = {
        value: [
            analysed(run).total
            for run in report["runs"]
            if run["engine"] == "cluster" and run["requeue"] == value
        ]
        for value in requeues
    }
    summary = table(
        ["", *(f"requeue {value}" for value in requeues), "local runner"],
        [
            row("Gap between levels (the first level's excluded)", "gap"),
            row("into the trainers' levels", "gap_into_train"),
            row("into the other levels", "gap_into_others"),
            row("of it: until the previous level's task node ended", "noticed"),
            row("after a pod that lived less than the requeue", "gap_after_short"),
            row("above the requeue less that pod's life", "excess_after_short"),
            row("after a pod that lived longer", "gap_after_long"),
            row("above the requeue", "excess_after_long"),
            row("First level, after the Workflow's start", "first_level"),
            [
                "Run's total (the Workflow's start to end; local: the runner's)",
                *(totals(cluster_totals[value]) for value in requeues),
                totals(local),
            ],
            *(
                [
                    f"of it: {label}",
                    *(spread(figures_["requeue"][value]["parts"][part]) for value in requeues),
                    "",
                ]
                for part, label in PARTS.items()
            ),
        ],
    )
    starts = (
        f"Pod start over all {figures_['pod_start']['n']} pods: {spread(figures_['pod_start'])}; "
        f"trainers {spread(figures_['pod_start_train'])}, the other steps "
        f"{spread(figures_['pod_start_others'])}; of it scheduling {spread(figures_['scheduling'])}, "
        f"Argo's init container {spread(figures_['init'])}."
    )
    return "\n\n".join([intro, levels, summary, starts]) + "\n"
