"""GCS artifacts moved between the store and a try's folder as Argo v4.1.4's executor moves them
(workflow/executor/executor.go:loadArtifact and SaveArtifacts, workflow/artifacts/gcs/gcs.go)."""

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


def load_inputs(store: ArtifactStore, inputs: Mapping[str, Any], invocation: Invocation) -> None:
    """Place each input artifact at its path; ArtifactNotFound unless it is `optional`."""
    for artifact in inputs.get("artifacts", []):
        key = str(PurePosixPath(artifact["gcs"]["key"]))  # filepath.Clean
        target = invocation.host_path(artifact["path"])
        listed = store.list_keys(key.rpartition("/")[0])
        objects = [n for n in listed if n.startswith(key) and n[-1:] != "/"]  # no folder markers
        names = [key] if key in listed else sorted(objects)
        if not names and not artifact.get("optional"):
            raise ArtifactNotFound(
                f"artifact {artifact['name']} failed to load: no results for key: {key}"
            )
        for name in names:
            # filepath.Join(path, strings.TrimPrefix(objName, key)): `models-old/x` lands at `models/-old/x`
            local = Path(os.path.normpath(os.path.join(target, name.removeprefix(key).lstrip("/"))))
            if target not in (local, *local.parents):
                raise StepError(f"object {name!r} would land outside {target}")
            # folders inside the artifact as the executor makes them, above it as a mount point's
            for folder in reversed([p for p in local.parents if not p.exists()]):
                folder.mkdir()
                folder.chmod(DIRECTORY_MODE if target in (folder, *folder.parents) else 0o755)
            store.download_file(name, local)
            local.chmod(FILE_MODE)
        if names and artifact.get("mode") is not None:  # executor.go:chmod
            recursed = target.rglob("*") if artifact.get("recurseMode") else []
            for path in (target, *recursed):
                path.chmod(int(artifact["mode"]))


def save_outputs(store: ArtifactStore, outputs: Mapping[str, Any], invocation: Invocation) -> str:
    """Save every output artifact that exists, whatever the exit code; '' or what went wrong."""
    problems = []
    for artifact in outputs.get("artifacts", []):
        key = str(PurePosixPath(artifact["gcs"]["key"]))
        source = invocation.host_path(artifact["path"])
        name = f"output artifact {artifact['name']!r}"
        if not source.exists():
            problems.append(f"{name} was not written at {artifact['path']}")
            continue
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        try:
            for path in files:  # a folder's files under `key/`
                store.upload_file(path, "/".join([key, *path.relative_to(source).parts]))
        except (OSError, StepError) as error:
            problems.append(f"{name}: {error}")
    return "; ".join(problems)


def output_parameters(outputs: Mapping[str, Any], invocation: Invocation) -> dict[str, str]:
    """Each output parameter's file (ValueError: one is missing)."""
    values = {}
    for parameter in outputs.get("parameters", []):
        where = parameter["valueFrom"]["path"]
        if not (path := invocation.host_path(where)).is_file():
            raise ValueError(f"output parameter {parameter['name']!r}: {where} not found")
        values[parameter["name"]] = path.read_text().strip()
    return values
