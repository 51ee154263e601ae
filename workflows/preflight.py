"""Every check submit.py makes before anything is created or sent: a refusal is one UsageError line
(exit 2), a warning one line on stderr. A setting's own bounds are its parser's (pipeline/settings.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from steps.lib.defaults import STORE as DEFAULT_STORE
from steps.lib.errors import StepError
from steps.lib.promotion import GATED
from steps.lib.published import RUN_ID
from steps.lib.registry import AlreadyPublished, check_unpublished
from steps.lib.storage import ArtifactStore, open_store
from workflows.errors import UsageError
from workflows.pipeline.settings import PipelineSettings


def inconsistency(settings: PipelineSettings) -> str | None:
    """Why these settings contradict each other, or set what another makes inert; None if they agree."""
    start = PipelineSettings()
    if settings.min_workers > settings.workers:
        return (
            f"--min-workers {settings.min_workers} is more than --workers {settings.workers}: "
            "no round could ever average enough models"
        )
    if settings.limit and settings.workers > settings.limit:
        return (
            f"--workers {settings.workers} is more than the {settings.limit} training samples "
            "--limit keeps: some shards would be empty"
        )
    if settings.partition != "dirichlet" and settings.alpha != start.alpha:
        return (
            f"--alpha {settings.alpha} shapes only --partition dirichlet shards; with "
            f"{settings.partition} shards it does nothing (add --partition dirichlet)"
        )
    if settings.final_learning_rate > settings.learning_rate:
        return (
            f"--final-learning-rate {settings.final_learning_rate} is above --learning-rate "
            f"{settings.learning_rate}: the rate decays from the first to the final one"
        )
    if settings.serve != "if-not-worse" and settings.max_accuracy_drop != start.max_accuracy_drop:
        return (
            f"--max-accuracy-drop is the gate of --serve if-not-worse; with --serve "
            f"{settings.serve} it does nothing"
        )
    if settings.serve not in GATED and settings.min_accuracy != start.min_accuracy:
        return (
            f"--min-accuracy gates --serve if-better and if-not-worse; with --serve "
            f"{settings.serve} it does nothing"
        )
    if not settings.retries and settings.retry_backoff != start.retry_backoff:
        return "--retry-backoff waits before a retry; with --retries 0 it does nothing"
    return None


def check_settings(settings: PipelineSettings, name: str | None) -> None:
    """What every run, render or registration is refused for: contradicting settings, or a --name that is
    no run id the store and page know or Argo takes (validate.go: maxCharsInObjectName)."""
    if problem := inconsistency(settings):
        raise UsageError(problem)
    if name and not RUN_ID.match(name):
        raise UsageError(
            f"--name {name[:80]!r}: a run's name is lowercase letters, digits, '-' and '.', "
            "starts and ends with a letter or digit, and is at most 63 characters (as Argo's)"
        )


def writable_folder(path: Path, flag: str, inside: Path | None = None) -> None:
    """`path` is a folder this user can write in, or can make in an existing parent (or in `inside`)."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{flag} {path} is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {path}: this user cannot write in it")
        return
    parent = path.parent
    if parent == inside:
        return
    if not parent.is_dir():
        what = "is a file" if parent.exists() else "does not exist"
        raise UsageError(
            f"{flag} {path}: its folder {parent} {what}; the store and the logs are made only "
            "inside an existing folder"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: this user cannot create it in {parent}")


def local_source(source: str) -> None:
    """A data source on this machine is a readable file."""
    if "://" in source:
        return
    path = Path(source)
    if not path.exists():
        raise UsageError(f"--source {source}: no such file")
    if not path.is_file():
        raise UsageError(f"--source {source} is not a file (mnist.npz)")
    if not os.access(path, os.R_OK):
        raise UsageError(f"--source {source}: this user cannot read it")


def free_run_name(store: ArtifactStore, logs_dir: Path, name: str) -> None:
    """No run of this name in the store or the logs: a second run would write over the first's files."""
    try:
        check_unpublished(store, name)
        taken = bool(store.list_keys(f"{name}/"))
    except AlreadyPublished:
        taken = True
    except StepError as error:
        raise UsageError(f"cannot read the store {store.uri}: {error}") from None
    if taken or (logs_dir / name).exists():
        raise UsageError(
            f"--name {name}: a run of that name is already in {store.uri}; choose another name"
        )


def check_local(settings: PipelineSettings, logs: Path, logs_given: bool, name: str | None) -> None:
    """A local run's store, logs, source and --name (submit.py then asks the engine for its images)."""
    folder_store = Path(settings.store) if "://" not in settings.store else None
    if folder_store is not None:
        writable_folder(folder_store, "--artifacts")
    # the logs may go in the store, made first, or by default in the project's .runs
    made_first = folder_store or (Path(DEFAULT_STORE) if not logs_given else None)
    writable_folder(logs, "--logs-dir", inside=made_first)
    local_source(settings.source)
    if name:
        free_run_name(open_store(settings.store), logs, name)


def cluster_refusal(settings: PipelineSettings) -> str | None:
    """Why a cluster could not run these settings, or None: Argo keeps keyed artifacts at the top of
    the repository's bucket (workflow_types.go: ArtifactLocation.Relocate)."""
    if not settings.store.startswith("gs://"):
        return (
            "on Argo the model is published to a bucket: pass --artifacts gs://BUCKET, the bucket "
            "of the cluster's artifact repository (env ARTIFACTS)"
        )
    if "/" in settings.store.removeprefix("gs://").strip("/"):  # a folder inside the bucket
        return (
            f"on Argo the store is the artifact repository's bucket itself, without a prefix: "
            f"Argo keeps the run's artifacts at the bucket's top, so {settings.store} would split the "
            "run's files from its checkpoints and published model; pass --artifacts gs://BUCKET"
        )
    if "://" not in settings.source:
        return f"on Argo the data must come from a URL or gs:// URI, not the local path {settings.source}"
    return None


def image_warnings(settings: PipelineSettings) -> list[str]:
    """Images no registry serves: a local cluster's nodes may hold them loaded, so only pointed out."""
    images = (
        ("--image", settings.image, "mnist-argo-steps"),
        ("--train-image", settings.train_image, "mnist-argo-train"),
    )
    return [
        f"{flag} {image!r} {problem}: the nodes run it only if it was loaded into them (the "
        "local cluster's make cluster-up, kind load, k3d image import); on GKE pass the pushed "
        f"image, e.g. {flag} REGION-docker.pkg.dev/PROJECT/mnist/{name}:TAG"
        for flag, image, name in images
        if (problem := unpullable_image(image))
    ]


def check_cluster(settings: PipelineSettings, images_used: bool) -> None:
    """What a cluster run is refused for, then the images it takes warned of."""
    if problem := cluster_refusal(settings):
        raise UsageError(problem)
    for warning in image_warnings(settings) if images_used else []:
        print(f"submit: warning: {warning}", file=sys.stderr)


def render_notes(settings: PipelineSettings) -> list[str]:
    """What a cluster run of the rendered spec would be refused for or warned of, as notes."""
    notes = [problem] if (problem := cluster_refusal(settings)) else []
    return [f"submit: note: {note}" for note in notes + image_warnings(settings)]


def unpullable_image(image: str) -> str | None:
    """Why a cluster's nodes could not pull `image`, or None (as distribution/reference reads a name)."""
    registry, slash, _ = image.partition("/")
    if not slash or not ("." in registry or ":" in registry or registry == "localhost"):
        return "names no registry (it is the local build's name)"
    if registry.split(":")[0] in ("localhost", "127.0.0.1"):
        return "names this machine's images or registry"
    return None


def check_name_unpublished(store: str, name: str) -> None:
    """Refuse a run id the store has published; a store this machine cannot read is a warning."""
    try:
        check_unpublished(open_store(store), name)
    except AlreadyPublished as error:
        raise UsageError(f"--name {name}: {error}; choose another name") from None
    except Exception as error:  # google.auth's DefaultCredentialsError, an unreachable store
        print(
            f"submit: warning: cannot read {store} to check that {name} is not published there "
            f"({str(error).splitlines()[0][:120]}); publish refuses it if it is",
            file=sys.stderr,
        )


def check_local_retry(uri: str, run: str) -> None:
    """A published run succeeded: nothing to take up."""
    try:
        check_unpublished(open_store(uri), run)
    except AlreadyPublished:
        raise UsageError(
            f"run {run} succeeded (it is published): there is nothing to retry"
        ) from None
