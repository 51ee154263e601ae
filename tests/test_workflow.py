"""The compiled Workflow and WorkflowTemplate (workflows/pipeline/workflow.py): valid against Argo v4.1.4's
own published JSON Schema (api/jsonschema/schema.json, tests/reference), carrying what a cluster needs, and
sent to the Argo Server unchanged. Argo's own validation judges them in the cluster tests: the real Argo
Server's lint and `argo lint --offline` (tests/cluster/test_lint_agrees.py).
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
import warnings
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from hera.workflows.models import Workflow as HeraWorkflow
from hera.workflows.models import WorkflowCreateRequest, WorkflowTemplateCreateRequest
from hera.workflows.models import WorkflowTemplate as HeraWorkflowTemplate

from tests.support import docs
from tests.support.argo_schema import first_error, workflow_validator
from tests.support.project import ROOT, run_submit
from workflows.local.spec import templates_by_name
from workflows.pipeline import resources as cluster
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow, label_expression

SHAPES = [(1, 1), (3, 2), (5, 3), (8, 1)]
# Measured in scratch environments: hera 5.16.0 to 5.25.1 drop retryStrategy.backoff.cap; 5.26 and 5.27
# carry it but their models are pydantic v1 ones, which argo_client does not speak (model_dump); from 6.0.0
# (to 7.1.0) this file and test_submit.py pass.
LOWEST_HERA = "6.0"


def compiled(workers: int, rounds: int) -> tuple[dict, dict]:
    settings = PipelineSettings(workers=workers, rounds=rounds)
    store = "gs://mnist-models"
    settings = replace(settings, store=store)
    return compile_workflow(settings), compile_template(settings)


@pytest.mark.parametrize(("workers", "rounds"), SHAPES)
def test_workflow_and_template_validate_against_argo_schema(workers: int, rounds: int) -> None:
    workflow, template = compiled(workers, rounds)
    assert first_error(workflow_validator("Workflow"), workflow) is None
    assert first_error(workflow_validator("WorkflowTemplate"), template) is None
    assert template["metadata"]["name"] == cluster.TEMPLATE_NAME
    assert template["spec"] == workflow["spec"]


@pytest.mark.parametrize(
    ("break_it", "complaint"),
    [
        (
            lambda w: w["spec"]["arguments"]["parameters"][0].pop("name"),
            "'name' is a required property",
        ),
        (lambda w: w["spec"].update(retryStratgy={"limit": "2"}), "retryStratgy"),
        (lambda w: w["spec"]["templates"][2].update(activeDeadlineSeconds=600), "not of type"),
        (lambda w: w.update(kind="Pipeline"), "'Workflow' was expected"),
    ],
    ids=["parameter-without-name", "misspelt-field", "deadline-not-a-string", "wrong-kind"],
)
def test_schema_validation_catches_a_broken_spec(break_it: Any, complaint: str) -> None:
    workflow, _ = compiled(3, 2)
    broken = copy.deepcopy(workflow)
    break_it(broken)
    error = first_error(workflow_validator("Workflow"), broken)
    assert error is not None and complaint in error


@pytest.mark.parametrize(("workers", "rounds"), SHAPES)
def test_the_dag_has_a_trainer_task_per_round(workers: int, rounds: int) -> None:
    workflow, _ = compiled(workers, rounds)
    tasks = templates_by_name(workflow)["pipeline"]["dag"]["tasks"]
    assert [t["name"] for t in tasks if t["template"] == "train"] == [
        f"train-round-{r}" for r in range(1, rounds + 1)
    ]


def argo_ttl(spec: dict, phase: str) -> int | None:
    """workflow/gccontroller/gc_controller.go:ttl() of Argo v4.1.4: the seconds after which the garbage
    collector deletes a finished Workflow (and with it its pods), or None when it never does.
    WorkflowStatus.Failed() is phase Failed only; Completed() is Succeeded, Failed or Error."""
    strategy = spec.get("ttlStrategy") or {}
    if phase == "Failed" and strategy.get("secondsAfterFailure") is not None:
        return strategy["secondsAfterFailure"]
    if phase == "Succeeded" and strategy.get("secondsAfterSuccess") is not None:
        return strategy["secondsAfterSuccess"]
    if (
        phase in ("Succeeded", "Failed", "Error")
        and strategy.get("secondsAfterCompletion") is not None
    ):
        return strategy["secondsAfterCompletion"]
    return None


@pytest.mark.parametrize(
    ("phase", "seconds"),
    [
        ("Succeeded", cluster.SUCCEEDED_RUN_TTL_SECONDS),
        ("Failed", cluster.FAILED_RUN_TTL_SECONDS),
        ("Error", cluster.FAILED_RUN_TTL_SECONDS),
    ],
)
def test_every_finished_run_is_deleted_after_its_ttl(phase: str, seconds: int) -> None:
    """docs/failures.md's promise: a day after a success, three days after any other ending."""
    workflow, template = compiled(3, 2)
    assert argo_ttl(workflow["spec"], phase) == seconds
    assert argo_ttl(template["spec"], phase) == seconds


