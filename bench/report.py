"""The benchmark's results as markdown (bench/results.md, which docs/results.md embeds) and
two charts drawn with matplotlib: accuracy against wall time, and the plan past this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import plan
from bench.targets import (
    BASELINE_REPORTED_ACCURACY,
    NON_TRAINING_STEPS,
    TARGET_ACCURACY,
    best_centralized,
    step_summary,
)
from bench.targets import time_to_target as pipeline_time_to_target

# What may differ from the defaults in the runs the plan reads (store and image are never recorded).
VARYING = ("workers", "rounds", "seed", "limit", "source", "store", "image", "train_image")
HIDDEN_SETTINGS = {
    "retries",
    "retry_backoff",
    "min_workers",
    "limit",
    "seed",
    "source",
    "store",
    "image",
    "train_image",
    "serve",
    "min_accuracy",
    "max_accuracy_drop",
}
RESULTS_MD, RESULTS_JSON = "results.md", "results.json"
CURVES_PNG, PLAN_PNG = "results.png", "plan.png"
PIPELINE_RUNS = {
    "baseline_settings": "Pipeline, the replaced system's settings",
    "workers_2": "Pipeline, defaults with 2 workers",
    "calibration": "Pipeline, 1 worker, 1 round, one task at a time (the plan's calibration)",
}


def settings_text(settings: Mapping[str, Any]) -> str:
    """The settings that shape training, as `name value` pairs (Dirichlet's alpha only when used)."""
    shown = {k: v for k, v in settings.items() if k not in HIDDEN_SETTINGS}
    if shown.get("partition") == "iid":
        shown.pop("partition")
        shown.pop("alpha", None)
    return ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in shown.items())


def seconds(value: float | None, missing: str = "not reached") -> str:
    return missing if value is None else f"{value:.0f} s"


def share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def load(run: Mapping[str, Any]) -> str:
    return f"{run['loadavg_before'][0]:.1f} → {run['loadavg_after'][0]:.1f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; none without rows (its section is then left out of the report)."""
    if not rows:
        return ""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def header(results: Mapping[str, Any]) -> str:
    machine = results["machine"]
    text = (
        f"MNIST: {results['train_samples']} training and {plan.TEST_SAMPLES} test digits. "
        f"{machine['cpu_count']} cores ({machine['cpu_model']}), no GPU, TensorFlow "
        f"{machine['tensorflow']}, Python {machine['python']}. Seeds {', '.join(map(str, results['seeds']))}. "
        f"Started {results['started']}, {results['minutes']:.0f} minutes in all."
    )
    if results["limit"]:
        text = (
            f"**A quick look, not a result** (`--limit {results['limit']}`, "
            f"load average {results['load_before']:.1f} at the start): {text}"
        )
    return text


def targets_table(results: Mapping[str, Any]) -> str:
    verdict = {True: "yes", False: "**no**", None: "—"}
    return table(
        ["#", "Target", "Measured", "Met"],
        [[t["number"], t["target"], t["measured"], verdict[t["met"]]] for t in results["targets"]],
    )


def pipeline_row(label: str, run: Mapping[str, Any]) -> list[str]:
    return [
        label,
        settings_text(run["settings"]),
        str(run["settings"]["seed"]),
        f"{run['accuracy']:.2%}",
        seconds(pipeline_time_to_target(run)),
        seconds(run["wall_seconds"]),
        seconds(run["cpu_seconds"]),
        f"{run['peak_rss_mb']:.0f} MB",
        share(run["outside"]["outside_share"]),
        f"{run['mean_round_seconds']:.1f} s",
        load(run),
    ]


