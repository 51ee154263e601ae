"""`make bench`: every contender on full MNIST, one after another on this machine; prints the targets met.

Stages (--only picks some, in this order): baseline (the replaced system's method), default (the pipeline
with PipelineSettings' defaults, once per seed), centralized (the same network in one process, per seed
and learning rate), baseline-settings (the pipeline with the replaced system's settings), workers-2 (the
defaults with 2 workers), calibration (1 worker, 1 round, one task at a time: the plan's task times),
fedavg (the one-process simulation, for the plan's accuracies where no pipeline run reached the target:
the default rounds, then doubled up to --max-rounds),
preprocessing (the page's benchmark, bench/preprocessing.py, when it exists). --sweep adds pipeline
sweeps. Writes results.json, results.md, results.png and plan.png into --out-dir.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import plan
from bench.measure import Measurement, cpu_model, measure, measure_ok, python_module
from bench.pipeline_run import run_pipeline
from bench.report import pipeline_runs_at_defaults, settings_text, table, write_outputs
from bench.targets import TARGET_ACCURACY, check_all, extra_rows
from steps.lib import defaults
from steps.lib.arguments import add_source_argument, non_negative_int, positive_int
from steps.lib.mnist import fetch_source, load_mnist
from steps.lib.registry import LATEST_KEY
from workflows.pipeline.settings import PipelineSettings

BENCH_DIR = Path(__file__).resolve().parent
# The replaced system's settings (its WORKER_NUMBER, EPOCH, BATCH; it averaged once).
BASELINE_SETTINGS = {"workers": 3, "epochs": 2, "batch": 100, "rounds": 1}
CENTRALIZED_LEARNING_RATES = (1e-3, 2e-3, 3e-3)
CENTRALIZED_BATCH = 100
CENTRALIZED_MAX_EPOCHS = 10
PREPROCESSING_MODULE = "bench.preprocessing"  # the page's benchmark
# Its first 2000 test digits (all 10000 take about a quarter of an hour on 2 cores: past the budget).
PREPROCESSING_FLAGS = ("--count=2000",)
STAGES = (
    "baseline",
    "default",
    "centralized",
    "baseline-settings",
    "workers-2",
    "calibration",
    "fedavg",
    "preprocessing",
)
SWEEPS = {
    "workers": [{"workers": n} for n in (1, 2, 3, 5, 8)],
    "rounds": [{"rounds": n} for n in (1, 2, 3, 5)],
    "noniid": [{"workers": 5, "partition": "dirichlet", "alpha": a} for a in (0.1, 0.5, 1.0)],
}


def names(allowed: tuple[str, ...] | dict) -> Callable[[str], list[str]]:
    """argparse type: a comma-separated list of names from `allowed`."""

    def parse(text: str) -> list[str]:
        chosen = [name for name in text.split(",") if name]
        unknown = [name for name in chosen if name not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown)} (choose from {', '.join(allowed)})"
            )
        return chosen

    return parse


def seeds(text: str) -> list[int]:
    values = [non_negative_int(part) for part in text.split(",") if part]
    if not values:
        raise argparse.ArgumentTypeError("give at least one seed")
    return values


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_argument(parser)
    parser.add_argument(
        "--limit",
        type=non_negative_int,
        default=0,
        help="train on this many digits, 0 = all: a quick look, labelled as not a result",
    )
    parser.add_argument(
        "--only", type=names(STAGES), default=list(STAGES), help="comma-separated stages"
    )
    parser.add_argument(
        "--seeds",
        type=seeds,
        default=[0, 1, 2],
        help="the pipeline's --seed values (default 0,1,2)",
    )
    parser.add_argument(
        "--sweep", type=names(SWEEPS), default=[], help=f"also these sweeps: {', '.join(SWEEPS)}"
    )
    parser.add_argument(
        "--max-rounds",
        type=positive_int,
        default=2 * PipelineSettings().rounds,
        help="the simulation tries the default rounds, then doubles them up to this (default: "
        "twice the default rounds)",
    )
    parser.add_argument("--out-dir", type=Path, default=BENCH_DIR, help="where results go")
    return parser


@dataclass
class Session:
    """One benchmark: its arguments, its scratch folder, what it measured so far."""

    args: argparse.Namespace
    work: Path
    results: dict
    # the first default run's published model, for the page's benchmark
    model_uri: str | None = None
    extra_targets: list[dict] = field(default_factory=list)

    @property
    def runs(self) -> dict:
        return self.results["runs"]

    @property
    def first_seed(self) -> int:
        return self.args.seeds[0]

    def data_flags(self, seed: int) -> list[str]:
        return [f"--source={self.args.source}", f"--limit={self.args.limit}", f"--seed={seed}"]

    def pipeline(
        self, label: str, overrides: dict, seed: int, parallelism: int | None = None
    ) -> dict:
        """One pipeline run; the first default run's store is kept for the page's benchmark."""
        print(f"== {label}: {settings_text(overrides) or 'defaults'}, seed {seed}", flush=True)
        work = self.work / f"{len(list(self.work.iterdir()))}-{label}"
        record = run_pipeline(
            {**overrides, "seed": seed, "limit": self.args.limit},
            self.args.source,
            work,
            TARGET_ACCURACY,
            parallelism,
        )
        if self.model_uri is None and label == "default":
            self.model_uri = str(work / "store" / LATEST_KEY)
        else:
            shutil.rmtree(work, ignore_errors=True)
        print(
            f"== {label}: accuracy {record['accuracy']:.4f}, wall {record['wall_seconds']:.0f} s, "
            f"outside training {record['outside']['outside_share']:.0%}",
            flush=True,
        )
        return record


def json_object(text: str) -> dict | None:
    """The line as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def json_lines(measured: Measurement) -> list[tuple[float, dict]]:
    """(seconds since start, object) for each stdout line that is a JSON object."""
    return [(at, value) for at, text in measured.lines if (value := json_object(text)) is not None]


