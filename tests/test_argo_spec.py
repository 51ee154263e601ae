"""The compiled Workflow and WorkflowTemplate: valid for Argo, every reference resolving, ready for a cluster.

No cluster runs here; Argo's own JSON Schema and a reference lint are the honest substitutes.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.argo_schema import first_error, workflow_validator
from workflows import cluster, depends
from workflows.pipeline import compile_template, compile_workflow
from workflows.settings import PipelineSettings
from workflows.spec import check_supported, templates_by_name

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(1, 1), (3, 2), (5, 3), (8, 1)]
EXPRESSION = re.compile(r"{{\s*([^{}]+?)\s*}}")
# Variables Argo itself defines; anything else must be declared by the spec.
ARGO_GLOBALS = {"workflow.name", "workflow.status", "workflow.duration"}


def compiled(workers: int, rounds: int) -> tuple[dict, dict]:
    settings = PipelineSettings(workers=workers, rounds=rounds)
    store = "gs://mnist-models"
    return compile_workflow(settings, store=store), compile_template(settings, store=store)


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


def lint(workflow: dict) -> list[str]:
    """Every problem found: unresolved {{...}}, missing templates or tasks, arguments that do not fit."""
    problems: list[str] = []
    spec = workflow["spec"]
    templates = templates_by_name(workflow)
    workflow_parameters = {p["name"] for p in spec["arguments"]["parameters"]}
    globals_ = ARGO_GLOBALS | {f"workflow.parameters.{name}" for name in workflow_parameters}

    def check(value: Any, known: set[str], where: str) -> None:
        for reference in EXPRESSION.findall(json.dumps(value)):
            if reference not in known:
                problems.append(f"{{{{{reference}}}}} does not resolve ({where})")

    check(spec.get("metrics", {}), globals_, "workflow metrics")
    for template in spec["templates"]:
        where = f"template {template['name']}"
        inputs = template.get("inputs", {})
        outputs = template.get("outputs", {})
        local = globals_ | {
            f"inputs.{kind}.{item['name']}" for kind in inputs for item in inputs[kind]
        }
        check({k: v for k, v in template.items() if k not in ("dag", "metrics")}, local, where)
        produced = {f"outputs.parameters.{p['name']}" for p in outputs.get("parameters", [])}
        check(template.get("metrics", {}), local | produced | {"status"}, f"{where} metrics")
        if "dag" in template:
            problems += _lint_dag(template, templates, globals_)
    if spec["entrypoint"] not in templates:
        problems.append(f"entrypoint {spec['entrypoint']} is not a template")
    return problems


def _lint_dag(dag_template: dict, templates: dict, globals_: set[str]) -> list[str]:
    problems: list[str] = []
    tasks = {task["name"]: task for task in dag_template["dag"]["tasks"]}
    needs = {
        name: sorted(depends.tasks_named(depends.parse(depends.expression_text(task))))
        for name, task in tasks.items()
    }
    for name, task in tasks.items():
        where = f"task {name}"
        if task["template"] not in templates:
            problems.append(f"{where}: template {task['template']} does not exist")
            continue
        problems += [
            f"{where}: depends on {n}, no such task" for n in needs[name] if n not in tasks
        ]
        upstream = _upstream(name, needs)
        known = set(globals_) | {"item"} if "withParam" in task else set(globals_)
        for other in upstream & set(tasks):
            other_template = templates.get(tasks[other]["template"], {})
            for parameter in other_template.get("outputs", {}).get("parameters", []):
                known.add(f"tasks.{other}.outputs.parameters.{parameter['name']}")
        check_task = {k: v for k, v in task.items() if k in ("arguments", "withParam")}
        for reference in EXPRESSION.findall(json.dumps(check_task)):
            if reference not in known:
                problems.append(f"{{{{{reference}}}}} does not resolve ({where})")
        declared = {
            p["name"]
            for p in templates[task["template"]].get("inputs", {}).get("parameters", [])
            if "value" not in p and "default" not in p
        }
        given = {p["name"] for p in task.get("arguments", {}).get("parameters", [])}
        if declared != given:
            problems.append(f"{where}: passes {sorted(given)}, template wants {sorted(declared)}")
    problems += _cycles(needs)
    return problems


def _upstream(task: str, needs: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(needs.get(task, []))
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(needs.get(name, []))
    return seen


def _cycles(needs: dict[str, list[str]]) -> list[str]:
    return [
        f"the DAG has a cycle through {task}" for task in needs if task in _upstream(task, needs)
    ]


@pytest.mark.parametrize(("workers", "rounds"), SHAPES)
def test_every_reference_resolves_and_the_dag_is_acyclic(workers: int, rounds: int) -> None:
    workflow, _ = compiled(workers, rounds)
    assert lint(workflow) == []
    tasks = templates_by_name(workflow)["pipeline"]["dag"]["tasks"]
    assert [t["name"] for t in tasks if t["template"] == "train"] == [
        f"train-round-{r}" for r in range(1, rounds + 1)
    ]


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [
        (
            lambda tasks, _: tasks[2]["arguments"]["parameters"][0].update(value="{{item.id}}"),
            "{{item.id}} does not resolve",
        ),
        (
            lambda tasks, _: tasks[2].update(withParam="{{tasks.split.outputs.parameters.ids}}"),
            "{{tasks.split.outputs.parameters.ids}} does not resolve",
        ),
        (lambda tasks, _: tasks[3].update(template="average"), "template average does not exist"),
        (lambda tasks, _: tasks[0].update(depends="publish"), "cycle"),
        (
            lambda _, templates: templates[0]["container"]["args"].append(
                "{{workflow.parameters.epoch}}"
            ),
            "{{workflow.parameters.epoch}} does not resolve",
        ),
        (
            lambda _, templates: templates[2]["container"]["args"].append(
                "{{inputs.parameters.shards}}"
            ),
            "{{inputs.parameters.shards}} does not resolve",
        ),
        (
            lambda tasks, _: tasks[3]["arguments"]["parameters"].clear(),
            "template wants ['round', 'shards']",
        ),
    ],
    ids=[
        "item-field",
        "task-output",
        "template",
        "cycle",
        "workflow-parameter",
        "input",
        "argument",
    ],
)
def test_lint_catches_what_would_not_resolve(break_it: Any, problem: str) -> None:
    workflow, _ = compiled(3, 2)
    broken = copy.deepcopy(workflow)
    templates = broken["spec"]["templates"]
    tasks = templates_by_name(broken)["pipeline"]["dag"]["tasks"]
    assert [t["name"] for t in tasks[:4]] == ["split", "init", "train-round-1", "aggregate-round-1"]
    break_it(tasks, templates)
    assert any(problem in line for line in lint(broken)), lint(broken)


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
        "expression": "workflow.parameters.workers"
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


def test_retry_limit_follows_the_setting() -> None:
    workflow = compile_workflow(PipelineSettings(retries=5), store="gs://b")
    assert templates_by_name(workflow)["train"]["retryStrategy"]["limit"] == "5"
    none = compile_workflow(PipelineSettings(retries=0), store="gs://b")
    assert "retryStrategy" not in templates_by_name(none)["train"]


def test_local_runner_accepts_the_cluster_spec() -> None:
    workflow, template = compiled(3, 2)
    check_supported(workflow)
    check_supported(template)


def test_render_prints_a_workflow_kubectl_can_create(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "workflows" / "submit.py"), "--render", "--workers", "4"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS": "gs://mnist-models"},
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
    result = subprocess.run(
        [sys.executable, str(ROOT / "workflows" / "submit.py"), "--render", "--register"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert rendered["kind"] == "WorkflowTemplate"
    assert rendered["metadata"]["name"] == cluster.TEMPLATE_NAME
    assert first_error(workflow_validator("WorkflowTemplate"), rendered) is None
    assert "--artifacts gs://BUCKET" in result.stderr, "a local store is pointed out"
