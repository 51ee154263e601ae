"""The lint's DAG rules (workflows/lint/dag.py) held case by case against Argo v4.1.2's
workflow/validate/validate.go (validateDAG, addItemsToScope, resolveAllVariables,
validateDAGTaskArgumentDependency) and workflow/common/ancestry.go (GetTaskDependencies, expandDependency),
each with a manifest only the rule itself gets right, written with tests/support/manifests.py."""

from __future__ import annotations

import pytest

from tests.support.manifests import dag, manifest, template
from workflows.lint.dag import DagGraph, add_items_to_scope
from workflows.lint.entry_point import check
from workflows.lint.fields import Invalid

ECHO_B = "- {name: b, template: echo, %s arguments: {parameters: [{name: msg, value: '%s'}]}}"


def errors(document: dict) -> list[str]:
    return check(document).errors


def test_dependencies_expand_as_ancestry_go_expands_them() -> None:
    """expandDependency: Succeeded, Skipped, Daemoned, then Errored for continueOn.error and Failed for
    continueOn.failed; the dependencies joined by &&."""
    graph = DagGraph(
        [
            {"name": "a", "continueOn": {"error": True, "failed": True}},
            {"name": "b", "continueOn": {"failed": True}},
            {"name": "c", "continueOn": {"error": True}},
            {"name": "d"},
            {"name": "e", "dependencies": ["a", "b", "c", "d"]},
        ]
    )
    assert graph.depends_logic(graph.task("e")) == (
        "(a.Succeeded || a.Skipped || a.Daemoned || a.Errored || a.Failed)"
        " && (b.Succeeded || b.Skipped || b.Daemoned || b.Failed)"
        " && (c.Succeeded || c.Skipped || c.Daemoned || c.Errored)"
        " && (d.Succeeded || d.Skipped || d.Daemoned)"
    )
    assert graph.dependencies_of(graph.task("e")) == dict.fromkeys("abcd", False)
    # GetTaskDependencies: a task named by .AnySucceeded or .AllFailed depends on its items
    named = {"depends": "a && b.AnySucceeded && (c.Failed || c.AllFailed) && !d.Succeeded"}
    assert graph.dependencies_of(named) == {"a": False, "b": True, "c": True, "d": False}


def test_a_dag_may_wait_on_several_dependencies() -> None:
    ok = dag(
        "- {name: a, template: whale}\n- {name: b, template: whale}\n"
        + ECHO_B.replace("name: b", "name: c")
        % ("dependencies: [a, b],", "{{tasks.b.outputs.parameters.out}}")
    )
    assert errors(ok) == []


def test_a_task_name_beginning_with_a_digit_is_refused_with_dependencies_too() -> None:
    tasks = "- {name: a, template: whale}\n" + ECHO_B.replace("name: b", "name: 1b") % (
        "dependencies: [a],",
        "x",
    )
    assert errors(dag(tasks)) == [
        "templates.main.tasks.1b name cannot begin with a digit when using either 'depends' or "
        "'dependencies'"
    ]


@pytest.mark.parametrize(
    "loops",
    ["withItems: [1], withParam: '[1]'", "withParam: '[1]', withSequence: {count: '2'}"],
)
def test_one_loop_kind_at_most(loops: str) -> None:
    tasks = ECHO_B.replace("name: b", "name: a") % (f"{loops},", "{{item}}")
    assert errors(dag(tasks)) == [
        "templates.main.tasks.a only one of withItems, withParam, withSequence can be specified"
    ]


def test_the_item_references_a_loop_defines() -> None:
    """addItemsToScope: item.[i] for a list item, item.KEY for a map item, item.* for withParam."""
    scope: set[str] = set()
    add_items_to_scope({"withItems": [[1, 2], {"k": 1, "j": 2}]}, scope)
    assert scope == {"item.[0]", "item.[1]", "item.k", "item.j"}
    scope = set()
    add_items_to_scope({"withParam": "{{tasks.a.outputs.result}}"}, scope)
    assert "item.*" in scope
    with pytest.raises(Invalid, match="only one of count or end can be defined in withSequence"):
        add_items_to_scope({"withSequence": {"count": "2", "end": "3"}}, set())


def test_targets_are_split_on_single_spaces_as_go_splits_them() -> None:
    """strings.Split(target, " "): two spaces leave an empty target name, which is not a task."""
    tasks = "- {name: a, template: whale}\n- {name: b, template: whale}"
    assert errors(dag(tasks, "target: a b")) == []
    assert errors(dag(tasks, "target: a  b")) == [
        "templates.main.targets: target '' is not defined"
    ]


def test_an_output_of_a_task_that_is_not_an_ancestor_is_a_missing_dependency() -> None:
    """Every earlier task's outputs are in scope, so the reference resolves; then
    validateDAGTaskArgumentDependency finds it is not upstream."""
    tasks = "- {name: a, template: whale}\n" + ECHO_B % ("", "{{tasks.a.outputs.parameters.out}}")
    assert errors(dag(tasks)) == [
        "templates.main.tasks.b missing dependency 'a' for parameter 'msg'"
    ]


def test_a_looping_ancestors_outputs_are_aggregated() -> None:
    """addOutputsToScope(aggregate): tasks.a.outputs.parameters exists when a loops."""
    reference = "{{tasks.a.outputs.parameters}}"
    looping = "- {name: a, template: whale, withItems: [1, 2]}\n" + ECHO_B % (
        "depends: a,",
        reference,
    )
    assert errors(dag(looping)) == []
    single = "- {name: a, template: whale}\n" + ECHO_B % ("depends: a,", reference)
    assert errors(dag(single)) == [
        "templates.main.tasks.b failed to resolve {{tasks.a.outputs.parameters}}"
    ]


def test_a_task_argument_needs_a_value() -> None:
    tasks = "- {name: a, template: whale}\n- {name: b, template: echo, depends: a, arguments: {parameters: [{name: msg}]}}"
    assert errors(dag(tasks)) == [
        "templates.main.tasks.b.arguments.msg.value or templates.main.tasks.b.arguments.msg.valueFrom "
        "is required"
    ]


TEMPLATE_SPEC = """
templates:
- name: main
  dag:
    target: '{target}'
    tasks:
    - {{name: a, template: echo, arguments: {{parameters: [{{name: msg, value: '{message}'}}]}}}}
- name: echo
  inputs: {{parameters: [{{name: msg}}]}}
  container: {{image: alpine, args: ['{{{{inputs.parameters.msg}}}}', '{argument}']}}
"""


@pytest.mark.parametrize("where", ["target", "message", "argument"])
def test_a_workflow_template_may_use_workflow_parameters_it_does_not_declare(where: str) -> None:
    """resolveAllVariables(workflowTemplateValidation): a WorkflowTemplate checked alone may use
    workflow.parameters.* in a DAG's target, a task's arguments and the templates it calls, which the
    Workflow that uses it supplies; a Workflow may not."""
    fields = {"target": "a", "message": "x", "argument": "y"}
    fields[where] = "{{workflow.parameters.p}}"
    assert errors(template(TEMPLATE_SPEC.format(**fields))) == []
    workflow = manifest("entrypoint: main\n" + TEMPLATE_SPEC.format(**fields).strip())
    assert len(errors(workflow)) == 1
    assert "failed to resolve {{workflow.parameters.p}}" in errors(workflow)[0]
