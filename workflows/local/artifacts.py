"""Key-only GCS artifacts moved between the store and a try's folder as Argo v4.1.4's executor moves them.

Loading (workflow/executor/executor.go:loadArtifact, workflow/artifacts/gcs/gcs.go:downloadObjects): a key names
one object, or is a plain string prefix of many; each lands at the artifact path joined with what follows the
key, in folders of mode 0700 (files 0644) unless the artifact sets `mode`. A missing key fails the try as an
Error unless the artifact is `optional`. Saving (executor.go:SaveArtifacts): a file goes to its key, a folder's
files under `key/`, whatever the step's exit code."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from steps.lib.errors import ArtifactNotFound, StepError
from steps.lib.storage import ArtifactStore
from workflows.local.engines import Invocation

DIRECTORY_MODE = 0o700  # os.MkdirAll(objectDir, 0o700) in gcs.go:downloadObject
FILE_MODE = 0o644  # os.Create (0666) under the executor's umask 022


def clean_key(key: str) -> str:
    """filepath.Clean of a key: no trailing or doubled slashes, no `.` parts."""
    return str(PurePosixPath(key)) if key else key


def matching_keys(store: ArtifactStore, key: str) -> list[str]:
    """The objects an input key loads: the object named `key`, or every object whose name starts with it."""
    key = clean_key(key)
    parent = key.rpartition("/")[0]
    listed = store.list_keys(parent)
    if key in listed:
        return [key]
    return sorted(name for name in listed if name.startswith(key) and not name.endswith("/"))


def load_inputs(store: ArtifactStore, inputs: list[dict], invocation: Invocation) -> None:
    """Place each input artifact at its path (an optional one that is absent is left out)."""
    for artifact in inputs:
        key, target = clean_key(artifact["gcs"]["key"]), invocation.host_path(artifact["path"])
        names = matching_keys(store, key)
        if not names and not artifact.get("optional"):
            raise ArtifactNotFound(
                f"artifact {artifact['name']} failed to load: no results for key: {key}"
            )
        for name in names:
            # filepath.Join(path, strings.TrimPrefix(objName, key)): `models-old/x` lands at `models/-old/x`
            local = Path(os.path.normpath(os.path.join(target, name.removeprefix(key).lstrip("/"))))
            if target not in (local, *local.parents):
                raise StepError(f"object {name!r} would land outside {target}")
            _make_dirs(local.parent, target)
            store.download_file(name, local)
            local.chmod(FILE_MODE)
        if names and artifact.get("mode") is not None:
            _chmod(target, int(artifact["mode"]), bool(artifact.get("recurseMode")))


def _make_dirs(folder: Path, artifact_root: Path) -> None:
    """Folders inside the artifact as the executor makes them (0700); those above it as the container
    runtime makes a mount point's parents (0755)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for path in reversed(missing):
        inside = path == artifact_root or artifact_root in path.parents
        mode = DIRECTORY_MODE if inside else 0o755
        path.mkdir(mode=mode)
        path.chmod(mode)  # mkdir's mode passes through the umask


def _chmod(path: Path, mode: int, recurse: bool) -> None:
    """executor.go:chmod: the artifact's path, and with recurseMode everything under it."""
    path.chmod(mode)
    if recurse and path.is_dir():
        for child in path.rglob("*"):
            child.chmod(mode)


def save_outputs(store: ArtifactStore, outputs: Mapping[str, Any], invocation: Invocation) -> str:
    """Save every output artifact that exists, whatever the exit code (a file to its key, a folder's files
    under `key/`); '' or what went wrong."""
    problems = []
    for artifact in outputs.get("artifacts", []):
        key, source = clean_key(artifact["gcs"]["key"]), invocation.host_path(artifact["path"])
        if not source.exists():
            problems.append(
                f"output artifact {artifact['name']!r} was not written at {artifact['path']}"
            )
            continue
        files = (
            [(source, key)]
            if not source.is_dir()
            else [
                (path, f"{key}/{path.relative_to(source).as_posix()}")
                for path in sorted(source.rglob("*"))
                if path.is_file()
            ]
        )
        try:
            for path, name in files:
                store.upload_file(path, name)
        except (OSError, StepError) as error:
            problems.append(f"output artifact {artifact['name']!r}: {error}")
    return "; ".join(problems)


def output_parameters(
    outputs: Mapping[str, Any], invocation: Invocation, problems: str
) -> dict[str, str]:
    """Each output parameter's file, once the artifacts were saved (ValueError: what went wrong)."""
    if problems:
        raise ValueError(problems)
    values = {}
    for parameter in outputs.get("parameters", []):
        path = invocation.host_path(parameter["valueFrom"]["path"])
        if not path.is_file():
            raise ValueError(
                f"output parameter {parameter['name']!r}: {parameter['valueFrom']['path']} not found"
            )
        values[parameter["name"]] = path.read_text().strip()
    return values
