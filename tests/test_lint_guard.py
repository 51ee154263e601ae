"""The guard that keeps costly expression tags from a real Argo Server (tests/support/lint_guard.py), which
the comparison of the lint with the real servers (tests/cluster/test_lint_agrees.py) applies to every
manifest before it sends one: it runs without a cluster."""

from __future__ import annotations

import json

import pytest

from tests.support.lint_guard import MAX_BYTES, expression_tags, withheld
from tests.support.manifests import only
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow


def with_argument(value: str) -> dict:
    """The compiled Workflow with its `source` argument set to VALUE."""
    workflow = compile_workflow(PipelineSettings())
    for parameter in workflow["spec"]["arguments"]["parameters"]:
        if parameter["name"] == "source":
            parameter["value"] = value
    return workflow


def in_a_container(tag: str) -> dict:
    """A Workflow whose entrypoint's container has TAG as its argument."""
    workflow = only("container: {image: alpine}")
    workflow["spec"]["templates"][0]["container"]["args"] = [tag]
    return workflow


def test_the_expression_that_grew_the_server_to_22_gb_is_not_sent() -> None:
    """`sprig.repeat(2000000000, "x")` in one workflow argument: 2 GB of string per evaluation."""
    reason = withheld(with_argument('/data/{{=sprig.repeat(2000000000, "x")}}/m.npz'))
    assert reason == (
        "an expression tag may be costly to evaluate: it calls sprig.repeat() "
        '({{=sprig.repeat(2000000000, "x")}})'
    )


@pytest.mark.parametrize(
    ("tag", "why"),
    [
        ('{{=sprig.repeat(3, "x")}}', "it calls sprig.repeat()"),
        ("{{=sprig.trim(' a ')}}", "it calls sprig.trim()"),  # no sprig function at all
        ('{{= sprig . repeat (3, "x")}}', "it calls sprig.repeat()"),
        ('{{=repeat("x", 3)}}', "it calls repeat()"),  # an expr-lang builtin not on the list
        ("{{=len(1..2000000000)}}", "it makes a range (..)"),
        ("{{=2000000000 + 1}}", "it holds the number 2000000000"),
        ("{{=2e9}}", "it holds the number 2e9"),
        ("{{=0x7fffffff}}", "it holds the number 0x7fffffff"),
        ("{{=1_000_000}}", "it holds the number 1_000_000"),
        ('{{=sprig.repeat(9, "x")', "it calls sprig.repeat()"),  # unclosed: to the end of the text
    ],
)
def test_a_costly_expression_tag_anywhere_is_not_sent(tag: str, why: str) -> None:
    """Anywhere: validate.go's ProcessArgs evaluates the tags of every template, not only arguments."""
    expected = f"an expression tag may be costly to evaluate: {why} ("
    for document in (in_a_container(tag), with_argument(tag)):
        assert (withheld(document) or "").startswith(expected)


@pytest.mark.parametrize(
    "tag",
    [
        "{{=asInt(inputs.parameters.n) * 10}}",
        "{{=jsonpath(workflow.parameters.config, '$..name')}}",  # `..` inside a string literal
        "{{='2000000000'}}",  # a number inside a string literal
        '{{=inputs.parameters["a-b"] == "true"}}',
        "{{=toJson(filter([1, 3], {# > 1}))}}",
        "{{inputs.parameters.x}} {{workflow.name}}",  # simple tags are never evaluated
        "{{=item}} and 999",
    ],
)
def test_a_cheap_expression_tag_is_sent(tag: str) -> None:
    assert withheld(in_a_container(tag)) is None


def test_a_manifest_larger_than_a_mebibyte_is_not_sent() -> None:
    document = only("container: {image: alpine}")
    document["metadata"]["annotations"] = {"big": "x" * MAX_BYTES}
    assert withheld(document) == "its JSON is larger than 1024 KiB"


def test_tags_are_found_as_fasttemplate_finds_them() -> None:
    """The first `}}` closes a tag, whatever string it sits in; an unclosed one runs to the end."""
    text = json.dumps({"a": "{{=x", "b": "y}} {{= z }}", "c": "{{=w"})
    assert list(expression_tags(text)) == ['x", "b": "y', " z ", 'w"}']
