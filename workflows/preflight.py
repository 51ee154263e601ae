"""Every check submit.py makes before a run, before anything is created or sent; each refusal is one
UsageError line (exit 2), a warning or a note one line on stderr:
- the settings against each other (inconsistency) and the run's name (check_run_name);
- a local run (check_local): the store and the logs folder can be made and written, a local data source
  is a file, the run's name is free, the container engine answers and holds the images;
- a cluster run (check_cluster): the store is a bucket's top, the data source a URL, the images pullable;
  --render says the same as notes (render_notes).
Each setting's own bounds are its parser's (workflows/pipeline/settings.py); what the local runner runs,
workflows/local/spec.py; what Argo accepts, the Argo Server's lint (workflows/server/client.py).

A folder that does not exist yet is created only inside one that does: a mistyped path is refused
instead of becoming a tree of new folders (`--artifacts /nonexistent/dir/x`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
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
    """Why these settings cannot make the run they describe, or would do less than they say (a setting
    another one makes inert), in one line; None when they agree."""
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
    """What every run, render or registration is refused for: settings that contradict each other, and a
    --name Argo would refuse."""
    if problem := inconsistency(settings):
        raise UsageError(problem)
    if name:
        check_run_name(name)


def check_run_name(name: str) -> None:
    """A name Argo accepts for a Workflow: a Kubernetes object name (a DNS-1123 subdomain, which the
    API server requires) of at most 63 characters (workflow/validate/validate.go:
    maxCharsInObjectName); the run id the store and the page know the run by."""
    if not RUN_ID.match(name):
        raise UsageError(
            f"--name {name[:80]!r}: a run's name is lowercase letters, digits, '-' and '.', "
            "starts and ends with a letter or digit, and is at most 63 characters (as Argo's)"
        )


def writable_folder(path: Path, flag: str, inside: Path | None = None) -> None:
    """`path` is a folder this user can write in, or can be made in its existing parent (or in
    `inside`, a folder the run makes first)."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{flag} {path} is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {path}: this user cannot write in it")
        return
    parent = path.parent
    if inside is not None and parent == inside:
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
    """A data source on this machine is a regular file (a URL or gs:// URI is read by split)."""
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
    """No run of this name is in the store or the logs: Argo refuses a second Workflow of one name
    (AlreadyExists), and a second run would write over the first one's files."""
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


def check_local(
    settings: PipelineSettings,
    logs: Path,
    logs_given: bool,
    name: str | None,
    ready: Callable[[list[str]], None],
) -> None:
    """What a local run is refused for: a store or logs folder that cannot be made, a data source that is
    no file, a taken --name, and (`ready`, the engine's own check) an engine without the images."""
    folder_store = Path(settings.store) if "://" not in settings.store else None
    if folder_store is not None:
        writable_folder(folder_store, "--artifacts")
    # the logs may go in the store, made first, or by default in the project's .runs
    made_first = folder_store or (Path(DEFAULT_STORE) if not logs_given else None)
    writable_folder(logs, "--logs-dir", inside=made_first)
    local_source(settings.source)
    if name:
        free_run_name(open_store(settings.store), logs, name)
    ready([settings.image, settings.train_image])


def cluster_refusal(settings: PipelineSettings) -> str | None:
    """Why a cluster could not run these settings, or None. A cluster cannot read this machine's files,
    so the store and the data source are URLs; and the store is the artifact repository's bucket itself:
    Argo puts every keyed artifact at its key in that bucket (workflow_types.go:
    ArtifactLocation.Relocate), so under a prefix the checkpoints and the published model would land
    apart from the run's artifacts."""
    if not settings.store.startswith("gs://"):
        return (
            "on Argo the model is published to a bucket: pass --artifacts gs://BUCKET, the bucket "
            "of the cluster's artifact repository (env ARTIFACTS)"
        )
    if has_prefix(settings.store):
        return (
            f"on Argo the store is the artifact repository's bucket itself, without a prefix: "
            f"Argo keeps the run's artifacts at the bucket's top, so {settings.store} would split the "
            "run's files from its checkpoints and published model; pass --artifacts gs://BUCKET"
        )
    if "://" not in settings.source:
        return f"on Argo the data must come from a URL or gs:// URI, not the local path {settings.source}"
    return None


def image_warnings(settings: PipelineSettings) -> list[str]:
    """An image no registry serves: a local cluster's nodes hold the images loaded into them under such
    names, so it is only pointed out."""
    warnings = []
    for flag, image, name in (
        ("--image", settings.image, "mnist-argo-steps"),
        ("--train-image", settings.train_image, "mnist-argo-train"),
    ):
        if problem := unpullable_image(image):
            warnings.append(
                f"{flag} {image!r} {problem}: the nodes run it only if it was loaded into them (the "
                "local cluster's make cluster-up, kind load, k3d image import); on GKE pass the pushed "
                f"image, e.g. {flag} REGION-docker.pkg.dev/PROJECT/mnist/{name}:TAG"
            )
    return warnings


def check_cluster(settings: PipelineSettings, images_used: bool) -> None:
    """What a cluster run is refused for (cluster_refusal), then its images warned of when the run takes
    them (`images_used`: a run from the registered template takes the template's)."""
    if problem := cluster_refusal(settings):
        raise UsageError(problem)
    for warning in image_warnings(settings) if images_used else []:
        print(f"submit: warning: {warning}", file=sys.stderr)


def render_notes(settings: PipelineSettings) -> list[str]:
    """What a cluster run of the rendered spec would be refused for or warned of, as notes."""
    notes = [problem] if (problem := cluster_refusal(settings)) else []
    return [f"submit: note: {note}" for note in notes + image_warnings(settings)]


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


def check_name_unpublished(store: str, name: str) -> None:
    """Refuse a run id the store has published (steps.lib.registry.check_unpublished); a store this
    machine cannot read (no credentials for the bucket here) is only a warning."""
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