def test_spec_carries_what_a_cluster_needs() -> None:
    workflow, _ = compiled(3, 2)
    spec = workflow["spec"]
    assert spec["serviceAccountName"] == cluster.SERVICE_ACCOUNT
    assert spec["podGC"]["strategy"] and spec["ttlStrategy"]["secondsAfterFailure"] > 0
    assert int(spec["activeDeadlineSeconds"]) > 0
    assert workflow["metadata"]["labels"]["app.kubernetes.io/name"] == cluster.APP_LABEL
    # runs started from the WorkflowTemplate get their labels from workflowMetadata
    run_labels = spec["workflowMetadata"]
    assert run_labels["labels"] == workflow["metadata"]["labels"]
    assert run_labels["labelsFrom"]["mnist-argo/workers"] == {
        "expression": label_expression("workers")
    }
    assert spec["metrics"]["prometheus"][0]["name"] == cluster.DURATION_METRIC
    templates = templates_by_name(workflow)
    for name in ("split", "init", "train", "aggregate", "evaluate", "publish"):
        resources = templates[name]["container"]["resources"]
        assert set(resources) == {"requests", "limits"}
        assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}
        assert int(templates[name]["activeDeadlineSeconds"]) > 0
        for artifact in templates[name].get("outputs", {}).get("artifacts", []):
            assert set(artifact["gcs"]) == {"key"}, "no bucket in the spec"
            assert artifact["gcs"]["key"].startswith("{{workflow.name}}/")
    train = templates["train"]["retryStrategy"]
    assert train["retryPolicy"] == "Always" and train["limit"] == "2" and train["backoff"]
    evaluate = templates["evaluate"]
    assert [p["name"] for p in evaluate["outputs"]["parameters"]] == ["accuracy"]
    shown = {a["name"]: a for a in evaluate["outputs"]["artifacts"]}
    assert {"confusion", "report"} <= set(shown)
    assert all(a["archive"] == {"none": {}} for a in shown.values())
    gauge = evaluate["metrics"]["prometheus"][0]
    assert gauge["name"] == cluster.ACCURACY_METRIC
    assert gauge["gauge"]["value"] == "{{outputs.parameters.accuracy}}"
    # the fan-in: aggregate reads every worker's model through one key prefix
    aggregate_input = templates["aggregate"]["inputs"]["artifacts"][0]["gcs"]["key"]
    train_output = templates["train"]["outputs"]["artifacts"][0]["gcs"]["key"]
    assert train_output.startswith(aggregate_input + "/")