def stage_baseline(session: Session) -> None:
    settings = {k: v for k, v in BASELINE_SETTINGS.items() if k != "rounds"}
    print(f"== baseline: the replaced system's method, {settings_text(settings)}", flush=True)
    flags = [f"--{name}={value}" for name, value in settings.items()]
    measured = measure_ok(
        python_module("bench.baseline_method", *session.data_flags(session.first_seed), *flags)
    )
    at, line = json_lines(measured)[-1]
    seconds = at - line["scoring_seconds"]
    session.runs["baseline"] = {
        "settings": settings | {"seed": session.first_seed},
        "accuracy": line["accuracy"],
        "worker_accuracies": line["worker_accuracies"],
        "time_to_target": seconds if line["accuracy"] >= TARGET_ACCURACY else None,
        **measured.record(),
    }


def stage_default(session: Session) -> None:
    runs = session.runs.setdefault("default", [])  # filled as it goes: a later failure keeps these
    for seed in session.args.seeds:
        runs.append(session.pipeline("default", {}, seed))


def centralized_run(session: Session, seed: int, learning_rate: float) -> dict:
    print(f"== centralized: seed {seed}, learning rate {learning_rate:g}", flush=True)
    measured = measure_ok(
        python_module(
            "bench.centralized",
            *session.data_flags(seed),
            f"--epochs={CENTRALIZED_MAX_EPOCHS}",
            f"--batch={CENTRALIZED_BATCH}",
            f"--learning-rate={learning_rate}",
            f"--target={TARGET_ACCURACY}",
        )
    )
    curve = [
        {
            "epoch": line["epoch"],
            "seconds": round(at - line["scoring_seconds"], 1),
            "accuracy": line["accuracy"],
        }
        for at, line in json_lines(measured)
    ]
    reached = [p["seconds"] for p in curve if p["accuracy"] >= TARGET_ACCURACY]
    return {
        "seed": seed,
        "learning_rate": learning_rate,
        "batch": CENTRALIZED_BATCH,
        "curve": curve,
        "accuracy": curve[-1]["accuracy"],
        "time_to_target": reached[0] if reached else None,
        **measured.record(),
    }


def stage_centralized(session: Session) -> None:
    runs = session.runs.setdefault("centralized", [])
    for seed in session.args.seeds:
        for rate in CENTRALIZED_LEARNING_RATES:
            runs.append(centralized_run(session, seed, rate))


def stage_baseline_settings(session: Session) -> None:
    session.runs["baseline_settings"] = session.pipeline(
        "baseline-settings", BASELINE_SETTINGS, session.first_seed
    )


def stage_workers_2(session: Session) -> None:
    session.runs["workers_2"] = session.pipeline("workers-2", {"workers": 2}, session.first_seed)


def stage_calibration(session: Session) -> None:
    session.runs["calibration"] = session.pipeline(
        "calibration", {"workers": 1, "rounds": 1}, session.first_seed, parallelism=1
    )


def measured_pipelines(session: Session) -> list[dict]:
    """Pipeline runs at the defaults but for the workers, first seed: the plan's measured accuracies."""
    return list(pipeline_runs_at_defaults(session.results))


def stage_fedavg(session: Session) -> None:
    workers = plan.unresolved_workers(measured_pipelines(session), TARGET_ACCURACY)
    if not workers:
        print("== fedavg: every planned W was measured by the pipeline itself", flush=True)
        return
    defaults = PipelineSettings()
    rounds = [defaults.rounds]
    while rounds[-1] * 2 <= session.args.max_rounds:
        rounds.append(rounds[-1] * 2)
    print(
        f"== fedavg: simulating {', '.join(map(str, workers))} workers, "
        f"{' or '.join(map(str, rounds))} rounds",
        flush=True,
    )
    measured = measure_ok(
        python_module(
            "bench.fedavg",
            *session.data_flags(session.first_seed),
            f"--workers={','.join(map(str, workers))}",
            f"--rounds={','.join(map(str, rounds))}",
            f"--epochs={defaults.epochs}",
            f"--batch={defaults.batch}",
            f"--learning-rate={defaults.learning_rate}",
            f"--final-learning-rate={defaults.final_learning_rate}",
            f"--target={TARGET_ACCURACY}",
        )
    )
    session.results["fedavg"] = [line for _, line in json_lines(measured)]