def runs_table(results: Mapping[str, Any]) -> str:
    runs = results["runs"]
    rows = []
    if baseline := runs.get("baseline"):
        workers = ", ".join(f"{a:.1%}" for a in baseline["worker_accuracies"])
        rows.append(
            [
                f"The replaced system's method (it reported {BASELINE_REPORTED_ACCURACY:.1%}; "
                f"each worker alone: {workers})",
                settings_text(baseline["settings"]),
                str(baseline["settings"]["seed"]),
                f"{baseline['accuracy']:.2%}",
                seconds(baseline["time_to_target"]),
                seconds(baseline["wall_seconds"]),
                seconds(baseline["cpu_seconds"]),
                f"{baseline['peak_rss_mb']:.0f} MB",
                "",
                "",
                load(baseline),
            ]
        )
    rows += [pipeline_row("Pipeline, defaults", run) for run in runs.get("default", [])]
    rows += [pipeline_row(label, runs[key]) for key, label in PIPELINE_RUNS.items() if key in runs]
    header_row = [
        "Contender",
        "Settings",
        "Seed",
        "Test accuracy",
        f"Time to {TARGET_ACCURACY:.0%}",
        "Wall",
        "CPU",
        "Peak RSS",
        "Outside training",
        "Per round",
        "Load before → after",
    ]
    return table(header_row, rows)


def centralized_table(results: Mapping[str, Any]) -> str:
    centralized = results["runs"].get("centralized", [])
    rows = []
    for run in centralized:
        best = best_centralized(centralized, run["seed"]) is run
        rows.append(
            [
                str(run["seed"]),
                f"{run['learning_rate']:g}" + (" (best)" if best else ""),
                str(len(run["curve"])),
                ", ".join(f"{p['accuracy']:.2%}" for p in run["curve"]),
                seconds(run["time_to_target"]),
                seconds(run["wall_seconds"]),
                load(run),
            ]
        )
    header_row = [
        "Seed",
        "Learning rate",
        "Epochs",
        "Test accuracy after each epoch",
        f"Time to {TARGET_ACCURACY:.0%}",
        "Wall",
        "Load before → after",
    ]
    return table(header_row, rows)


def steps_table(results: Mapping[str, Any]) -> str:
    defaults = results["runs"].get("default", [])
    if not defaults:
        return ""
    summary = step_summary(defaults)
    yes_no = {True: "yes", False: "no", None: "unknown"}
    rows = [
        [
            step,
            str(s["count"]),
            seconds(s["mean"], "") if s["mean"] is None else f"{s['mean']:.2f} s",
            "" if s["max"] is None else f"{s['max']:.2f} s",
            yes_no[s["tensorflow"]],
        ]
        for step, s in summary.items()
        if step in NON_TRAINING_STEPS
    ]
    return table(["Step", "Runs", "Mean", "Slowest", "Loads TensorFlow"], rows)


def local_points(results: Mapping[str, Any]) -> dict[int, float]:
    """Workers → the fastest measured local time to the target, from the runs at the defaults."""
    points: dict[int, float] = {}
    for run in pipeline_runs_at_defaults(results):
        reached = pipeline_time_to_target(run)
        workers = run["settings"]["workers"]
        if reached is not None and reached < points.get(workers, float("inf")):
            points[workers] = reached
    return points


