"""The real Argo Server's lint and `argo lint --offline` pass every manifest the project renders and
refuse a broken one in the double's words."""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.doubles.argo_server import REFUSED_CONTINUE_ON
from tests.support.cluster import Cluster
from workflows.errors import WorkflowError
from workflows.pipeline import manifests
from workflows.pipeline.settings import MAX_ROUNDS, PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow
from workflows.server.client import lint

# The Argo Server's certificate is self-signed; ARGO_INSECURE_SKIP_VERIFY accepts it on purpose.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


def rendered(cluster: Cluster) -> dict[str, dict]:
    """Every manifest the project renders, by a name for each."""
    documents = {}
    for rounds in (1, MAX_ROUNDS):
        for workers in range(1, 9):
            settings = replace(cluster.settings(), workers=workers, rounds=rounds)
            documents[f"workflow-{workers}w-{rounds}r"] = compile_workflow(settings)
        documents[f"template-{rounds}r"] = compile_template(
            replace(cluster.settings(), rounds=rounds)
        )
    for path in (manifests.WORKFLOW_FILE, manifests.TEMPLATE_FILE):
        documents[path.name] = yaml.safe_load(path.read_text())
    return documents


def broken(document: dict) -> dict:
    """The pipeline as it once was: continueOn beside depends on its first trainers."""
    document = copy.deepcopy(document)
    [dag] = [t for t in document["spec"]["templates"] if "dag" in t]
    [trainers] = [t for t in dag["dag"]["tasks"] if t["name"] == "train-round-1"]
    trainers["continueOn"] = {"failed": True}
    return document


def argo_lint(cluster: Cluster, file: Path, document: dict) -> subprocess.CompletedProcess:
    """`argo lint --offline` of one document, written to `file` (one at a time: offline, the CLI takes the
    WorkflowTemplates it is given as the ones references resolve to, and refuses two of one name)."""
    file.write_text(yaml.safe_dump(document))
    argo = shutil.which("argo", path=cluster.process_env()["PATH"])
    assert argo, (
        "no argo CLI on the cluster's PATH (make cluster-up builds it; .cluster/env adds it)"
    )
    return subprocess.run(
        [argo, "lint", "--offline", "--no-color", str(file)],
        capture_output=True,
        text=True,
        env=cluster.process_env(),
        timeout=120,
    )


def test_the_argo_server_and_argo_lint_offline_pass_every_rendered_manifest(
    cluster: Cluster, tmp_path: Path
) -> None:
    refused = {}
    for name, document in rendered(cluster).items():
        try:
            lint(cluster.argo_server, document)
        except WorkflowError as refusal:
            refused[name] = str(refusal)
        done = argo_lint(cluster, tmp_path / f"{name.removesuffix('.yaml')}.yaml", document)
        if done.returncode != 0 or "no linting errors found" not in done.stdout:
            refused[name] = done.stdout + done.stderr
    assert refused == {}


@pytest.mark.parametrize("kind", ["Workflow", "WorkflowTemplate"])
def test_both_refuse_a_broken_manifest_in_the_words_the_double_answers(
    cluster: Cluster, tmp_path: Path, kind: str
) -> None:
    compile: Callable[[PipelineSettings], dict] = (
        compile_workflow if kind == "Workflow" else compile_template
    )
    document = broken(compile(cluster.settings()))
    with pytest.raises(WorkflowError) as refusal:
        lint(cluster.argo_server, document)
    assert str(refusal.value) == f"the Argo Server refuses the {kind}: {REFUSED_CONTINUE_ON}"
    done = argo_lint(cluster, tmp_path / "broken.yaml", document)
    assert done.returncode != 0, done.stdout
    assert f"({kind}): {REFUSED_CONTINUE_ON}" in done.stdout, done.stdout + done.stderr
