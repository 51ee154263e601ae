"""Time small runs on a real cluster, level by level, and the same runs on the local runner.

python -m bench.cluster_timing --requeue 2s,10s --seeds 0,1,2 --save bench/cluster_timing.json
python -m bench.cluster_timing --table bench/cluster_timing.json     (the table again, from the records)

Each run is submitted as users submit it (`workflows/submit.py --watch`, `--serve never`, so the model the
page serves stays), on the cluster tests/support/cluster.py finds (the local one, or KUBECONFIG's); its pods
are watched while they exist (bench/pod_watch.py), its Workflow read when it ends, and the two analysed by
bench/cluster_levels.py. With --requeue the controller's DEFAULT_REQUEUE_TIME is set to each value in turn
(bench/controller_env.py) and put back as it was at the end, also on an error or Ctrl-C. Then each seed runs
on the local runner (`--local`, same settings, data and images), for its total. It refuses to start
while another run is Running in the namespace: on a cluster others use, measure when they do not.
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import signal
import sys
import tempfile
import time
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import cluster_report
from bench.cluster_levels import trimmed_workflow
from bench.controller_env import VARIABLE, changed_controller, current_value
from bench.measure import cpu_model
from bench.pod_watch import PodWatch
from tests.support.cluster import Cluster, from_environment, wait_until
from tests.support.project import run_submit

RUN_FLAGS = ("limit", "workers", "rounds", "epochs", "batch")
# One trainer per level: on a 2-CPU node each trainer asks for one CPU besides the page's 250m, so a
# second trainer would wait to be scheduled, and its wait would read as the controller's. The trainers
# run longer than Argo's default requeue (10 s) and the other steps shorter: the controller's wait after
# a level depends on which (bench/plan.py, level_gap).
DEFAULTS = {"limit": 20000, "workers": 1, "rounds": 2, "epochs": 4, "batch": 100}
RUN_TIMEOUT = 900.0
POLL_SECONDS = "1"  # submit.py --watch reads the run every second instead of every 5


def run_flags(settings: dict[str, int], seed: int) -> list[str]:
    flags = [f"--{name}={settings[name]}" for name in RUN_FLAGS]
    return [*flags, f"--seed={seed}", "--serve=never"]


def kubectl_prefix(cluster: Cluster) -> list[str]:
    return ["kubectl", *(["--context", cluster.context] if cluster.context else [])]


def others_running(cluster: Cluster) -> list[str]:
    workflows = cluster.get("workflows", "-n", cluster.namespace)["items"]
    return [
        w["metadata"]["name"]
        for w in workflows
        if (w.get("status") or {}).get("phase") in (None, "", "Pending", "Running")
    ]


def pods_complete(watch: PodWatch, workflow: dict[str, Any]) -> bool:
    """Every Pod node of the Workflow has its pod recorded with all its containers ended."""
    expected = sum(1 for node in workflow["status"]["nodes"].values() if node["type"] == "Pod")
    pods = watch.snapshot()
    ended = [
        pod
        for pod in pods
        if all(
            "terminated" in (c.get("state") or {})
            for key in ("initContainerStatuses", "containerStatuses")
            for c in pod["status"][key]
        )
        and pod["status"]["containerStatuses"]
    ]
    return len(ended) == expected


def cluster_run(cluster: Cluster, settings: dict[str, int], seed: int, requeue: str) -> dict:
    """One run on the cluster, its Workflow and its pods as recorded (trimmed)."""
    name = f"mnist-timing-{secrets.token_hex(3)}"
    with PodWatch(kubectl_prefix(cluster), cluster.process_env(), cluster.namespace, name) as watch:
        done = cluster.submit(
            *run_flags(settings, seed),
            "--name", name, "--watch", "--poll-seconds", POLL_SECONDS, timeout=RUN_TIMEOUT,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"{name}: submit.py exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        workflow = cluster.workflow(name)
        wait_until(f"the pods of {name}", lambda: pods_complete(watch, workflow), timeout=60)
    return {
        "engine": "cluster",
        "run": name,
        "seed": seed,
        "requeue": requeue,
        "workflow": trimmed_workflow(workflow),
        "pods": watch.snapshot(),
        "watch_restarts": watch.restarts,
    }


def local_run(cluster: Cluster, settings: dict[str, int], seed: int) -> dict:
    """The same run on the local runner, with the cluster's data and images; its total from the
    runner's run summary (workflows/local/runner.py)."""
    name = f"mnist-timing-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        started = time.monotonic()
        done = run_submit(
            "--local", *run_flags(settings, seed), "--name", name,
            "--artifacts", str(work / "store"), "--logs-dir", str(work / "logs"),
            "--source", cluster.env["MNIST_SOURCE"],
            "--image", cluster.env["STEPS_IMAGE"], "--train-image", cluster.env["TRAIN_IMAGE"],
            env=cluster.process_env(), timeout=RUN_TIMEOUT,
        )  # fmt: skip
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(
                f"{name}: submit.py --local exited {done.returncode}:\n{done.stderr}"
            )
        summary = json.loads((work / "logs" / name / "summary.json").read_text())
    return {
        "engine": "local",
        "run": name,
        "seed": seed,
        "total": round(summary["seconds"], 2),
        "wall": round(wall, 2),
    }