def test_each_rounds_history_is_an_artifact_the_argo_ui_shows_and_publish_carries_the_last() -> (
    None
):
    """The UI shows a file by its key's extension, unarchived (docs/artifact-visualization.md)."""
    workflow, _ = compiled(3, 3)
    templates = templates_by_name(workflow)
    aggregate = templates["aggregate"]
    written = {a["name"]: a for a in aggregate["outputs"]["artifacts"]}
    assert written["history"]["gcs"]["key"].endswith("/history.json")
    assert written["history-plot"]["gcs"]["key"].endswith("/history.png")
    assert all(written[name]["archive"] == {"none": {}} for name in ("history", "history-plot"))
    read = {a["name"]: a["gcs"]["key"] for a in aggregate["inputs"]["artifacts"]}
    assert read["validation"] == next(
        a["gcs"]["key"]
        for a in templates["split"]["outputs"]["artifacts"]
        if a["name"] == "validation"
    )
    assert read["history"] == "{{inputs.parameters.start-history}}"
    tasks = next(t for t in workflow["spec"]["templates"] if "dag" in t)["dag"]["tasks"]
    starts = {
        t["name"]: next(
            p["value"] for p in t["arguments"]["parameters"] if p["name"] == "start-history"
        )
        for t in tasks
        if t["template"] == "aggregate"
    }
    init_history = next(
        a for a in templates["init"]["outputs"]["artifacts"] if a["name"] == "history"
    )
    assert starts == {
        "aggregate-round-1": init_history["gcs"]["key"],
        "aggregate-round-2": written["history"]["gcs"]["key"].replace(
            "{{inputs.parameters.round}}", "1"
        ),
        "aggregate-round-3": written["history"]["gcs"]["key"].replace(
            "{{inputs.parameters.round}}", "2"
        ),
    }
    attached = [
        a
        for a in templates["publish"]["inputs"]["artifacts"]
        if a["path"].endswith((".json", ".png")) and "history" in a["name"]
    ]
    last = {
        a["name"]: a["gcs"]["key"].replace("{{inputs.parameters.round}}", "3")
        for a in aggregate["outputs"]["artifacts"]
    }
    assert {a["name"]: a["gcs"]["key"] for a in attached} == {
        "history": last["history"],
        "history-plot": last["history-plot"],
    }
    args = templates["publish"]["container"]["args"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--attach"] == [
        "in/confusion.png",
        "in/history.json",
        "in/history.png",
    ]


def test_retry_limit_follows_the_setting() -> None:
    workflow = compile_workflow(PipelineSettings(retries=5, store="gs://b"))
    assert templates_by_name(workflow)["train"]["retryStrategy"]["limit"] == "5"
    none = compile_workflow(PipelineSettings(retries=0, store="gs://b"))
    assert "retryStrategy" not in templates_by_name(none)["train"]


