"""The namespace enforces Pod Security `restricted`, and each image runs as the user the pods run as. That
every pod of a run and the page pass `restricted`, and that a step's pod holds no token, the real API server
and controller show on the cluster (tests/cluster/test_pipeline_run.py, tests/cluster/test_rights.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.dockerfile import DOCKERFILE, image_user
from tests.support.kustomize import build, needs_kubectl
from tests.support.project import ROOT
from workflows.pipeline import resources as cluster

K8S = ROOT / "infra" / "k8s"
STEPS_USER = f"{cluster.STEPS_USER}:{cluster.STEPS_USER}"


@needs_kubectl
def test_the_namespace_enforces_restricted_and_the_page_runs_as_the_images_user() -> None:
    manifests = build(K8S / "base")
    (namespace,) = [m for m in manifests if m["kind"] == "Namespace"]
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == cluster.STEPS_USER


def test_the_pods_user_is_the_images_user() -> None:
    """Each image's last USER, its own or one it inherits, is STEPS_USER: a pod whose runAsUser differs
    from its image's user may not own /work, which the image gives that user."""
    for target in ("steps", "train", "page"):
        assert image_user(target) == STEPS_USER, target


@pytest.mark.parametrize(
    "change",
    [
        ("FROM step-runtime AS train", "FROM runtime AS train"),  # built where no USER is set
        (
            "COPY --from=build-train /opt/venv /opt/venv",
            "COPY --from=build-train /opt/venv /opt/venv\nUSER 0",
        ),
    ],
)
def test_a_step_image_with_another_user_is_seen(change: tuple[str, str], tmp_path: Path) -> None:
    """The check follows each target's stages: the train image losing the steps' user is caught."""
    dockerfile = tmp_path / "Dockerfile"
    text = DOCKERFILE.read_text()
    assert change[0] in text
    dockerfile.write_text(text.replace(change[0], change[1]))
    assert image_user("train", dockerfile) != STEPS_USER
    assert image_user("steps", dockerfile) == STEPS_USER