def stage_preprocessing(
    session: Session,
    module: str = PREPROCESSING_MODULE,
    flags: tuple[str, ...] = PREPROCESSING_FLAGS,
) -> None:
    """The page's benchmark, when it exists: `python -m <module> --source S [--model-uri U] FLAGS`.

    Every stdout line that is a JSON object is kept as a record (a "targets" object of name → met adds
    rows to the targets table), every other line as text (the benchmark's scratch folder named as
    such); its exit code is recorded, not enforced.
    """
    if importlib.util.find_spec(module) is None:
        print(f"== preprocessing: {module} is not there; skipped", flush=True)
        return
    print(f"== preprocessing: python -m {module}", flush=True)
    arguments = [f"--source={session.args.source}", *flags]
    if session.model_uri:
        arguments.append(f"--model-uri={session.model_uri}")
    measured = measure(python_module(module, *arguments))
    records = [line for _, line in json_lines(measured)]
    text = [
        line.replace(str(session.work), "<scratch>")
        for _, line in measured.lines
        if json_object(line) is None
    ]
    session.results["preprocessing"] = {
        "returncode": measured.returncode,
        "records": records,
        "text": text,
        "stderr_tail": measured.stderr.splitlines()[-5:] if measured.returncode else [],
        **measured.record(),
    }
    for record in records:
        if isinstance(record.get("targets"), dict):
            session.extra_targets += extra_rows("P", record["targets"])


def run_sweeps(session: Session) -> None:
    for sweep in session.args.sweep:
        for change in SWEEPS[sweep]:
            record = session.pipeline(f"sweep-{sweep}", change, session.first_seed)
            session.results["sweeps"].append(record | {"sweep": sweep})


def compute_plan(session: Session) -> None:
    runs = session.runs
    if "calibration" not in runs:
        return
    pipelines = [
        *runs.get("default", []),
        *(runs[key] for key in ("baseline_settings", "workers_2", "calibration") if key in runs),
        *session.results.get("sweeps", []),
    ]
    calibration = plan.calibrate(runs["calibration"], pipelines, session.results["train_count"])
    accuracies = plan.accuracy_by_rounds(
        measured_pipelines(session), session.results.get("fedavg", [])
    )
    session.results["plan"] = plan.plan_details(
        calibration, plan.predict(calibration, accuracies, TARGET_ACCURACY)
    )


STAGE_FUNCTIONS = {
    "baseline": stage_baseline,
    "default": stage_default,
    "centralized": stage_centralized,
    "baseline-settings": stage_baseline_settings,
    "workers-2": stage_workers_2,
    "calibration": stage_calibration,
    "fedavg": stage_fedavg,
    "preprocessing": stage_preprocessing,
    "sweeps": run_sweeps,
}


def machine() -> dict:
    # The project installs tensorflow-cpu where it exists, tensorflow elsewhere (pyproject.toml).
    distribution = importlib.metadata.packages_distributions().get("tensorflow", ["tensorflow"])[0]
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "gpu": "none",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": importlib.metadata.version(distribution),
    }


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if "://" not in args.source:
        args.source = str(Path(args.source).resolve())
    started = time.monotonic()
    # the digits the pipeline trains on: all but those split holds out
    train_count = len(load_mnist(fetch_source(args.source))[0]) - defaults.VALIDATION
    results: dict = {
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "source": Path(args.source).name,
        "limit": args.limit,
        "train_count": train_count,
        "train_samples": args.limit or train_count,
        "seeds": args.seeds,
        "load_before": os.getloadavg()[0],
        "machine": machine(),
        "defaults": asdict(PipelineSettings()),
        "runs": {},
        "sweeps": [],
    }
    session = Session(args, Path(tempfile.mkdtemp(prefix="bench-")).resolve(), results)
    failures = results["failures"] = []
    try:
        for stage in [*(s for s in STAGES if s in args.only), *(["sweeps"] if args.sweep else [])]:
            try:
                STAGE_FUNCTIONS[stage](session)
            except Exception as error:  # a contender or the benchmark failed: the others still run
                traceback.print_exc()
                text = f"{type(error).__name__}: {error}"
                print(f"== {stage} FAILED: {text}", flush=True)
                failures.append({"stage": stage, "error": text[-2000:]})
    finally:
        shutil.rmtree(session.work, ignore_errors=True)
    compute_plan(session)
    results["targets"] = check_all(session.runs, session.extra_targets)
    results["minutes"] = (time.monotonic() - started) / 60
    write_outputs(results, args.out_dir)
    verdict = {True: "met", False: "NOT MET", None: "not measured"}
    rows = [
        [t["number"], t["target"], t["measured"], verdict[t["met"]]] for t in results["targets"]
    ]
    print(table(["#", "Target", "Measured", "Met"], rows))
    print(f"written: {args.out_dir}/results.md (and .json, .png)")
    for failure in failures:
        print(f"stage {failure['stage']} failed; its targets are not measured", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
