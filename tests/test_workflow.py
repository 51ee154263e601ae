"""The compiled Workflow and WorkflowTemplate (workflows/pipeline/workflow.py): valid against Argo's
published JSON Schema, carrying what a cluster needs, and sent to the Argo Server unchanged."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from tests.support import docs
from tests.support.argo_schema import first_error, workflow_validator
from workflows import submit
from workflows.local.spec import templates_by_name
from workflows.pipeline import resources as cluster
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow

SHAPES = [(1, 1), (3, 2), (5, 3), (8, 1)]


def compiled(workers: int, rounds: int) -> tuple[dict, dict]:
    settings = PipelineSettings(workers=workers, rounds=rounds, store="gs://mnist-models")
    return compile_workflow(settings), compile_template(settings)


@pytest.mark.parametrize(("workers", "rounds"), SHAPES)
def test_workflow_and_template_validate_against_argo_schema_with_a_trainer_task_per_round(
    workers: int, rounds: int
) -> None:
    workflow, template = compiled(workers, rounds)
    assert first_error(workflow_validator("Workflow"), workflow) is None
    assert first_error(workflow_validator("WorkflowTemplate"), template) is None
    assert template["metadata"]["name"] == cluster.TEMPLATE_NAME
    assert template["spec"] == workflow["spec"]
    tasks = templates_by_name(workflow)["pipeline"]["dag"]["tasks"]
    trainers = [t["name"] for t in tasks if t["template"] == "train"]
    assert trainers == [f"train-round-{r}" for r in range(1, rounds + 1)]


def test_schema_validation_catches_a_misspelt_field() -> None:
    broken = copy.deepcopy(compiled(3, 2)[0])
    broken["spec"]["retryStratgy"] = {"limit": "2"}
    error = first_error(workflow_validator("Workflow"), broken)
    assert error is not None and "retryStratgy" in error


def test_spec_carries_what_a_cluster_needs() -> None:
    """Runs from the template labelled too; every step sized and bounded in time; key-only unarchived
    artifacts under the run's name; aggregate reading every trainer's model through one key prefix."""
    workflow, _ = compiled(3, 2)
    spec = workflow["spec"]
    assert spec["workflowMetadata"]["labels"] == workflow["metadata"]["labels"]
    assert int(spec["activeDeadlineSeconds"]) > 0
    templates = templates_by_name(workflow)
    for name in ("split", "init", "train", "aggregate", "evaluate", "publish"):
        resources = templates[name]["container"]["resources"]
        assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}
        assert int(templates[name]["activeDeadlineSeconds"]) > 0
        for artifact in templates[name].get("outputs", {}).get("artifacts", []):
            assert set(artifact["gcs"]) == {"key"}, "no bucket in the spec"
            assert artifact["archive"] == {"none": {}}, "unarchived: the Argo UI shows it"
            assert artifact["gcs"]["key"].startswith("{{workflow.name}}/")
    aggregate_input = templates["aggregate"]["inputs"]["artifacts"][0]["gcs"]["key"]
    train_output = templates["train"]["outputs"]["artifacts"][0]["gcs"]["key"]
    assert train_output.startswith(aggregate_input + "/")


def test_each_round_adds_to_the_history_the_next_starts_from_and_publish_carries_the_last() -> None:
    """The history files chain through the rounds; the UI shows them by their keys' extensions."""
    workflow, _ = compiled(3, 3)
    templates = templates_by_name(workflow)

    def key(template: str, side: str, name: str, round_number: str = "") -> str:
        [found] = [a for a in templates[template][side]["artifacts"] if a["name"] == name]
        key = found["gcs"]["key"]
        return key.replace("{{inputs.parameters.round}}", round_number) if round_number else key

    assert key("aggregate", "outputs", "history").endswith("/history.json")
    assert key("aggregate", "outputs", "history-plot").endswith("/history.png")
    assert key("aggregate", "inputs", "validation") == key("split", "outputs", "validation")
    assert key("aggregate", "inputs", "history") == "{{inputs.parameters.start-history}}"
    starts = [
        next(p["value"] for p in t["arguments"]["parameters"] if p["name"] == "start-history")
        for t in templates["pipeline"]["dag"]["tasks"]
        if t["template"] == "aggregate"
    ]
    assert starts == [
        key("init", "outputs", "history"),
        key("aggregate", "outputs", "history", "1"),
        key("aggregate", "outputs", "history", "2"),
    ]
    for name in ("history", "history-plot"):
        assert key("publish", "inputs", name) == key("aggregate", "outputs", name, "3")
    args = templates["publish"]["container"]["args"]
    attached = [args[i + 1] for i, a in enumerate(args) if a == "--attach"]
    assert attached == ["in/confusion.png", "in/history.json", "in/history.png"]


@pytest.mark.usefixtures("clean_environment")
def test_render_prints_a_manifest_kubectl_can_create(capsys: pytest.CaptureFixture[str]) -> None:
    """The template's render: tests/test_manifests.py."""
    assert submit.main(["--render", "--workers", "4"]) == 0
    out, err = capsys.readouterr()
    [rendered] = list(yaml.safe_load_all(out))
    assert first_error(workflow_validator("Workflow"), rendered) is None
    assert "--artifacts gs://BUCKET" in err, "a local store is pointed out"
    assert rendered["metadata"]["generateName"] == "mnist-" and "name" not in rendered["metadata"]
    parameters = {p["name"]: p["value"] for p in rendered["spec"]["arguments"]["parameters"]}
    assert parameters["workers"] == "4"


def test_evaluate_report_reads_at_a_glance() -> None:
    from steps.evaluate import summary

    per_class = {str(digit): 0.99 for digit in range(10)} | {"8": 0.93}
    metrics = {"accuracy": 0.9771, "loss": 0.0712, "test_samples": 10000}
    report = summary(metrics | {"per_class_accuracy": per_class}).splitlines()
    assert report[0] == "test accuracy 0.9771, loss 0.0712 on 10000 digits"
    assert report[1] == "weakest digit: 8 (0.9300)"
    assert report[-1] == "    9  0.9900" and len(report) == 4 + 10


# k8s.io/apimachinery validation.IsValidLabelValue: at most 63 characters of this form.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_EXPRESSION = re.compile(
    r"trim\((?P<value>workflow\.parameters\.[a-z]+)\) matches '(?P<pattern>[^']+)' \? "
    r"trim\((?P=value)\) : '(?P<fallback>[^']*)'"
)


def evaluate_label(expression: str, parameters: dict[str, str]) -> str:
    """The expr-lang expression as the controller evaluates it (operator.go: updateWorkflowMetadata),
    in the project's one form (trim, matches, ?:)."""
    form = LABEL_EXPRESSION.fullmatch(expression)
    assert form, f"not an expression this test can evaluate: {expression}"
    value = parameters[form["value"].removeprefix("workflow.parameters.")].strip()  # Go TrimSpace
    return value if re.search(form["pattern"], value) else form["fallback"]


@pytest.mark.parametrize("typed", ["3", "3 ", " 12", "3\t", "three", "", "3 4", "9" * 70, "-1"])
def test_no_setting_typed_in_the_submit_form_makes_an_invalid_label(typed: str) -> None:
    """The controller fails a run whose labelsFrom value is no label value; the form takes any text."""
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
