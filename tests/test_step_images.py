"""The TensorFlow image for `train` only, the light image (no TensorFlow) for the five other steps."""

from __future__ import annotations

import pytest
import yaml

from tests.support.project import run_submit
from workflows.local.spec import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

LIGHT_STEPS = ("split", "init", "aggregate", "evaluate", "publish")


def images_by_template(workflow: dict) -> dict[str, str]:
    return {
        name: template["container"]["image"]
        for name, template in templates_by_name(workflow).items()
        if "container" in template
    }


def test_only_train_names_the_tensorflow_image() -> None:
    settings = PipelineSettings(store="gs://b")
    assert images_by_template(compile_workflow(settings)) == {
        **dict.fromkeys(LIGHT_STEPS, settings.image),
        "train": settings.train_image,
    }
    assert settings.image == "mnist-argo-steps:0.1.0"
    assert settings.train_image == "mnist-argo-train:0.1.0"


@pytest.mark.parametrize("register", [False, True], ids=["workflow", "template"])
def test_render_takes_both_images_from_their_flags(register: bool) -> None:
    result = run_submit(
        "--render",
        *(["--register"] if register else []),
        *("--image", "registry.example/mnist-argo-steps:abc"),
        *("--train-image", "registry.example/mnist-argo-train:abc"),
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS": "gs://mnist-models"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (rendered,) = yaml.safe_load_all(result.stdout)
    assert rendered["kind"] == ("WorkflowTemplate" if register else "Workflow")
    assert images_by_template(rendered) == {
        **dict.fromkeys(LIGHT_STEPS, "registry.example/mnist-argo-steps:abc"),
        "train": "registry.example/mnist-argo-train:abc",
    }
