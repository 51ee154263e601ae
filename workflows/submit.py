"""Build the pipeline's Workflow once, then run it: on this machine (the default) or print it.

python workflows/submit.py --local --workers 5 --epochs 1 --batch 64 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: make the project importable, not the workflows/ folder itself
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from steps.cli import StepError, non_negative_int, positive_float, positive_int
from steps.registry import MODEL_FILE, run_prefix
from steps.storage import open_store
from workflows.pipeline import compile_workflow
from workflows.runner import LocalRunner, WorkflowError
from workflows.settings import (
    DEFAULT_IMAGE,
    DEFAULT_STORE,
    ENVIRONMENT,
    PipelineSettings,
    environment_defaults,
)
from workflows.spec import UnresolvedReference, UnsupportedFeature

EXIT_RUN_FAILED = 1
EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    defaults = PipelineSettings(**environment_defaults())
    env = {name: f" (env {variable})" for name, variable in ENVIRONMENT.items()}
    p = argparse.ArgumentParser(
        prog="python workflows/submit.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    engine = p.add_argument_group("engine")
    engine.add_argument(
        "--local",
        action="store_true",
        help="run on this machine with the local runner (the default)",
    )
    engine.add_argument(
        "--render", action="store_true", help="print the compiled Workflow as YAML and exit"
    )
    engine.add_argument(
        "--artifacts",
        default=os.environ.get("ARTIFACTS", DEFAULT_STORE),
        help="artifact store: a folder or gs://bucket[/prefix] "
        f"(env ARTIFACTS; default: {DEFAULT_STORE})",
    )
    engine.add_argument(
        "--parallelism",
        type=positive_int,
        default=os.cpu_count() or 1,
        help="tasks running at once, locally (default: the CPU count)",
    )
    engine.add_argument(
        "--logs-dir",
        type=Path,
        default=Path(DEFAULT_STORE) / "logs",
        help="where each task's log goes, locally (default: .runs/logs)",
    )
    engine.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"the steps' container image (default: {DEFAULT_IMAGE})",
    )
    run = p.add_argument_group("training")
    run.add_argument(
        "--workers",
        type=positive_int,
        default=defaults.workers,
        help=f"shards and parallel trainers{env['workers']} (default: {defaults.workers})",
    )
    run.add_argument(
        "--epochs",
        type=positive_int,
        default=defaults.epochs,
        help=f"passes over its shard per worker and round{env['epochs']} "
        f"(default: {defaults.epochs})",
    )
    run.add_argument(
        "--batch",
        type=positive_int,
        default=defaults.batch,
        help=f"samples per gradient step{env['batch']} (default: {defaults.batch})",
    )
    run.add_argument(
        "--rounds",
        type=positive_int,
        default=defaults.rounds,
        help=f"train→average rounds{env['rounds']} (default: {defaults.rounds})",
    )
    run.add_argument(
        "--learning-rate",
        type=positive_float,
        default=defaults.learning_rate,
        help=f"Adam step size (default: {defaults.learning_rate})",
    )
    run.add_argument(
        "--retries",
        type=non_negative_int,
        default=defaults.retries,
        help=f"retries of a failed train task (default: {defaults.retries})",
    )
    run.add_argument(
        "--retry-backoff",
        default=defaults.retry_backoff,
        help=f"wait before the first retry, doubling after (default: {defaults.retry_backoff})",
    )
    run.add_argument(
        "--min-workers",
        type=non_negative_int,
        default=defaults.min_workers,
        help="aggregate when at least this many workers delivered a model; 0 = all (default: 0)",
    )
    run.add_argument(
        "--limit",
        type=non_negative_int,
        default=defaults.limit,
        help="use only this many training samples, 0 = all (default: 0)",
    )
    run.add_argument("--seed", type=int, default=defaults.seed, help="seed for shards and init")
    run.add_argument(
        "--partition",
        choices=("iid", "dirichlet"),
        default=defaults.partition,
        help="how shards are drawn: iid, or label-skewed dirichlet (default: iid)",
    )
    run.add_argument(
        "--alpha",
        type=positive_float,
        default=defaults.alpha,
        help=f"Dirichlet concentration, smaller is more skewed (default: {defaults.alpha})",
    )
    run.add_argument(
        "--source",
        default=defaults.source,
        help=f"mnist.npz: URL, path or gs:// URI{env['source']} "
        f"(default: the official Keras download)",
    )
    return p


def settings_from(args: argparse.Namespace) -> PipelineSettings:
    source = args.source
    if "://" not in source:  # a path: the steps run in their own folders, so make it absolute
        source = str(Path(source).resolve())
    return PipelineSettings(
        workers=args.workers,
        epochs=args.epochs,
        batch=args.batch,
        rounds=args.rounds,
        learning_rate=args.learning_rate,
        retries=args.retries,
        retry_backoff=args.retry_backoff,
        min_workers=args.min_workers,
        limit=args.limit,
        seed=args.seed,
        partition=args.partition,
        alpha=args.alpha,
        source=source,
    )


def run_locally(workflow: dict, store_uri: str, args: argparse.Namespace) -> int:
    store = open_store(store_uri)
    runner = LocalRunner(store, args.logs_dir.resolve(), args.parallelism)
    started = time.monotonic()
    result = runner.run(workflow)
    elapsed = time.monotonic() - started
    print(f"\nrun {result.name} {result.phase} in {elapsed:.1f}s")
    if result.phase != "Succeeded":
        print(result.message, file=sys.stderr)
        return EXIT_RUN_FAILED
    for node in result.tolerated_failures:
        print(f"went ahead without {node.name}: {node.message}")
    accuracy = result.output("evaluate", "accuracy")
    print(f"test accuracy: {accuracy}")
    print(
        f"model: {store.uri}/{run_prefix(result.name)}/{MODEL_FILE} (models/mnist/LATEST → {result.name})"
    )
    print(f"logs: {args.logs_dir.resolve() / result.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = settings_from(args)
    store_uri = (
        args.artifacts
        if args.artifacts.startswith("gs://")
        else str(Path(args.artifacts).resolve())
    )
    workflow = compile_workflow(settings, image=args.image, store=store_uri)
    if args.render:
        import yaml

        print(yaml.safe_dump(workflow, sort_keys=False), end="")
        return 0
    try:
        return run_locally(workflow, store_uri, args)
    except (StepError, WorkflowError, UnsupportedFeature, UnresolvedReference) as error:
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("submit: interrupted; every task was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
