"""checkov over infra/ as written (the Dockerfile; the scripts and Cloud Build file for secrets) and the
manifests as kustomize assembles them: the example overlay, and up.sh's for a public page behind IAP."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.support.kustomize import build, render_overlay
from tests.support.project import ROOT


def checkov_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]["scan"]


def checkov_program() -> Path:
    """checkov in its own virtual environment (it pins libraries older than pytest needs, packaging<24),
    from the `scan` extra, made on first use and kept for the next runs."""
    requirements = checkov_requirements()
    key = hashlib.sha256("\n".join([sys.version, *requirements]).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    venv = cache / "mnist-argo" / f"checkov-{key}"
    program = venv / "bin" / "checkov"
    if not program.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *requirements],
            check=True,
        )
    return program


@pytest.mark.slow  # checkov in its own environment, over every file
def test_dockerfile_and_manifests_pass_checkov(tmp_path: Path) -> None:
    scanned = tmp_path / "scan"
    for folder in ("docker", "gke"):
        shutil.copytree(ROOT / "infra" / folder, scanned / "infra" / folder)
    # Not the base: its placeholders (project, bucket, an image without a digest) every overlay replaces.
    assembled = build(ROOT / "infra" / "k8s" / "overlays" / "example")
    settings = {"PROJECT_ID": "my-project", "PAGE_DOMAIN": "mnist.example.com"}
    settings["PAGE_IAP_MEMBERS"] = (
        "user:a@example.com"  # up.sh's overlay for a public page behind IAP
    )
    public = build(render_overlay(tmp_path, "public", settings, "sha256:" + "a" * 64))
    (scanned / "assembled").mkdir()
    (scanned / "assembled" / "example.yaml").write_text(yaml.safe_dump_all(assembled))
    (scanned / "assembled" / "public.yaml").write_text(yaml.safe_dump_all(public))
    frameworks = ["--framework", "dockerfile", "kubernetes", "secrets"]
    # --skip-download: no network, the rules ship with the package
    options = ["--skip-download", "--output", "json", "--compact", "--quiet"]
    command = [str(checkov_program()), "--directory", str(scanned), *frameworks, *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    by_type = {report["check_type"]: report for report in reports}
    failures = [
        f"{check['check_id']} {check['check_name']}: {check['resource']} ({check['file_path']})"
        for report in reports
        for check in report["results"]["failed_checks"]
    ]
    assert not failures, "\n".join(failures)
    assert result.returncode == 0, result.stderr[-2000:]
    # Both kinds of file were really checked, the assembled overlay included.
    assert by_type["dockerfile"]["summary"]["passed"] > 50
    # (checkov also counts the Deployment's pod template as a resource of its own)
    assert by_type["kubernetes"]["summary"]["resource_count"] >= len(assembled) + len(public)
