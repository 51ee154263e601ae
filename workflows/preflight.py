"""What submit.py can know before a local run starts, checked before anything is created: the store and
the logs folder can be made and written, a local data source is a file, the run's name is free, the
container engine answers and holds the images. Each check raises UsageError with one line.

A folder that does not exist yet is created only inside one that does: a mistyped path is refused
instead of becoming a tree of new folders (`--artifacts /nonexistent/dir/x`).
"""

from __future__ import annotations

import os
from pathlib import Path

from steps.lib.errors import StepError
from steps.lib.published import RUN_ID
from steps.lib.registry import AlreadyPublished, check_unpublished
from steps.lib.storage import ArtifactStore
from workflows.errors import UsageError


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