def machine(cluster: Cluster) -> dict[str, Any]:
    version = cluster.kubectl("version", "-o", "json").stdout
    nodes = cluster.get("nodes")["items"]
    return {
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "kubernetes": json.loads(version).get("serverVersion", {}).get("gitVersion"),
        "nodes": [
            {
                "name": node["metadata"]["name"],
                "cpu": node["status"]["allocatable"]["cpu"],
                "memory": node["status"]["allocatable"]["memory"],
            }
            for node in nodes
        ],
        "controller_image": controller_image(cluster),
    }


def controller_image(cluster: Cluster) -> str:
    image = "jsonpath={.spec.template.spec.containers[0].image}"
    return cluster.kubectl(
        "-n", "argo", "get", "deployment/workflow-controller", "-o", image
    ).stdout


def measure(args: argparse.Namespace) -> dict[str, Any]:
    settings = {name: getattr(args, name) for name in RUN_FLAGS}
    cluster = from_environment()
    cluster.kubectl("get", "--raw", "/readyz")
    records: list[dict] = []
    started = datetime.now(UTC)
    with closing(cluster):
        if busy := others_running(cluster):
            raise SystemExit(
                f"cluster_timing: other runs are running: {', '.join(busy)}; not measured"
            )
        before = current_value(cluster.kubectl)
        with changed_controller(cluster.kubectl) as set_requeue:
            for requeue in args.requeue or [before]:
                changing = time.monotonic()
                set_requeue(requeue)
                print(
                    f"controller: {VARIABLE}={requeue or 'unset'}, "
                    f"{time.monotonic() - changing:.0f} s to roll out and lead",
                    flush=True,
                )
                for seed in args.seeds:
                    record = cluster_run(cluster, settings, seed, requeue or "unset")
                    print(cluster_report.run_line(record), flush=True)
                    records.append(record)
        for seed in args.seeds if args.local else ():
            record = local_run(cluster, settings, seed)
            print(cluster_report.run_line(record), flush=True)
            records.append(record)
        return {
            "measured": started.strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python -m bench.cluster_timing", *measuring_flags(sys.argv[1:])]),
            "settings": settings,
            "seeds": args.seeds,
            "requeue_before": before,
            "machine": machine(cluster),
            "runs": records,
        }


def measuring_flags(argv: list[str]) -> list[str]:
    """The command's flags but where it saves (a path of this machine, no part of the measurement)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--save":
            skip = True
        elif not arg.startswith("--save="):
            kept.append(arg)
    return kept


def values(text: str) -> list[str]:
    return [value.strip() for value in text.split(",") if value.strip()]


def requeue_values(text: str) -> list[str]:
    """argparse type: durations as the controller reads them (Go's, e.g. 2s, 1m30s)."""
    found = values(text)
    for value in found:
        try:
            cluster_report.requeue_seconds(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return found


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_timing", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--requeue", type=requeue_values, default=[],
                   help="the controller's DEFAULT_REQUEUE_TIME for the runs, each value in turn "
                        "(e.g. 2s,10s; default: as it is)")  # fmt: skip
    p.add_argument("--seeds", type=lambda t: [int(v) for v in values(t)], default=[0, 1, 2])
    for name, default in DEFAULTS.items():
        p.add_argument(f"--{name}", type=int, default=default, help=f"default: {default}")
    p.add_argument("--no-local", dest="local", action="store_false",
                   help="skip the runs on the local runner")  # fmt: skip
    p.add_argument(
        "--save",
        type=Path,
        help="write the measurements' records and their figures to this JSON file",
    )
    p.add_argument("--table", type=Path, nargs="+",
                   help="instead of measuring, the table of these saved files' measurements together "
                        "(with --save: them in one file)")  # fmt: skip
    return p


def stop_on_sigterm() -> None:
    """SIGTERM (and SIGHUP) unwind like Ctrl-C, so the controller is put back."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.table:
        measured = [m for path in args.table for m in json.loads(path.read_text())["measurements"]]
    else:
        stop_on_sigterm()
        measured = [measure(args)]
    report = cluster_report.combined(measured)
    print(cluster_report.markdown(report))
    if args.save:
        args.save.write_text(saved_json(measured, report["figures"]))
    return 0


def saved_json(measurements: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    """The file --save writes: the measurements, each run's record on one line, then the figures."""
    parts = []
    for measured in measurements:
        head = json.dumps({k: v for k, v in measured.items() if k != "runs"}, indent=1)
        runs = ",\n".join("  " + json.dumps(run, separators=(",", ":")) for run in measured["runs"])
        parts.append(f'{head[:-2]},\n "runs": [\n{runs}\n ]\n}}')
    return (
        '{"measurements": [\n'
        + ",\n".join(parts)
        + '\n],\n"figures": '
        + json.dumps(figures, indent=1)
        + "}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
