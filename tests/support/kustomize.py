"""The manifests of a kustomization as the real `kubectl kustomize` assembles them (kustomize is built into
kubectl), and the functions of infra/gke/lib.sh that write them."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.project import ROOT

Manifest = dict[str, Any]
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed on this machine (kustomize is built into it)"
)


@functools.cache
def _assembled(directory: Path) -> str:
    assert KUBECTL, "kubectl is not installed on this machine"
    return subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=True
    ).stdout


def build(directory: Path) -> list[Manifest]:
    """The manifests `kubectl kustomize DIRECTORY` prints, as dicts (a fresh copy each call)."""
    return [manifest for manifest in yaml.safe_load_all(_assembled(directory)) if manifest]


def identity(manifest: Manifest) -> tuple[str, str, str]:
    """(kind, namespace, name): what kustomize keeps unique and patches match on."""
    metadata = manifest.get("metadata", {})
    return manifest["kind"], metadata.get("namespace", ""), metadata["name"]


def gke_lib(
    home: Path, settings: dict[str, str], function: str, *args: str, cwd: Path = ROOT
) -> str:
    """FUNCTION of infra/gke/lib.sh (after config.sh, both of the tree at CWD) run with these settings
    alone: its stdout."""
    script = f'source infra/gke/config.sh && source infra/gke/lib.sh && {function} "$@"'
    return subprocess.run(
        ["bash", "-c", script, function, *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), **settings},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def render_overlay(home: Path, name: str, settings: dict[str, str], digest: str) -> Path:
    """The overlay up.sh writes for SETTINGS (lib.sh's render_overlay), beside a copy of infra/k8s."""
    for folder in ("base", "components"):
        if not (home / "k8s" / folder).exists():
            shutil.copytree(ROOT / "infra" / "k8s" / folder, home / "k8s" / folder)
    gke_lib(
        home,
        settings,
        "render_overlay",
        str(home / "k8s" / "overlays" / name),
        "../../base",
        digest,
    )
    return home / "k8s" / "overlays" / name


def one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    """The one manifest of this kind and name."""
    matches = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]
