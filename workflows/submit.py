"""Build the pipeline's Workflow once, then run it: on this machine (the default), on an Argo Server,
or print it.

python workflows/submit.py --local --workers 5 --epochs 1 --batch 64 --rounds 3
ARGO_SERVER=https://localhost:2746 ARGO_TOKEN=... python workflows/submit.py \\
    --artifacts gs://BUCKET --workers 3 --epochs 2 --batch 100 --watch
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
from workflows import cluster
from workflows.argo_client import (
    ArgoError,
    ArgoServer,
    create_workflow,
    from_environment,
    register_template,
    submit_from_template,
)
from workflows.engines import Engine, ProcessEngine
from workflows.lint import check as check_with_argo_rules
from workflows.pipeline import compile_template, compile_workflow
from workflows.runner import LocalRunner, WorkflowError, WorkflowRefused
from workflows.settings import (
    DEFAULT_IMAGE,
    DEFAULT_STORE,
    ENVIRONMENT,
    PipelineSettings,
    environment_defaults,
)
from workflows.spec import UnresolvedReference, UnsupportedFeature
from workflows.watch import POLL_SECONDS, failure, output, run_seconds, watch

EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
ENGINES = ("process", "podman", "docker")


def _seconds(text: str) -> float:
    """argparse type: a number of seconds, 0 or more."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


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
        help="run on this machine with the local runner (the default without ARGO_SERVER)",
    )
    engine.add_argument(
        "--render",
        action="store_true",
        help="print the compiled Workflow (with --register: the WorkflowTemplate) as YAML and exit",
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
        default=None,
        help="at most this many tasks at once, locally (default: every ready task, as on a "
        "cluster; the cores are shared out among them)",
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
    engine.add_argument(
        "--no-lint",
        dest="lint",
        action="store_false",
        help="skip the offline check of Argo's validation rules before running, submitting or printing",
    )
    engine.add_argument(
        "--engine",
        choices=ENGINES,
        default="process",
        help="locally, run each step as a process (default) or in the steps' image with docker or podman",
    )
    argo = p.add_argument_group("argo", "on an Argo Server; flags and variables as Argo's own CLI")
    argo.add_argument(
        "--argo-server",
        default=None,
        help="host:port or URL of the Argo Server (env ARGO_SERVER); runs there instead of locally",
    )
    argo.add_argument(
        "-n",
        "--namespace",
        default=None,
        help=f"namespace of the runs (env ARGO_NAMESPACE; default: {cluster.NAMESPACE})",
    )
    argo.add_argument(
        "-k",
        "--insecure-skip-verify",
        action="store_true",
        default=None,
        help="accept the server's self-signed certificate (env ARGO_INSECURE_SKIP_VERIFY)",
    )
    argo.add_argument(
        "--argo-base-href",
        default=None,
        help="path the Argo Server is served under (env ARGO_BASE_HREF; default: /)",
    )
    argo.add_argument("--watch", action="store_true", help="follow the run's steps until it ends")
    argo.add_argument(
        "--poll-seconds",
        type=_seconds,
        default=POLL_SECONDS,
        help=f"seconds between reads of the run while watching (default: {POLL_SECONDS:.0f})",
    )
    argo.add_argument(
        "--name", default=None, help="the run's name (default: mnist- and a generated suffix)"
    )
    argo.add_argument(
        "--register",
        action="store_true",
        help="create or update the WorkflowTemplate, to start runs from the Argo UI",
    )
    argo.add_argument(
        "--from-template",
        action="store_true",
        help="start the run from the registered WorkflowTemplate with these settings",
    )
    argo.add_argument(
        "--template-name",
        default=cluster.TEMPLATE_NAME,
        help=f"the WorkflowTemplate's name (default: {cluster.TEMPLATE_NAME})",
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


def local_engine(name: str) -> Engine:
    """The engine that starts each step locally: a process, or a container of the steps' image."""
    if name == "process":
        return ProcessEngine()
    from workflows.containers import ContainerEngine

    return ContainerEngine(program=name)


def run_locally(workflow: dict, store_uri: str, args: argparse.Namespace) -> int:
    store = open_store(store_uri)
    runner = LocalRunner(
        store,
        args.logs_dir.resolve(),
        args.parallelism,
        engine=local_engine(args.engine),
        lint=args.lint,
    )
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


def argo_server(args: argparse.Namespace) -> ArgoServer | None:
    """The Argo Server to run on, or None to run locally."""
    if args.local:
        return None
    return from_environment(
        server=args.argo_server,
        namespace=args.namespace,
        insecure_skip_verify=args.insecure_skip_verify,
        base_href=args.argo_base_href,
    )


def check_cluster_inputs(args: argparse.Namespace) -> None:
    """A cluster cannot read this machine's files: the store and the data source must be URLs."""
    if not args.artifacts.startswith("gs://"):
        raise StepError(
            "on Argo the model is published to a bucket: pass --artifacts gs://BUCKET[/PREFIX] "
            "(env ARTIFACTS)"
        )
    if "://" not in args.source:
        raise StepError(
            f"on Argo the data must come from a URL or gs:// URI, not the local path {args.source}"
        )


def checked(document: dict, args: argparse.Namespace) -> dict:
    """`document`, once Argo's validation rules pass it offline (skipped with --no-lint)."""
    if args.lint:
        report = check_with_argo_rules(document)
        if not report.ok:
            raise WorkflowRefused(f"Argo would refuse the {document['kind']}: {report.line()}")
    return document


def run_on_argo(server: ArgoServer, settings: PipelineSettings, args: argparse.Namespace) -> int:
    """Register, submit (directly or from the template), then optionally watch to the end."""
    check_cluster_inputs(args)
    if args.register:
        template = compile_template(settings, args.image, args.artifacts, args.template_name)
        _, is_new = register_template(server, checked(template, args))
        print(
            f"{'created' if is_new else 'updated'} WorkflowTemplate {args.template_name} in "
            f"namespace {server.namespace}; start runs from {server.root}workflow-templates/"
            f"{server.namespace}/{args.template_name}"
        )
        if not args.from_template:
            return 0
    workflow = compile_workflow(settings, image=args.image, store=args.artifacts)
    if args.from_template:
        parameters = {**settings.parameters(), "store": args.artifacts}
        name_prefix = workflow["metadata"]["generateName"]  # template runs are named as direct ones
        created = submit_from_template(
            server, args.template_name, parameters, name_prefix, args.name
        )
    else:
        if args.name:
            workflow["metadata"] = {
                **{k: v for k, v in workflow["metadata"].items() if k != "generateName"},
                "name": args.name,
            }
        created = create_workflow(server, checked(workflow, args))
    name = created["metadata"]["name"]
    print(f"submitted {name} to {server.url} (namespace {server.namespace})")
    print(f"  {server.ui_link(name)}", flush=True)
    if not args.watch:
        return 0
    try:
        final = watch(
            server, name, echo=lambda line: print(line, flush=True), interval=args.poll_seconds
        )
    except KeyboardInterrupt:
        print(f"submit: stopped watching; {name} goes on: {server.ui_link(name)}", file=sys.stderr)
        return 130
    status = final.get("status", {})
    seconds = run_seconds(final)
    print(f"\nrun {name} {status.get('phase')}" + (f" in {seconds:.0f}s" if seconds else ""))
    if status.get("phase") != "Succeeded":
        print(f"submit: {failure(final)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    print(f"test accuracy: {output(final, 'evaluate', 'accuracy')}")
    return 0


def render(settings: PipelineSettings, store_uri: str, args: argparse.Namespace) -> int:
    import yaml

    if args.register:
        document = compile_template(settings, args.image, store_uri, args.template_name)
    else:
        document = compile_workflow(settings, image=args.image, store=store_uri)
    print(yaml.safe_dump(checked(document, args), sort_keys=False), end="")
    if not store_uri.startswith("gs://") or "://" not in args.source:
        print(
            "submit: note: the store or the data source is a path on this machine; a cluster "
            "needs --artifacts gs://BUCKET and a URL or gs:// --source",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = settings_from(args)
    store_uri = (
        args.artifacts
        if args.artifacts.startswith("gs://")
        else str(Path(args.artifacts).resolve())
    )
    try:
        if args.render:
            return render(settings, store_uri, args)
        server = argo_server(args)
        if server is not None:
            return run_on_argo(server, settings, args)
        if args.watch or args.register or args.from_template:
            raise StepError(
                "--watch, --register and --from-template need an Argo Server: "
                "set ARGO_SERVER or --argo-server"
            )
        workflow = compile_workflow(settings, image=args.image, store=store_uri)
        return run_locally(checked(workflow, args), store_uri, args)
    except (
        ArgoError,
        StepError,
        WorkflowError,
        UnsupportedFeature,
        UnresolvedReference,
    ) as error:
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("submit: interrupted; every task was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
