"""What the comparison of the lint with the real servers (tests/cluster/test_lint_agrees.py) decides
without a cluster: the fields a refusal names, how two verdicts compare, which templates a case needs
made, and the cases recorded from the lint's tests (tests/support/: lint_agreement.py, lint_cases.py,
lint_judges.py, lint_on_cluster.py, lint_recorder.py). The guard has tests/test_lint_guard.py."""

from __future__ import annotations

import pytest

from tests.support.lint_agreement import compared
from tests.support.lint_cases import Case, recorded, recorded_cases, referenced
from tests.support.lint_guard import withheld
from tests.support.lint_judges import Verdict, api_fields, named_fields
from tests.support.lint_on_cluster import renamed_cluster_templates
from tests.support.manifests import LIB, dag, manifest, only, template

# --- the fields a refusal names, and how two verdicts compare ------------------------------------


def test_the_fields_a_refusal_names() -> None:
    assert named_fields(
        "templates.main.tasks.a templates.echo inputs.parameters.msg was not supplied"
    ) == ("templates.main.tasks.a",)
    assert named_fields("spec.templates[0].name: 'Main_1' is invalid: name must ...") == (
        "spec.templates[0].name",
    )
    assert named_fields("template name 'nope' undefined") == ("nope",)
    assert named_fields('workflowtemplates.argoproj.io "lib" not found') == (
        "workflowtemplates.argoproj.io",
    )
    assert api_fields("spec.dag.tasks: Too many: 202: must have at most 200 items") == (
        "spec.dag.tasks",
    )
    assert api_fields('metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 ...') == (
        "metadata.name",
    )


def test_how_two_verdicts_compare() -> None:
    by_path = lambda verdict: verdict.fields  # noqa: E731
    refused = Verdict.refused("templates.main.tasks.a template name 'x' undefined")
    assert compared(Verdict(True), Verdict(True), by_path) == "both accept"
    assert compared(Verdict(True), refused, by_path) == "verdicts differ"
    assert compared(refused, Verdict(True), by_path) == "verdicts differ"
    assert compared(refused, refused, by_path) == "same message"
    reworded = Verdict.refused("templates.main.tasks.a: template 'x' is not defined")
    assert compared(refused, reworded, by_path) == "same field"
    elsewhere = Verdict.refused("templates.main.tasks.b template name 'x' undefined")
    assert compared(refused, elsewhere, by_path) == "fields differ"


def test_an_api_server_refusal_agrees_when_it_names_the_lints_first_field() -> None:
    """The API server lists every cause; the lint's first fault must be among them, or its field."""
    server = Verdict.refused(
        "spec.templates[0].name: Invalid value: ...",
        'metadata.name: Invalid value: "A": ...',
        fields=("spec.templates[0].name", "metadata.name"),
    )
    fields = lambda verdict: api_fields(verdict.messages[0])  # noqa: E731
    lint = Verdict.refused('metadata.name: Invalid value: "A": ...')
    assert compared(lint, server, fields) == "same message"
    assert (
        compared(Verdict.refused("metadata.name: Required value"), server, fields) == "same field"
    )
    assert compared(Verdict.refused("spec.entrypoint: Required"), server, fields) == "fields differ"


# --- the templates a case needs --------------------------------------------------------------------


def test_a_case_needs_the_templates_it_references_through_one_another() -> None:
    inner = template("templates: [{name: t, container: {image: a}}]", metadata="{name: inner}")
    outer = template(
        "templates: [{name: o, dag: {tasks: [{name: a, templateRef: {name: inner, template: t}}]}}]",
        metadata="{name: outer}",
    )
    unused = template("templates: [{name: u, container: {image: a}}]", metadata="{name: unused}")
    workflow = dag("- {name: a, templateRef: {name: outer, template: o}}")
    assert referenced(workflow, [unused, outer, inner, workflow]) == (inner, outer)
    assert referenced(outer, [outer, inner]) == (inner,)  # not the document itself


def test_cluster_templates_are_made_under_names_of_their_own() -> None:
    """ClusterWorkflowTemplates are cluster-wide: each is made with the run's suffix, and the case's
    references with it."""
    cluster_lib = manifest(
        "templates: [{name: echo, container: {image: a}}]",
        kind="ClusterWorkflowTemplate",
        metadata="{name: lib}",
    )
    workflow = dag(
        "- {name: a, templateRef: {name: lib, template: echo, clusterScope: true}}\n"
        "- {name: b, templateRef: {name: lib, template: echo}, arguments: {parameters: [{name: msg, value: x}]}}"
    )
    case = renamed_cluster_templates(Case("c", "lint tests", workflow, (cluster_lib, LIB)), "r1")
    tasks = case.document["spec"]["templates"][0]["dag"]["tasks"]
    assert [task["templateRef"]["name"] for task in tasks] == ["lib-r1", "lib"]
    assert [t["metadata"]["name"] for t in case.library] == ["lib-r1", "lib"]
    assert workflow["spec"]["templates"][0]["dag"]["tasks"][0]["templateRef"]["name"] == "lib"


def test_a_test_giving_several_manifests_makes_a_case_of_each_once() -> None:
    first, second = only("container: {image: a}"), only("container: {image: b}")
    records = [
        {"test": "t.py::x", "document": first, "library": []},
        {"test": "t.py::x", "document": first, "library": [LIB]},  # LIB is not referenced
        {"test": "t.py::x", "document": second, "library": []},
        {"test": "t.py::y", "document": {"spec": {}}, "library": []},
    ]
    cases = recorded_cases(records)
    assert [case.name for case in cases] == ["t.py::x", "t.py::x#2", "t.py::y"]


@pytest.mark.slow
def test_the_lint_tests_manifests_are_recorded_and_the_costly_one_withheld() -> None:
    """The recording (tests/support/lint_recorder.py) of the lint's own tests: every rule's case is
    there, and of all of them the guard withholds the one costly expression alone."""
    cases = recorded_cases(recorded())
    names = {case.name for case in cases}
    assert "tests/test_lint.py::test_rule[validateDAG:no-tasks]" in names
    assert any(name.startswith("tests/test_lint_dag_rules.py::") for name in names)
    costly = [case.name for case in cases if withheld(case.document)]
    assert costly == [
        "tests/test_lint.py::test_an_expression_tag_in_a_workflow_argument_is_flagged_as_not_checked"
    ]
