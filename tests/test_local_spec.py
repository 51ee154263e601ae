"""workflows/local/spec.py: the runner reads every Workflow the pipeline compiles, refuses in one line what it
never compiles before anything runs, and substitutes `{{…}}` tags as the controller does."""

from __future__ import annotations

import copy
from pathlib import Path, PurePosixPath

import pytest
import yaml

from steps.lib.storage import open_store
from workflows.errors import UnresolvedReference, UnsupportedFeature
from workflows.local.runner import LocalRunner
from workflows.local.spec import limit, read, substitute, templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow

COMMITTED = Path(__file__).resolve().parents[1] / "workflows/pipeline"


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"workers": 5, "rounds": 3, "retries": 0},
        {"min_workers": 1, "partition": "dirichlet", "serve": "always", "limit": 3000},
    ],
)
def test_every_workflow_the_pipeline_compiles_is_read(settings: dict) -> None:
    compiled = PipelineSettings(**settings, store="gs://bucket")
    for document in (compile_workflow(compiled), compile_template(compiled)):
        spec = read(document)
        assert spec.entry["name"] == "pipeline"
        train = spec.steps["train"]
        assert train.scratch == (PurePosixPath("/work/out"), PurePosixPath("/tmp"))
        assert spec.deadline == 21600 and train.deadline == 3600
        assert train.memory == 3 * 2**30 and train.cpus == 2  # resources.limits: 3Gi, 2
        # the models folder readable to the steps' user, not argoexec's 0700 (gcs.go:downloadObject)
        assert spec.steps["aggregate"].template["inputs"]["artifacts"][0]["mode"] == 0o755
    for name in ("workflow.yaml", "workflow-template.yaml"):  # the committed manifests
        read(yaml.safe_load((COMMITTED / name).read_text()))


def altered(where: str, field: str, value: object) -> dict:
    """The compiled Workflow with `field` set at `where`."""
    workflow = copy.deepcopy(compile_workflow(PipelineSettings(store="gs://bucket")))
    templates = templates_by_name(workflow)
    target = {
        "spec": workflow["spec"],
        "template": templates["train"],
        "container": templates["train"]["container"],
        "resources": templates["train"]["container"]["resources"],
        "task": templates["pipeline"]["dag"]["tasks"][0],
        "artifact": templates["split"]["outputs"]["artifacts"][0],
        "gcs": templates["split"]["outputs"]["artifacts"][0]["gcs"],
    }[where]
    target[field] = value
    return workflow


@pytest.mark.parametrize(
    ("where", "field", "value", "said"),
    [
        ("spec", "onExit", "cleanup", "does not support onExit (spec)"),
        ("spec", "entrypoint", "train", "runs a dag of container templates only"),
        ("template", "hooks", {}, "does not support hooks (template 'train')"),
        ("template", "activeDeadlineSeconds", "1h", "train.activeDeadlineSeconds must be a whole"),
        ("template", "retryStrategy", {"limit": 1, "affinity": {}}, "support affinity (template"),
        ("container", "env", [], "does not support env (template 'train')"),
        ("resources", "limits", {"memory": "3GB"}, "cannot read the quantity '3GB' (memory)"),
        ("task", "continueOn", {}, "continueOn (template 'pipeline', task 'split')"),
        ("task", "withItems", ["0"], "does not support withItems"),
        ("task", "depends", "init.AnySucceeded", "cannot read depends 'init.AnySucceeded'"),
        ("artifact", "archive", {"tar": {}}, "unarchived gcs artifacts (archive: none) only"),
        ("gcs", "bucket", "other", "does not support bucket (template 'split', artifact"),
    ],
)
def test_what_the_pipeline_never_compiles_is_refused_in_one_line_before_anything_runs(
    tmp_path: Path, where: str, field: str, value: object, said: str
) -> None:
    runner = LocalRunner(open_store(tmp_path / "store"), tmp_path / "logs", echo=print)
    with pytest.raises(UnsupportedFeature) as refused:
        runner.run(altered(where, field, value))
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "logs").exists()


def test_tags_are_substituted_as_the_controller_substitutes_them() -> None:
    """Values go in as written, a tag's whitespace is ignored, an unknown tag or an expression stops the try."""
    values = {"inputs.parameters.q": 'say "hi" {{not.a.tag}} <b>', "workflow.name": "run-1"}
    given = {"args": ["--q={{inputs.parameters.q}}", "{{ workflow.name }}/x"], "n": [1, None]}
    substituted = {"args": ['--q=say "hi" {{not.a.tag}} <b>', "run-1/x"], "n": [1, None]}
    assert substitute(given, values, "here") == substituted
    for text in ("{{tasks.a.id}}", "{{=inputs.parameters.q}}"):
        with pytest.raises(UnresolvedReference, match=f"failed to resolve {text} \\(here\\)"):
            substitute(text, values, "here")


@pytest.mark.parametrize(
    ("text", "number"),
    [("3Gi", 3 * 2**30), ("768Mi", 768 * 2**20), ("1.5Gi", 3 * 2**29), ("500m", 0.5)],
)
def test_quantities_read_as_kubernetes_reads_them(text: str, number: float) -> None:
    assert limit({"container": {"resources": {"limits": {"cpu": text}}}}, "cpu") == number