def pipeline_runs_at_defaults(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Runs of the first seed whose settings are the defaults but for the workers and the rounds."""
    runs = results["runs"]
    first_seed = results["seeds"][0]
    candidates = [
        *runs.get("default", []),
        runs.get("workers_2"),
        runs.get("calibration"),
        *results.get("sweeps", []),
    ]
    defaults = results["defaults"]
    return [
        run
        for run in candidates
        if run
        and run["settings"]["seed"] == first_seed
        and run["settings"]["limit"] == results["limit"]
        and all(
            run["settings"][k] == v
            for k, v in defaults.items()
            if k in run["settings"] and k not in VARYING
        )
    ]


def plan_section(results: Mapping[str, Any]) -> str:
    details = results.get("plan")
    if not details:
        return ""
    c = details["calibration"]
    calibration = (
        f"Measured alone on this machine: submit {c['submit']:.1f} s before the first task, split "
        f"{c['split']:.1f} s, init {c['init']:.1f} s, a trainer {c['train_fixed']:.1f} s besides its "
        f"epochs and {c['train_per_sample_epoch'] * 1e6:.0f} µs per digit and epoch, aggregate "
        f"{c['aggregate_fixed']:.2f} s + {c['aggregate_per_model']:.3f} s per model, evaluate "
        f"{c['evaluate']:.1f} s, publish {c['publish']:.1f} s; a model file is "
        f"{c['model_bytes'] / 1e6:.2f} MB."
    )
    measured_here = local_points(results)
    first_runs = any("first_run" in row for row in details["rows"])
    rows = []
    for row in details["rows"]:
        warm, argo_default = (
            seconds(row["predicted"][f"{r:g}"]["seconds"], "undefined")
            if row["predicted"]
            else "undefined"
            for r in plan.REQUEUE_SECONDS
        )
        first = [
            seconds(row["first_run"][name]) if "first_run" in row else "undefined"
            for name in plan.FIRST_RUNS
        ]
        predicted = [warm, *(first if first_runs else []), argo_default]
        tried = ", ".join(map(str, row["rounds_tried"]))
        if row["rounds"] is None:
            reached = f"none of {tried}" if tried else "not measured"
        else:
            reached = str(row["rounds"])
        per_round = (
            f"{next(iter(row['predicted'].values()))['training_seconds'] / row['rounds']:.0f} s"
            if row["predicted"]
            else ""
        )
        rows.append(
            [
                str(row["workers"]),
                reached,
                "" if row["accuracy"] is None else f"{row['accuracy']:.2%}",
                row["source"] or "",
                per_round,
                *predicted,
                seconds(measured_here.get(row["workers"]), ""),
            ]
        )
    header_row = [
        "Workers (nodes)",
        f"Rounds to {TARGET_ACCURACY:.0%} (of those tried)",
        "Accuracy published",
        "From",
        "Training per round",
        f"Predicted, warm (requeue {plan.CONFIGURED_REQUEUE_SECONDS:g} s, as up.sh sets it)",
        *(
            [
                "First run on fresh nodes (trainers' image streamed)",
                "First run, both images pulled whole",
                "First run, one TensorFlow image for every step",
            ]
            if first_runs
            else []
        ),
        f"Warm, requeue {plan.ARGO_DEFAULT_REQUEUE_SECONDS:g} s (Argo's default)",
        "Measured here (2 cores)",
    ]
    measured = "\n".join(f"- {text}" for text in plan.MEASURED)
    assumptions = "\n".join(f"- {text}" for text in plan.ASSUMPTIONS)
    parts = [
        calibration,
        "Measured on the local cluster, a real Kubernetes and Argo controller (`python -m "
        "bench.cluster_timing`, docs/local-cluster.md):\n\n" + measured,
        "Assumed:\n\n" + assumptions,
        table(header_row, rows),
    ]
    if details.get("images"):
        parts.insert(1, images_paragraph(details["images"]))
    return "\n\n".join(parts)


def images_paragraph(images: Mapping[str, Any]) -> str:
    """The images' sizes and what fetching them costs a fresh node, from bench/images.json."""
    described = []
    for key, record in images["images"].items():
        unpack = record.get("unpack_seconds")
        described.append(
            f"{key} {record['compressed_bytes'] / 1e6:.0f} MB compressed ({record['bytes'] / 1e6:.0f} MB "
            + ("unpacked)" if unpack is None else f"unpacked, in {unpack:.1f} s here)")
        )
    sizes = ", ".join(described)
    return (
        f"Images (`python -m bench.images`, {images['measured']}, {images['engine']}): {sizes}; the steps "
        f"and train images share {images['shared_bytes']['steps+train'] / 1e6:.0f} MB of layers."
    )


def accuracy_table(results: Mapping[str, Any]) -> str:
    """Accuracy after each round of W workers and R rounds: the pipeline's runs and the simulation."""
    rows = [
        [
            str(run["settings"]["workers"]),
            str(run["settings"]["rounds"]),
            "pipeline",
            ", ".join(f"{p['accuracy']:.2%}" for p in run["curve"]),
            f"{run['mean_round_seconds']:.0f} s (pipeline, this machine)",
        ]
        for run in pipeline_runs_at_defaults(results)
    ]
    runs: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for line in results.get("fedavg", []):
        runs.setdefault((line["workers"], line["rounds"]), []).append(line)
    for (workers, rounds), lines in runs.items():
        rows.append(
            [
                str(workers),
                str(rounds),
                "simulated",
                ", ".join(f"{line['accuracy']:.2%}" for line in lines),
                f"{sum(line['seconds'] for line in lines) / len(lines):.0f} s (one process)",
            ]
        )
    rows.sort(key=lambda row: (int(row[0]), int(row[1]), row[2]))
    columns = ["Workers", "Rounds", "From", "Test accuracy after each round", "Seconds per round"]
    return table(columns, rows)


def sweeps_table(results: Mapping[str, Any]) -> str:
    rows = [
        [
            run["sweep"],
            settings_text(run["settings"]),
            f"{run['accuracy']:.2%}",
            seconds(pipeline_time_to_target(run)),
            seconds(run["wall_seconds"]),
            share(run["outside"]["outside_share"]),
            f"{run['mean_round_seconds']:.1f} s",
        ]
        for run in results.get("sweeps", [])
    ]
    header_row = [
        "Sweep",
        "Settings",
        "Test accuracy",
        f"Time to {TARGET_ACCURACY:.0%}",
        "Wall",
        "Outside training",
        "Per round",
    ]
    return table(header_row, rows)


def preprocessing_section(results: Mapping[str, Any]) -> str:
    found = results.get("preprocessing")
    if not found:
        return ""
    parts = [f"`python -m bench.preprocessing` exited with {found['returncode']}."]
    values = {k: v for record in found["records"] for k, v in record.items() if k != "targets"}
    if values:
        parts.append(table(["Measure", "Value"], [[k, json.dumps(v)] for k, v in values.items()]))
    if found["text"]:
        parts.append("```\n" + "\n".join(found["text"]) + "\n```")
    return "\n\n".join(parts)


def markdown(results: Mapping[str, Any]) -> str:
    sections = [
        ("", header(results)),
        ("Targets", targets_table(results)),
        ("Runs", runs_table(results)),
        ("Centralized baseline", centralized_table(results)),
        ("Steps that do not train (default runs)", steps_table(results)),
        ("Plan past this machine", plan_section(results)),
        ("Accuracy after each round, by workers and rounds", accuracy_table(results)),
        ("Sweeps", sweeps_table(results)),
        ("The page's preprocessing", preprocessing_section(results)),
    ]
    if failures := results.get("failures"):
        failed = "; ".join(f"{f['stage']} ({f['error'].splitlines()[0]})" for f in failures)
        sections.insert(
            1, ("", f"**Stages that failed** (their targets are not measured): {failed}")
        )
    parts = [f"#### {title}\n\n{body}" if title else body for title, body in sections if body]
    return "\n\n".join(parts) + "\n"


def draw_curves(results: Mapping[str, Any], path: Path) -> None:
    """Test accuracy against wall time for the first seed's contenders, the target dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = results["seeds"][0]
    runs = results["runs"]
    figure, axes = plt.subplots(figsize=(9, 5.5))
    for run in runs.get("centralized", []):
        if run["seed"] == first and run["curve"]:
            points = run["curve"]
            axes.plot(
                [p["seconds"] for p in points],
                [p["accuracy"] for p in points],
                marker="o",
                label=f"centralized, learning rate {run['learning_rate']:g}",
            )
    pipelines = [
        (
            "Pipeline, defaults",
            next((r for r in runs.get("default", []) if r["settings"]["seed"] == first), None),
        ),
        *((label, runs.get(key)) for key, label in PIPELINE_RUNS.items() if key != "calibration"),
    ]
    for label, run in pipelines:
        if run:
            axes.plot(
                [p["seconds"] for p in run["curve"]],
                [p["accuracy"] for p in run["curve"]],
                marker="s",
                linewidth=2,
                label=f"{label.lower()} (each round's average)",
            )
    if baseline := runs.get("baseline"):
        axes.plot(
            [baseline["wall_seconds"]],
            [baseline["accuracy"]],
            marker="x",
            markersize=10,
            linestyle="none",
            label=f"the replaced system's method ({baseline['accuracy']:.1%})",
        )
    axes.axhline(TARGET_ACCURACY, color="grey", linestyle="--", linewidth=1)
    axes.set_ylim(max(0.9, min(axes.get_ylim()[0], TARGET_ACCURACY - 0.02)), 1.0)
    axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=1))
    axes.set_xlabel("wall time from process start (s)")
    axes.set_ylabel("test accuracy")
    axes.set_title(
        f"Seed {first}: test accuracy against time (points below {axes.get_ylim()[0]:.0%} not shown)"
    )
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_plan(results: Mapping[str, Any], path: Path) -> None:
    """Predicted time to the target for W workers on W nodes, beside the points measured here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["plan"]["rows"]
    figure, axes = plt.subplots(figsize=(8, 5))
    for requeue in plan.REQUEUE_SECONDS:
        points = [
            (row["workers"], row["predicted"][f"{requeue:g}"]["seconds"])
            for row in rows
            if row["predicted"]
        ]
        if points:
            axes.plot(
                *zip(*points, strict=True), marker="o", label=f"predicted, {requeue:g} s requeue"
            )
    first = [(row["workers"], row["first_run"]["streamed"]) for row in rows if "first_run" in row]
    if first:
        axes.plot(
            *zip(*first, strict=True),
            marker="s",
            linestyle="--",
            label=f"predicted first run on fresh nodes, {plan.CONFIGURED_REQUEUE_SECONDS:g} s requeue",
        )
    measured = local_points(results)
    if measured:
        axes.plot(
            list(measured),
            list(measured.values()),
            marker="D",
            linestyle="none",
            color="black",
            label="measured on this machine (all workers share its cores)",
        )
    best = best_centralized(results["runs"].get("centralized", []), results["seeds"][0])
    if best:
        axes.axhline(
            best["time_to_target"],
            color="grey",
            linestyle="--",
            label="one process (best centralized)",
        )
    axes.set_xscale("log", base=2)
    axes.set_xticks(plan.PLAN_WORKERS, [str(w) for w in plan.PLAN_WORKERS])
    axes.set_xlabel("workers (one node each)")
    axes.set_ylabel(f"time to a published model ≥ {TARGET_ACCURACY:.0%} (s)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    else:
        axes.set_title(
            f"no planned W reached {TARGET_ACCURACY:.0%} in the rounds measured or simulated"
        )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_outputs(results: Mapping[str, Any], out_dir: Path) -> str:
    """results.json, results.md and the charts into `out_dir`, each written whole then renamed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = markdown(results)
    outputs = {
        RESULTS_JSON: lambda p: p.write_text(json.dumps(results, indent=2) + "\n"),
        RESULTS_MD: lambda p: p.write_text(text),
        CURVES_PNG: lambda p: draw_curves(results, p),
    }
    if results.get("plan"):
        outputs[PLAN_PNG] = lambda p: draw_plan(results, p)
    for name, write in outputs.items():
        temporary = out_dir / f".{name}.tmp{Path(name).suffix}"
        write(temporary)
        temporary.replace(out_dir / name)
    return text


def main(argv: list[str] | None = None) -> int:
    """python -m bench.report [results.json]: redraw results.md and the charts beside it."""
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=main.__doc__)
    parser.add_argument(
        "results", type=Path, nargs="?", default=Path(__file__).parent / RESULTS_JSON
    )
    parser.add_argument(
        "--replan",
        action="store_true",
        help="predict the plan again with this model and bench/images.json (the runs stay as measured)",
    )
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as error:
        parser.exit(2, f"{parser.prog}: error: cannot read {args.results}: {error}\n")
    if args.replan and results.get("plan"):
        results["plan"] = plan.plan_details(
            plan.Calibration(**results["plan"]["calibration"]), results["plan"]["rows"]
        )
    write_outputs(results, args.results.parent)
    print(f"written: {args.results.parent / RESULTS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
