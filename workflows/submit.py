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

from steps.lib.arguments import positive_int
from steps.lib.errors import StepError
from steps.lib.registry import LATEST_KEY, MODEL_FILE, run_prefix
from steps.lib.storage import open_store
from steps.serve import command as serve_command
from workflows import preflight
from workflows.errors import UsageError, WorkflowError, WorkflowRefused
from workflows.lint.entry_point import check as check_with_argo_rules
from workflows.local.engines import Engine, EngineError, ProcessEngine
from workflows.local.runner import LocalRunner
from workflows.pipeline import cluster
from workflows.pipeline.manifests import to_yaml
from workflows.pipeline.settings import (
    DEFAULT_STORE,
    PipelineSettings,
    add_arguments,
    declared,
    defaults,
    flag_of,
    from_arguments,
    inconsistency,
)
from workflows.pipeline.workflow import compile_template, compile_workflow
from workflows.server.client import (
    ArgoError,
    ArgoServer,
    create_workflow,
    from_environment,
    register_template,
    submit_from_template,
)
from workflows.server.watch import POLL_SECONDS, failure, output, run_seconds, watch

EXIT_RUN_FAILED = 1  # it was tried and failed: the run, or the Argo Server
EXIT_USAGE = 2  # refused before anything ran: bad flags or settings, a spec Argo would refuse
ENGINES = ("process", "podman", "docker")
TEMPLATE_LABEL = "workflows.argoproj.io/workflow-template"  # what marks a run as a template's
# The local runner's own options (the pipeline's settings are declared in workflows/pipeline/settings.py):
# flag → (help, default as shown, argparse options).
LOCAL_OPTIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "--parallelism": (
        "at most this many tasks at once, locally (the cores are shared out among those running); "
        "tasks also wait until the memory their templates request is free",
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


def _seconds(text: str) -> float:
    """argparse type: a number of seconds, 0 or more."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Refuses a bad flag in one line that points to --help, not after argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


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
    local.add_argument(
        "--no-lint",
        dest="lint",
        action="store_false",
        help="skip the offline check of Argo's validation rules before running, submitting or printing",
    )
    for flag, (meaning, shown, options) in LOCAL_OPTIONS.items():
        local.add_argument(flag, help=f"{meaning} (default: {shown.strip('`')})", **options)
    add_argo_options(
        p.add_argument_group("argo", "on an Argo Server; flags and variables as Argo's own CLI")
    )
    add_arguments(p.add_argument_group("settings"), start)
    return p


def add_argo_options(argo: argparse._ArgumentGroup) -> None:
    """Where the Argo Server is (as Argo's own CLI reads it), and what to do there."""
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


def settings_table() -> str:
    """The README's settings table: every pipeline setting, then the local runner's own options."""
    rows = ["| flag | env | default | meaning |", "| --- | --- | --- | --- |"]
    start = PipelineSettings()
    for name, spec in declared():
        value = spec.shown_default or f"`{getattr(start, name)}`"
        env = f"`{spec.env}`" if spec.env else ""
        meaning = spec.help.replace("|", r"\|")  # a | inside a cell
        rows.append(f"| `{flag_of(name, spec)}` | {env} | {value} | {meaning} |")
    for flag, (meaning, shown, _) in LOCAL_OPTIONS.items():
        rows.append(f"| `{flag}` | | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def local_engine(name: str) -> Engine:
    """The engine that starts each step locally: a process, or a container of the step's image."""
    if name == "process":
        return ProcessEngine()
    from workflows.local.containers import ContainerEngine

    return ContainerEngine(program=name)


def logs_folder(args: argparse.Namespace) -> Path:
    """--logs-dir, or by default the store's `logs` (a folder store) or the project's .runs/logs."""
    if args.logs_dir is not None:
        return args.logs_dir.resolve()
    return Path(args.store if "://" not in args.store else DEFAULT_STORE) / "logs"


def check_local_inputs(
    settings: PipelineSettings, args: argparse.Namespace, engine: Engine
) -> None:
    """What a local run can be refused for before anything is created (workflows/preflight.py)."""
    folder_store = Path(settings.store) if "://" not in settings.store else None
    if folder_store is not None:
        preflight.writable_folder(folder_store, "--artifacts")
    # the logs may go in the store, made first, or by default in the project's .runs
    made_first = folder_store or (Path(DEFAULT_STORE) if args.logs_dir is None else None)
    preflight.writable_folder(logs_folder(args), "--logs-dir", inside=made_first)
    preflight.local_source(settings.source)
    if args.name:
        preflight.free_run_name(open_store(settings.store), logs_folder(args), args.name)
    check_ready = getattr(engine, "check_ready", None)
    if check_ready is not None:
        try:
            check_ready([settings.image, settings.train_image])
        except EngineError as error:
            raise UsageError(f"--engine {args.engine}: {error}") from None


def python_command() -> str:
    """This Python as the user can type it here: relative to the current folder when inside it."""
    executable = Path(sys.executable)
    try:
        return str(executable.relative_to(Path.cwd()))
    except ValueError:
        return str(executable)


def serving_lines(run: str, store: str, served: str | None, reason: str | None) -> list[str]:
    """publish's outcome, as the end of a run says it: LATEST moved and why, or why not and how to
    serve the run anyway (the exact command; --store only when it is not the default one)."""
    if served is None:  # a template registered before publish had these outputs
        return []
    if served == "true":
        return [f"served: {LATEST_KEY} → {run} ({reason})"]
    command = serve_command(run, "" if store == DEFAULT_STORE else store, python_command())
    return [f"not served: {reason}; to serve it anyway: {command}"]


def run_locally(workflow: dict, settings: PipelineSettings, args: argparse.Namespace) -> int:
    engine = local_engine(args.engine)
    check_local_inputs(settings, args, engine)
    store, logs = open_store(settings.store), logs_folder(args)
    runner = LocalRunner(store, logs, args.parallelism, engine=engine)
    started = time.monotonic()
    result = runner.run(workflow)
    elapsed = time.monotonic() - started
    print(f"\nrun {result.name} {result.phase} in {elapsed:.1f}s")
    if result.phase != "Succeeded":
        print(result.message, file=sys.stderr)
        return EXIT_RUN_FAILED
    for node in result.tolerated_failures:
        print(f"went ahead without {node.name}: {node.message}")
    print(f"test accuracy: {result.output('evaluate', 'accuracy')}")
    print(f"model: {store.uri}/{run_prefix(result.name)}/{MODEL_FILE}")
    served, reason = result.output("publish", "served"), result.output("publish", "reason")
    for line in serving_lines(result.name, settings.store, served, reason):
        print(line)
    print(f"logs: {logs / result.name}")
    return 0


def named(workflow: dict, name: str | None) -> dict:
    """The workflow under `name` instead of a generated one (as Argo takes metadata.name)."""
    if not name:
        return workflow
    metadata = {k: v for k, v in workflow["metadata"].items() if k != "generateName"}
    return {**workflow, "metadata": {**metadata, "name": name}}


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
    """A cluster cannot read this machine's files: the store and the data source must be URLs. The
    store is the artifact repository's bucket itself: Argo puts every keyed artifact in that bucket with
    its key as written (workflow_types.go: ArtifactLocation.Relocate), so under a prefix the steps'
    checkpoints and the published model would land apart from the run's artifacts. An image no registry
    serves is only a warning: a local cluster's nodes hold the images loaded into them (kind, k3d, the
    local cluster's containerd), which a registry-less name names rightly."""
    if not args.store.startswith("gs://"):
        raise UsageError(
            "on Argo the model is published to a bucket: pass --artifacts gs://BUCKET, the bucket "
            "of the cluster's artifact repository (env ARTIFACTS)"
        )
    if has_prefix(args.store):
        raise UsageError(
            f"on Argo the store is the artifact repository's bucket itself, without a prefix: "
            f"Argo keeps the run's artifacts at the bucket's top, so {args.store} would split the "
            "run's files from its checkpoints and published model; pass --artifacts gs://BUCKET"
        )
    if "://" not in args.source:
        raise UsageError(
            f"on Argo the data must come from a URL or gs:// URI, not the local path {args.source}"
        )
    if args.from_template and not args.register:
        return  # the template's run uses the images it was registered with
    for flag, image, name in (
        ("--image", args.image, "mnist-argo-steps"),
        ("--train-image", args.train_image, "mnist-argo-train"),
    ):
        if problem := unpullable_image(image):
            print(
                f"submit: warning: {flag} {image!r} {problem}: the nodes run it only if it was loaded "
                "into them (the local cluster's make cluster-up, kind load, k3d image import); on GKE "
                f"pass the pushed image, e.g. {flag} REGION-docker.pkg.dev/PROJECT/mnist/{name}:TAG",
                file=sys.stderr,
            )


def has_prefix(store: str) -> bool:
    """Whether a gs:// store names a folder inside its bucket."""
    return "/" in store.removeprefix("gs://").strip("/")


def unpullable_image(image: str) -> str | None:
    """Why a cluster's nodes could not pull `image`, or None. As the image reference grammar reads a
    name (distribution/reference), a first part with a `.` or `:` is a registry; without one the
    kubelet pulls from Docker Hub, where the steps' image is not; `localhost` is the node itself."""
    registry, slash, _ = image.partition("/")
    if not slash or not ("." in registry or ":" in registry or registry == "localhost"):
        return "names no registry (it is the local build's name)"
    if registry.split(":")[0] in ("localhost", "127.0.0.1"):
        return "names this machine's images or registry"
    return None


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
        template = compile_template(settings, args.template_name)
        _, is_new = register_template(server, checked(template, args))
        print(
            f"{'created' if is_new else 'updated'} WorkflowTemplate {args.template_name} in "
            f"namespace {server.namespace}; start runs from {server.root}workflow-templates/"
            f"{server.namespace}/{args.template_name}"
        )
        if not args.from_template:
            return 0
    if args.from_template and not args.register:  # template runs are named as direct ones
        created = submit_from_template(
            server, args.template_name, settings.parameters(), cluster.RUN_PREFIX, args.name
        )
    else:
        workflow = compile_workflow(settings)
        if args.register:
            # Just registered: the controller may still hold the template's previous spec in its
            # cache (it reads templates from an informer, as the server does), so the run carries
            # the spec it was registered with, labelled as the template's run as the server labels
            # them (workflow/common/convert.go: NewWorkflowFromWorkflowTemplate).
            labels = workflow["metadata"].get("labels", {})
            workflow["metadata"]["labels"] = labels | {TEMPLATE_LABEL: args.template_name}
        created = create_workflow(server, checked(named(workflow, args.name), args))
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
    served, reason = output(final, "publish", "served"), output(final, "publish", "reason")
    for line in serving_lines(name, settings.store, served, reason):
        print(line)
    return 0


def render(settings: PipelineSettings, args: argparse.Namespace) -> int:
    if args.register:
        document = compile_template(settings, args.template_name)
    else:
        document = named(compile_workflow(settings), args.name)
    print(to_yaml(checked(document, args)), end="")
    if "://" not in settings.store or "://" not in settings.source:
        print(
            "submit: note: the store or the data source is a path on this machine; a cluster "
            "needs --artifacts gs://BUCKET and a URL or gs:// --source",
            file=sys.stderr,
        )
    elif has_prefix(settings.store):
        print(
            "submit: note: a cluster keeps a run's artifacts at the top of the artifact "
            "repository's bucket; its store must be that bucket, --artifacts gs://BUCKET",
            file=sys.stderr,
        )
    for image in (settings.image, settings.train_image):
        if problem := unpullable_image(image):
            print(
                f"submit: note: a cluster's nodes could not pull the image: {image!r} {problem}",
                file=sys.stderr,
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        start = defaults()
    except ValueError as error:
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    args = make_parser(start).parse_args(argv)
    settings = from_arguments(args)
    try:
        if problem := inconsistency(settings):
            raise UsageError(problem)
        if args.name:
            preflight.check_run_name(args.name)
        if args.render:
            return render(settings, args)
        server = argo_server(args)
        if server is not None:
            return run_on_argo(server, settings, args)
        if args.watch or args.register or args.from_template:
            raise UsageError(
                "--watch, --register and --from-template need an Argo Server: "
                "set ARGO_SERVER or --argo-server"
            )
        workflow = named(compile_workflow(settings), args.name)
        return run_locally(checked(workflow, args), settings, args)
    except (UsageError, WorkflowError, StepError) as error:  # refused: nothing ran
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ArgoError as error:  # the Argo Server refused or could not be reached
        print(f"submit: error: {error}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:
        print("submit: interrupted; every task was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