def test_render_prints_a_workflow_kubectl_can_create(tmp_path: Path) -> None:
    result = run_submit(
        "--render",
        *("--workers", "4"),
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS": "gs://mnist-models"},
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert len(documents) == 1
    rendered = documents[0]
    assert rendered["kind"] == "Workflow" and rendered["metadata"]["generateName"] == "mnist-"
    assert "name" not in rendered["metadata"]
    assert first_error(workflow_validator("Workflow"), rendered) is None
    parameters = {p["name"]: p["value"] for p in rendered["spec"]["arguments"]["parameters"]}
    assert parameters["workers"] == "4" and parameters["store"] == "gs://mnist-models"


def test_evaluate_report_reads_at_a_glance() -> None:
    from steps.evaluate import summary

    per_class = {str(digit): 0.99 for digit in range(10)} | {"8": 0.93}
    metrics = {"accuracy": 0.9771, "loss": 0.0712, "test_samples": 10000}
    report = summary(metrics | {"per_class_accuracy": per_class}).splitlines()
    assert report[0] == "test accuracy 0.9771, loss 0.0712 on 10000 digits"
    assert report[1] == "weakest digit: 8 (0.9300)"
    assert report[-1] == "    9  0.9900" and len(report) == 4 + 10


def test_render_with_register_prints_the_template(tmp_path: Path) -> None:
    result = run_submit(
        "--render", "--register", env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert rendered["kind"] == "WorkflowTemplate"
    assert rendered["metadata"]["name"] == cluster.TEMPLATE_NAME
    assert first_error(workflow_validator("WorkflowTemplate"), rendered) is None
    assert "--artifacts gs://BUCKET" in result.stderr, "a local store is pointed out"


def as_sent(request: Any) -> dict:
    """A request body as Hera's WorkflowsService serialises it onto the wire (create_workflow,
    create_workflow_template), read back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Hera calls pydantic's .json()
        text = request.json(
            exclude_none=True, by_alias=True, exclude_unset=True, exclude_defaults=True
        )
    return json.loads(text)


def test_the_spec_reaches_the_server_through_heras_models_unchanged() -> None:
    """argo_client sends the compiled dict through Hera's models, which drop what they do not know:
    Hera before 5.26 has no `backoff.cap` (Argo 3.7), and every retry's wait would lose its bound.
    pyproject.toml pins the lowest Hera that carries the whole spec and that the client speaks."""
    workflow, template = compiled(3, 2)
    sent = as_sent(WorkflowCreateRequest(namespace="mnist", workflow=HeraWorkflow(**workflow)))
    assert sent["workflow"] == workflow
    sent = as_sent(
        WorkflowTemplateCreateRequest(namespace="mnist", template=HeraWorkflowTemplate(**template))
    )
    assert sent["template"] == template
    assert all(
        t["retryStrategy"]["backoff"]["cap"] == cluster.RETRY_BACKOFF["cap"]
        for t in sent["template"]["spec"]["templates"]
        if "container" in t
    )


def test_the_lowest_hera_allowed_is_the_one_that_carries_the_spec() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert f"hera>={LOWEST_HERA}" in pyproject["project"]["optional-dependencies"]["submit"]
    assert tuple(map(int, version("hera").split(".")[:2])) >= (6, 0)


# k8s.io/apimachinery validation.IsValidLabelValue: at most 63 characters of this form.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_EXPRESSION = re.compile(
    r"trim\((?P<value>workflow\.parameters\.[a-z]+)\) matches '(?P<pattern>[^']+)' \? "
    r"trim\((?P=value)\) : '(?P<fallback>[^']*)'"
)


def evaluate_label(expression: str, parameters: dict[str, str]) -> str:
    """The expr-lang expression as the controller evaluates it (operator.go: updateWorkflowMetadata):
    the project's one form (trim, matches, ?:), or a bare parameter reference."""
    if expression.startswith("workflow.parameters.") and " " not in expression:
        return parameters[expression.removeprefix("workflow.parameters.")]
    form = LABEL_EXPRESSION.fullmatch(expression)
    assert form, f"not an expression this test can evaluate: {expression}"
    value = parameters[form["value"].removeprefix("workflow.parameters.")].strip()  # Go TrimSpace
    return value if re.search(form["pattern"], value) else form["fallback"]


@pytest.mark.parametrize("typed", ["3", "3 ", " 12", "3\t", "three", "", "3 4", "9" * 70, "-1"])
def test_no_setting_typed_in_the_submit_form_makes_an_invalid_label(typed: str) -> None:
    """The controller fails a run at its start when a labelsFrom value is not a valid label value
    (operator.go: updateWorkflowMetadata); the Submit form takes any text."""
    workflow, _ = compiled(3, 2)
    parameters = {p["name"]: str(p["value"]) for p in workflow["spec"]["arguments"]["parameters"]}
    for name, source in workflow["spec"]["workflowMetadata"]["labelsFrom"].items():
        parameter = source["expression"].split("workflow.parameters.")[1].split(")")[0]
        label = evaluate_label(source["expression"], parameters | {parameter: typed})
        assert len(label) <= 63 and LABEL_VALUE.fullmatch(label), (name, typed, label)
        if typed.strip().isdigit() and len(typed.strip()) < 10:
            assert label == typed.strip()


def test_the_docs_name_the_metrics_as_the_controller_exports_them() -> None:
    """Argo's controller exports a custom metric `name` as `argo_workflows_name`
    (../shared/argo/upstream/docs/metrics.md)."""
    workflow = compile_workflow(PipelineSettings())
    owners = [workflow["spec"], *workflow["spec"]["templates"]]
    metrics = {
        metric["name"]
        for owner in owners
        for metric in owner.get("metrics", {}).get("prometheus", [])
    }
    assert metrics
    section = docs.section(docs.ARGO, "The Argo UI and the controller's metrics")
    named = set(re.findall(r"`([a-z_]+)(?:\{[^`]*\})?`", section))
    for metric in metrics:
        assert f"argo_workflows_{metric}" in named, metric
        assert metric not in named, f"{metric} named without the controller's prefix"
