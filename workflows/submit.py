"""Build the pipeline's Workflow once, then run it: on this machine (the default), on an Argo Server,
or print it.

python workflows/submit.py --local --workers 5 --epochs 1 --batch 64 --rounds 3
ARGO_SERVER=https://localhost:2746 ARGO_TOKEN=... python workflows/submit.py \\
    --artifacts gs://BUCKET --workers 3 --epochs 2 --batch 100 --watch
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

if not __package__:  # run as a file: make the project importable, not the workflows/ folder itself
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from steps.lib.arguments import positive_float, positive_int
from steps.lib.errors import EXIT_BAD_INPUT, StepError
from steps.lib.registry import MODEL_FILE, run_prefix
from steps.lib.storage import open_store
from workflows import preflight, runs
from workflows.errors import UsageError, WorkflowError
from workflows.local.containers import ContainerEngine
from workflows.local.engines import Engine, EngineError, ProcessEngine
from workflows.local.runner import LocalRunner
from workflows.pipeline import resources
from workflows.pipeline.manifests import to_yaml
from workflows.pipeline.settings import (
    DEFAULT_STORE,
    PipelineSettings,
    add_arguments,
    defaults,
    from_arguments,
)
from workflows.pipeline.workflow import compile_template, compile_workflow
from workflows.run_end import EXIT_RUN_FAILED, RunEnd, report
from workflows.server.client import (
    ArgoError,
    ArgoServer,
    create_workflow,
    from_environment,
    lint,
    register_template,
    submit_from_template,
)
from workflows.server.watch import POLL_SECONDS, follow

ENGINES = ("process", "podman", "docker")
TEMPLATE_LABEL = "workflows.argoproj.io/workflow-template"  # what marks a run as a template's
# The local runner's own options (the pipeline's settings are declared in workflows/pipeline/settings.py):
# flag → (help, default as shown, argparse options).
LOCAL_OPTIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "--parallelism": (
        "at most this many tasks at once, locally (the cores are shared out among those running); "
        "tasks also wait until their templates' memory limits fit in the memory free",
        "2 per core",
        {"type": positive_int, "default": None},
    ),
    "--logs-dir": (
        "where the local runner keeps each task's log",
        "`logs` in a folder store, else in the project's `.runs`",
        {"type": Path, "default": None},
    ),
    "--engine": (
        "locally: each step as a process, or in its image (`--image`, `--train-image`) with `podman` or `docker`",
        "`process`",
        {"choices": ENGINES, "default": "process"},
    ),
}


class OneLineParser(argparse.ArgumentParser):
    """Refuses a bad flag in one line that points to --help, not after argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def make_parser(start: PipelineSettings) -> argparse.ArgumentParser:
    """submit.py's flags: the engine's, the Argo Server's, and one per pipeline setting."""
    p = OneLineParser(
        prog="python workflows/submit.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    local = p.add_argument_group("engine")
    local.add_argument(
        "--local",
        action="store_true",
        help="run on this machine with the local runner (the default without ARGO_SERVER)",
    )
    local.add_argument(
        "--render",
        action="store_true",
        help="print the compiled Workflow (with --register: the WorkflowTemplate) as YAML and exit",
    )
    for flag, (meaning, shown, options) in LOCAL_OPTIONS.items():
        local.add_argument(flag, help=f"{meaning} (default: {shown.strip('`')})", **options)
    argo = p.add_argument_group("argo", "on an Argo Server; flags and variables as Argo's own CLI")
    argo.add_argument(
        "--argo-server",
        help="host:port or URL of the Argo Server (env ARGO_SERVER); runs there instead of locally",
    )
    argo.add_argument(
        "-n",
        "--namespace",
        help=f"namespace of the runs (env ARGO_NAMESPACE; default: {resources.NAMESPACE})",
    )
    argo.add_argument(
        "-k",
        "--insecure-skip-verify",
        action="store_true",
        default=None,  # None: as ARGO_INSECURE_SKIP_VERIFY says
        help="accept the server's self-signed certificate (env ARGO_INSECURE_SKIP_VERIFY)",
    )
    argo.add_argument(
        "--argo-base-href",
        help="path the Argo Server is served under (env ARGO_BASE_HREF; default: /)",
    )
    argo.add_argument("--watch", action="store_true", help="follow the run's steps until it ends")
    argo.add_argument(
        "--poll-seconds",
        type=positive_float,
        default=POLL_SECONDS,
        help=f"seconds between reads of the run while watching (default: {POLL_SECONDS:.0f})",
    )
    argo.add_argument("--name", help="the run's name (default: mnist- and a generated suffix)")
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
        default=resources.TEMPLATE_NAME,
        help=f"the WorkflowTemplate's name (default: {resources.TEMPLATE_NAME})",
    )
    kept = p.add_argument_group("runs", "the runs of the store (--artifacts) or of the Argo Server")
    what = kept.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="list the runs, the newest first")
    what.add_argument(
        "--compare", nargs=2, metavar="RUN", help="two runs' settings and rounds side by side"
    )
    what.add_argument(
        "--retry", metavar="RUN", help="take up a failed run, keeping the tasks that succeeded"
    )
    add_arguments(p.add_argument_group("settings"), start)
    return p


