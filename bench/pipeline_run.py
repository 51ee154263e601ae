"""Run the pipeline through `workflows/submit.py --local` and read its cost from the runner's output and logs."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from bench.measure import PROJECT_ROOT, Measurement, measure, python_module

# The local runner's progress lines: "   12.3s  done     train-round-1(0:0) (30.1s)"
TASK_LINE = re.compile(r"^\s*[\d.]+s\s+(started|done)\s+(\S+)(?: \(([\d.]+)s)?")
EPOCH_LINE = re.compile(r"^epoch \d+/\d+: .*\(([\d.]+) s\)$")
RUN_LINE = re.compile(r"^run (\S+) (Succeeded|Failed) in")


def task_kind(node: str) -> str:
    """'train-round-2(1:1)' → 'train'; 'aggregate-round-1' → 'aggregate'."""
    return node.split("-round-")[0].split("(")[0]


def parse_runner_output(lines: list[tuple[float, str]]) -> dict:
    """Task durations, when each round's average was ready (seconds since submit started), the run id."""
    durations: dict[str, float] = {}
    round_ready: dict[int, float] = {}
    run = None
    for at, line in lines:
        if match := TASK_LINE.match(line):
            state, node, seconds = match.groups()
            if state == "done":
                durations[node] = float(seconds)
                if node.startswith("aggregate-round-"):
                    round_ready[int(node.removeprefix("aggregate-round-"))] = at
        elif match := RUN_LINE.match(line):
            run = match.group(1)
    return {"run": run, "durations": durations, "round_ready": round_ready}


def training_seconds(log: Path) -> float:
    """Seconds the train step itself reports spending in its epochs."""
    return sum(
        float(m.group(1)) for line in log.read_text().splitlines() if (m := EPOCH_LINE.match(line))
    )


def overhead(durations: dict[str, float], logs: Path) -> dict:
    """Where the task-seconds go: training epochs versus everything else (start, imports, artifacts)."""
    trained = sum(training_seconds(log) for log in logs.glob("train-round-*.log"))
    total = sum(durations.values())
    by_kind: dict[str, list[float]] = {}
    for node, seconds in durations.items():
        by_kind.setdefault(task_kind(node), []).append(seconds)
    return {
        "task_seconds": round(total, 1),
        "training_seconds": round(trained, 1),
        "outside_training_share": round(1 - trained / total, 3) if total else None,
        "mean_task_seconds": {kind: round(sum(s) / len(s), 1) for kind, s in by_kind.items()},
        "tasks": {kind: len(s) for kind, s in by_kind.items()},
    }


def run_pipeline(settings: dict[str, object], source: str, limit: int) -> dict:
    """One measured `submit.py --local` run; then every round's average scored on the test digits."""
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    try:
        flags = [f"--{name}={value}" for name, value in settings.items()]
        command = [
            *python_module("workflows.submit"),
            "--local",
            *flags,
            f"--limit={limit}",
            f"--source={source}",
            f"--artifacts={work / 'store'}",
            f"--logs-dir={work / 'logs'}",
        ]
        measured = measure(command)
        if measured.returncode != 0:
            raise RuntimeError(
                f"pipeline failed ({measured.returncode}):\n{measured.stderr[-2000:]}"
            )
        parsed = parse_runner_output(measured.lines)
        run = parsed["run"]
        rounds = sorted(parsed["round_ready"])
        models = [work / "store" / run / f"round-{r}" / "model.h5" for r in rounds]
        scores = json.loads(score(models, source).lines[-1][1])
        curve = [
            {"round": r, "seconds": round(parsed["round_ready"][r], 1), "accuracy": scores[str(m)]}
            for r, m in zip(rounds, models, strict=True)
        ]
        return result_of(measured, curve, overhead(parsed["durations"], work / "logs" / run))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def score(models: list[Path], source: str) -> Measurement:
    measured = measure(
        python_module("bench.score", f"--source={source}", *map(str, models)), echo=False
    )
    if measured.returncode != 0:
        raise RuntimeError(f"scoring failed:\n{measured.stderr[-2000:]}")
    return measured


def result_of(measured: Measurement, curve: list[dict], extra: dict | None = None) -> dict:
    """The common record: final accuracy, costs, the accuracy curve and the machine's load."""
    return {
        "accuracy": curve[-1]["accuracy"],
        "wall_seconds": round(measured.wall_seconds, 1),
        "cpu_seconds": round(measured.cpu_seconds, 1),
        "peak_rss_mb": round(measured.peak_rss_mb),
        "curve": curve,
        **(extra or {}),
        **measured.conditions(),
    }


__all__ = ["PROJECT_ROOT", "run_pipeline"]
