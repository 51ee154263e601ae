"""The manifests committed beside the pipeline's code (workflows/pipeline/workflow.yaml and
workflow-template.yaml) are, byte for byte, what the code renders, and what the documented command prints."""

from __future__ import annotations

import pytest

from tests.support.project import run_submit
from workflows.pipeline import manifests

REGENERATE = "make manifests (python -m workflows.pipeline.manifests) writes it again"


@pytest.mark.parametrize(
    "path", [manifests.WORKFLOW_FILE, manifests.TEMPLATE_FILE], ids=lambda p: p.name
)
def test_each_committed_manifest_is_what_the_code_renders(path) -> None:
    assert path.is_file(), f"{path.name} is missing: {REGENERATE}"
    assert path.read_text() == manifests.rendered()[path], f"{path.name} is stale: {REGENERATE}"


@pytest.mark.parametrize(
    ("flags", "path"),
    [([], manifests.WORKFLOW_FILE), (["--register"], manifests.TEMPLATE_FILE)],
    ids=["workflow", "template"],
)
def test_the_documented_render_prints_the_committed_manifest(flags, path, tmp_path) -> None:
    """What manifests.py's docstring says: submit.py --render --artifacts gs://BUCKET prints the same bytes,
    when no environment variable sets a default (PATH alone), from any folder."""
    result = run_submit(
        "--render",
        *flags,
        *("--artifacts", manifests.STORE),
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == path.read_text()