def logs_folder(args: argparse.Namespace) -> Path:
    """--logs-dir, or by default the store's `logs` (a folder store) or the project's .runs/logs."""
    if args.logs_dir is not None:
        return args.logs_dir.resolve()
    return Path(args.store if "://" not in args.store else DEFAULT_STORE) / "logs"


def run_locally(
    workflow: dict, settings: PipelineSettings, args: argparse.Namespace, retry: str | None = None
) -> int:
    """Run the workflow on this machine, or with `retry` take up that run from its logs."""
    engine: Engine = ProcessEngine()
    if args.engine != "process":
        engine = ContainerEngine(program=args.engine)
    logs = logs_folder(args)
    if retry is None:
        preflight.check_local(settings, logs, args.logs_dir is not None, args.name)
        try:  # a container engine's program and images
            getattr(engine, "check_ready", lambda images: None)(
                [settings.image, settings.train_image]
            )
        except EngineError as error:
            raise UsageError(f"--engine {args.engine}: {error}") from None
    else:
        preflight.check_local_retry(settings.store, retry)
    store = open_store(settings.store)
    runner = LocalRunner(store, logs, args.parallelism, engine=engine)
    started = time.monotonic()
    result = runner.run(workflow) if retry is None else runner.retry(retry)
    went_ahead = [f"went ahead without {n.name}: {n.message}" for n in result.tolerated_failures]
    ended = RunEnd(
        run=result.name,
        phase=result.phase,
        seconds=time.monotonic() - started,
        failure=result.message,
        accuracy=result.output("evaluate", "accuracy"),
        served=result.output("publish", "served"),
        reason=result.output("publish", "reason"),
        notes=(
            *went_ahead,
            f"model: {store.uri}/{run_prefix(result.name)}/{MODEL_FILE}",
            f"logs: {logs / result.name}",
        ),
    )
    return report(ended, settings.store)


def run_on_argo(server: ArgoServer, settings: PipelineSettings, args: argparse.Namespace) -> int:
    """Register, submit (directly or from the template), then optionally watch to the end."""
    preflight.check_cluster(settings, images_used=args.register or not args.from_template)
    if args.register:
        template = compile_template(settings, args.template_name)
        lint(server, template)  # nothing is created or registered before the server's lint passes
        is_new = register_template(server, template)
        print(
            f"{'created' if is_new else 'updated'} WorkflowTemplate {args.template_name} in "
            f"namespace {server.namespace}; start runs from {server.root}workflow-templates/"
            f"{server.namespace}/{args.template_name}"
        )
        if not args.from_template:
            return 0
    if args.name:  # a generated name is known once created: publish refuses it then, if published
        preflight.check_name_unpublished(settings.store, args.name)
    if args.from_template and not args.register:  # template runs are named as direct ones
        created = submit_from_template(server, args.template_name, settings.parameters(), args.name)
    else:
        workflow = compile_workflow(settings, args.name)
        if args.register:
            # The controller's cache may still hold the previous spec: the run carries the one just
            # registered, labelled as the server labels a template's run (common/convert.go).
            labels = workflow["metadata"].get("labels", {})
            workflow["metadata"]["labels"] = labels | {TEMPLATE_LABEL: args.template_name}
        lint(server, workflow)
        created = create_workflow(server, workflow)
    name = created["metadata"]["name"]
    print(f"submitted {name} to {server.url} (namespace {server.namespace})")
    return follow(server, name, settings.store, args.poll_seconds if args.watch else None)


def render(settings: PipelineSettings, args: argparse.Namespace) -> int:
    if args.register:
        document = compile_template(settings, args.template_name)
    else:
        document = compile_workflow(settings, args.name)
    print(to_yaml(document), end="")
    for note in preflight.render_notes(settings):
        print(note, file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        start = defaults()
    except ValueError as error:  # a bad value in a variable
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = make_parser(start).parse_args(argv)
    settings = from_arguments(args)
    server = None
    if not args.local:
        server = from_environment(
            server=args.argo_server,
            namespace=args.namespace,
            insecure_skip_verify=args.insecure_skip_verify,
            base_href=args.argo_base_href,
        )
    try:
        if args.retry and server is None:
            return run_locally({}, settings, args, retry=args.retry)
        if args.list or args.compare or args.retry:
            return runs.main(args, server)
        preflight.check_settings(settings, args.name)
        if args.render:
            return render(settings, args)
        if server is not None:
            return run_on_argo(server, settings, args)
        if args.watch or args.register or args.from_template:
            raise UsageError(
                "--watch, --register and --from-template need an Argo Server: "
                "set ARGO_SERVER or --argo-server"
            )
        return run_locally(compile_workflow(settings, args.name), settings, args)
    except (UsageError, WorkflowError, StepError, ArgoError) as error:
        print(f"submit: error: {error}", file=sys.stderr)
        # refused, nothing ran (bad flags, settings or spec); or the Argo Server failed the request
        return EXIT_RUN_FAILED if isinstance(error, ArgoError) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("submit: interrupted; every task was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
