"""One measured pipeline run: `workflows/submit.py --local`, then read from the runner's run summary.

Around the run the benchmark watches the trainers' logs for their per-epoch lines (so it knows when each
epoch ended) and puts its import probe (bench/probe) on the steps' PYTHONPATH (so it knows which step
processes loaded TensorFlow). After the run it scores every round's averaged model on the test digits,
off the clock.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

from bench import timeline
from bench.measure import Measurement, measure_ok, python_module
from steps.lib.storage import open_store
from workflows.local.outcome import SUMMARY_FILE
from workflows.pipeline.settings import PipelineSettings, declared, flag_of
from workflows.pipeline.workflow import compile_workflow

PROBE_DIR = Path(__file__).resolve().parent / "probe"
POLL_SECONDS = 0.2
UNRECORDED = ("store", "image", "train_image", "serve", "min_accuracy", "max_accuracy_drop")
# A benchmark measures whatever a setting scores: each run, in a store of its own, is served.
MEASURE_EVERY_RUN = {"serve": "always"}


class LogWatcher:
    """Polls a logs folder and notes when each complete line first appeared (time.monotonic())."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.seen: dict[str, list[tuple[float, str]]] = {}
        self._offsets: dict[Path, int] = {}
        self._pending: dict[Path, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> LogWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.poll()

    def poll(self) -> None:
        now = time.monotonic()
        for path in sorted(self.folder.glob("*/*.log")):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as stream:
                stream.seek(offset)
                chunk = stream.read()
            self._offsets[path] = offset + len(chunk)
            text = self._pending.pop(path, "") + chunk.decode(errors="replace")
            *complete, rest = text.split("\n")
            if rest:
                self._pending[path] = rest
            self.seen.setdefault(str(path), []).extend((now, line) for line in complete)


def submit_command(settings: PipelineSettings, work: Path, parallelism: int | None) -> list[str]:
    """Every setting as its flag, so nothing comes from the environment's defaults."""
    values = asdict(settings)
    flags = [f"{flag_of(name, spec)}={values[name]}" for name, spec in declared()]
    if parallelism:
        flags.append(f"--parallelism={parallelism}")
    return [*python_module("workflows.submit"), "--local", *flags, f"--logs-dir={work / 'logs'}"]


def settings_record(settings: PipelineSettings) -> dict:
    """The settings a run trained with, without where this machine kept it (store), its images or
    whether publish served it."""
    values = asdict(settings) | {"source": Path(settings.source).name}
    return {name: value for name, value in values.items() if name not in UNRECORDED}


def run_pipeline(
    overrides: dict[str, object],
    source: str,
    work: Path,
    target: float,
    parallelism: int | None = None,
) -> dict:
    """One measured run with the defaults changed by `overrides` (field names of PipelineSettings).

    `work` is an empty folder for the run's store, logs and probes; the caller removes it.
    """
    settings = replace(
        PipelineSettings(),
        **(MEASURE_EVERY_RUN | overrides),
        source=source,
        store=str(work / "store"),
    )
    (work / "probes").mkdir(parents=True)
    (work / "logs").mkdir()
    environment: dict[str, str | None] = {
        "BENCH_PROBE_DIR": str(work / "probes"),
        "PYTHONPATH": str(PROBE_DIR),  # measure() adds the project root after it
        **{spec.env: None for _, spec in declared() if spec.env},
    }
    with LogWatcher(work / "logs") as watcher:
        measured = measure_ok(submit_command(settings, work, parallelism), environment=environment)
    (summary_path,) = (work / "logs").glob(f"*/{SUMMARY_FILE}")
    summary = json.loads(summary_path.read_text())
    workflow = compile_workflow(settings)
    probes = [json.loads(path.read_text()) for path in sorted((work / "probes").glob("*.json"))]
    log_lines = {
        path: [(at - measured.started, line) for at, line in lines]
        for path, lines in watcher.seen.items()
    }
    return describe_run(summary, workflow, measured, log_lines, probes, work, settings, target)


def describe_run(
    summary: dict,
    workflow: dict,
    measured: Measurement,
    log_lines: dict[str, list[tuple[float, str]]],  # log → (seconds since the start, line)
    probes: list[dict],
    work: Path,
    settings: PipelineSettings,
    target: float,
) -> dict:
    """The run's record: accuracy, costs, the per-round curve, where the time went."""
    if summary["phase"] != "Succeeded":
        raise RuntimeError(f"run {summary['name']} {summary['phase']}: {summary['message']}")
    rounds = timeline.rounds_of(summary, workflow)
    offset = measured.wall_seconds - summary["seconds"]  # submit's own start, before the runner's
    aggregates = {
        rounds[node["name"]]: node["finished"]
        for node in summary["nodes"]
        if node["template"] == timeline.AVERAGING_STEP and node["name"] in rounds
    }
    models = download_round_models(summary, workflow, work)
    scores = score_models(list(models.values()), settings.source)
    curve = [
        {"round": number, "seconds": round(offset + aggregates[number], 1), "accuracy": scores[i]}
        for i, number in enumerate(models)
    ]
    (evaluate,) = [node for node in summary["nodes"] if node["template"] == "evaluate"]
    accuracy = float(evaluate["outputs"]["accuracy"])
    trainers = [node for node in summary["nodes"] if node["template"] == timeline.TRAINING_STEP]
    epochs_by_log = {
        path: [
            seconds for _, line in lines if (seconds := timeline.epoch_seconds(line)) is not None
        ]
        for path, lines in log_lines.items()
    }
    epoch_spans = [
        span
        for node in trainers
        for span in timeline.epoch_intervals(log_lines.get(node["log"], []))
    ]
    per_round = timeline.round_seconds(summary, rounds)
    return {
        "run": summary["name"],
        "settings": settings_record(settings),
        "accuracy": accuracy,
        "reached": accuracy >= target,
        "curve": curve,
        **measured.record(),
        "round_seconds": [round(r["seconds"], 1) for r in per_round],
        "mean_round_seconds": round(sum(r["seconds"] for r in per_round) / len(per_round), 1),
        "outside": timeline.outside_training(measured.wall_seconds, epoch_spans),
        "steps": {
            name: [round(s, 2) for s in seconds]
            for name, seconds in timeline.step_seconds(summary).items()
        },
        "tensorflow": timeline.tensorflow_imports(probes),
        "trainers": [
            {
                "seconds": round(node["finished"] - node["started"], 2),
                "epoch_seconds": round(sum(epochs_by_log.get(node["log"], [])), 2),
            }
            for node in trainers
        ],
        "model_bytes": next(iter(models.values())).stat().st_size,
        "submit_seconds": round(offset, 2),
    }


def download_round_models(summary: dict, workflow: dict, work: Path) -> dict[int, Path]:
    """Round → a local copy of the model its averaging wrote, found through the spec's artifact keys."""
    store = open_store(work / "store")
    models = {}
    for number, key in timeline.round_model_keys(summary, workflow).items():
        local = work / "scoring" / f"round-{number}.h5"
        local.parent.mkdir(exist_ok=True)
        store.download_file(key, local)
        models[number] = local
    return models


def score_models(models: list[Path], source: str) -> list[float]:
    """Test accuracy of each model, in order (bench.score in its own process)."""
    measured = measure_ok(
        python_module("bench.score", f"--source={source}", *map(str, models)), echo=False
    )
    scores = json.loads(measured.lines[-1][1])
    return [scores[str(model)] for model in models]
