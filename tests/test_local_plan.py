"""workflows/local/plan.py: `depends` as the pipeline writes it, read and evaluated as Argo v4.1.4's
controller does (workflow/common/ancestry.go, workflow/controller/dag.go), a fan-out's group result, and the
DAG's phase (assessDAGPhase), on the pipeline's own DAG and on small ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.errors import UnresolvedReference, UnsupportedFeature, WorkflowError
from workflows.local.plan import (
    Node,
    dag_phase,
    expand,
    holds,
    parse,
    phase_of,
    read_dag,
    task_phase,
    verdict,
)
from workflows.local.spec import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

PHASES = ("Succeeded", "Failed", "Error", "Skipped", "Omitted")


def nodes(**phases: str | tuple[str, ...]) -> dict[str, list[Node]]:
    """Each task's nodes in the given phase (a tuple: a fan-out's children)."""
    made = {}
    for task, phase in phases.items():
        children = phase if isinstance(phase, tuple) else (phase,)
        made[task] = [
            Node(f"{task}({i})", task, "t", {}, Path("log"), phase=child)
            for i, child in enumerate(children)
        ]
    return made


def pipeline_dag(rounds: int = 1):
    workflow = compile_workflow(PipelineSettings(rounds=rounds, store="gs://bucket"))
    return read_dag(templates_by_name(workflow)["pipeline"])


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("split && init", ("and", ("term", "split", None), ("term", "init", None))),
        (
            "(train-round-1.Succeeded || train-round-1.Failed || train-round-1.Errored)",
            ("or", *(("term", "train-round-1", r) for r in ("Succeeded", "Failed", "Errored"))),
        ),
        (
            "a || b && c",
            ("or", ("term", "a", None), ("and", ("term", "b", None), ("term", "c", None))),
        ),
        (
            "(a || b) && c",
            ("and", ("or", ("term", "a", None), ("term", "b", None)), ("term", "c", None)),
        ),
        ("", None),
    ],
)
def test_depends_reads_as_argo_reads_it(text: str, tree: tuple | None) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize(
    "text",
    [
        "a &&",
        "a.Finished",
        "(a || b",
        "a b",
        "&& a",
        "!a",
        "a.AnySucceeded",
        "a && &&",
        "a || ||",
        "a)",
    ],
)
def test_what_the_pipeline_never_writes_is_refused(text: str) -> None:
    with pytest.raises(UnsupportedFeature, match="depends"):
        parse(text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a &&", "'the end'"),
        ("(a || b", "unbalanced parentheses"),
        ("a && )", "')'"),
        ("a b", "b"),
        ("a.b", "a.b"),
    ],
)
def test_a_refusal_says_what_it_cannot_read(text: str, said: str) -> None:
    with pytest.raises(UnsupportedFeature) as refused:
        parse(text)
    assert str(refused.value) == f"the local runner cannot read {said} in depends {text!r}"


@pytest.mark.parametrize("phase", PHASES)
def test_a_bare_name_means_succeeded_or_skipped(phase: str) -> None:
    """ancestry.go:expandDependency: `a` is (a.Succeeded || a.Skipped || a.Daemoned)."""
    assert holds(parse("a"), {"a": phase}) == (phase in ("Succeeded", "Skipped"))
    assert holds(None, {}) is True  # no depends: a root task


@pytest.mark.parametrize("phase", PHASES)
def test_each_result_is_true_for_its_phase_only(phase: str) -> None:
    for result, meant in (("Succeeded", "Succeeded"), ("Failed", "Failed"), ("Errored", "Error")):
        assert holds(parse(f"a.{result}"), {"a": phase}) == (phase == meant)


@pytest.mark.parametrize(
    ("children", "phase"),
    [
        (("Succeeded", "Succeeded"), "Succeeded"),
        (("Failed", "Succeeded"), "Failed"),
        (("Error", "Failed", "Succeeded"), "Failed"),
        (("Failed", "Error"), "Error"),
        (("Succeeded", "Running"), None),
        (("Skipped",), "Skipped"),  # an empty withParam
        (("Omitted",), "Omitted"),
    ],
)
def test_a_fan_outs_phase_is_its_last_failed_or_errored_child(children: tuple, phase: str) -> None:
    """dag.go:executeDAGTask: the group is Failed or Error as the last child that was."""
    assert task_phase(nodes(t=children)["t"], fan_out=True) == phase


def test_the_fan_in_runs_whatever_way_the_trainers_ended_and_not_when_they_never_ran() -> None:
    dag = pipeline_dag()
    done = nodes(split="Succeeded", init="Succeeded")
    assert verdict(dag, "train-round-1", done) is True
    assert verdict(dag, "aggregate-round-1", done) is None  # not fulfilled yet
    for children in (("Succeeded", "Error"), ("Failed", "Failed"), ("Error",)):
        assert (
            verdict(dag, "aggregate-round-1", done | nodes(**{"train-round-1": children})) is True
        )
    fan_out = nodes(**{"train-round-1": ("Succeeded", "Failed")})
    assert phase_of(dag, "train-round-1", fan_out) == "Failed"
    never = nodes(split="Failed", init="Succeeded", **{"train-round-1": "Omitted"})
    assert verdict(dag, "train-round-1", never) is False
    assert verdict(dag, "aggregate-round-1", never) is False


def test_the_pipeline_succeeds_when_aggregate_goes_ahead_without_a_shard() -> None:
    dag = pipeline_dag()
    assert dag.targets == ("publish",)
    ran = nodes(split="Succeeded", init="Succeeded", **{"train-round-1": ("Succeeded", "Error")})
    assert dag_phase(dag, ran) == "Running"
    ran |= nodes(**{"aggregate-round-1": "Succeeded"}, evaluate="Succeeded", publish="Succeeded")
    assert dag_phase(dag, ran) == "Succeeded"


def test_an_omitted_target_inherits_the_failure_above_it() -> None:
    dag = pipeline_dag()
    ran = nodes(split="Succeeded", init="Succeeded", **{"train-round-1": ("Succeeded",)})
    ran |= nodes(**{"aggregate-round-1": "Succeeded"}, evaluate="Error", publish="Omitted")
    assert dag_phase(dag, ran) == "Error"
    failed_split = nodes(split="Failed", init="Succeeded")
    failed_split |= nodes(**{"train-round-1": "Omitted", "aggregate-round-1": "Omitted"})
    failed_split |= nodes(evaluate="Omitted", publish="Omitted")
    assert dag_phase(dag, failed_split) == "Failed"


DIAMOND = {
    "name": "main",
    "dag": {
        "tasks": [
            {"name": "a", "template": "t"},
            {"name": "b", "template": "t", "depends": "a"},
            {"name": "c", "template": "t", "depends": "a.Failed"},
        ]
    },
}


def test_a_failure_the_dag_handles_does_not_fail_it_unless_a_target_inherits_it() -> None:
    dag = read_dag(DIAMOND)
    assert dag.targets == ("b", "c")
    assert dag_phase(dag, nodes(a="Failed", b="Omitted", c="Succeeded")) == "Failed"  # b under a
    assert dag_phase(dag, nodes(a="Succeeded", b="Succeeded", c="Omitted")) == "Succeeded"
    assert dag_phase(dag, nodes(a="Succeeded")) == "Running"
    assert dag_phase(dag, nodes(a="Succeeded", b="Running", c="Omitted")) == "Running"
    assert dag_phase(dag, nodes(a="Error", b="Omitted", c="Omitted")) == "Error"
    assert dag_phase(dag, nodes(a="Succeeded", b="Skipped", c="Omitted")) == "Succeeded"


@pytest.mark.parametrize(
    ("tasks", "fault"),
    [
        (
            [
                {"name": "a", "template": "t", "depends": "b"},
                {"name": "b", "template": "t", "depends": "a"},
            ],
            "cycle",
        ),
        (
            [{"name": "a", "template": "t", "depends": "missing || other"}],
            "unknown tasks: missing, other",
        ),
        ([{"name": "a", "template": "t"}, {"name": "a", "template": "t"}], "used twice"),
    ],
)
def test_a_graph_that_cannot_run_is_refused(tasks: list, fault: str) -> None:
    with pytest.raises(WorkflowError, match=fault):
        read_dag({"name": "main", "dag": {"tasks": tasks}})


TRAIN_TASK = {
    "name": "train-round-1",
    "withParam": "{{tasks.split.outputs.parameters.shard-ids}}",
    "arguments": {
        "parameters": [{"name": "shard", "value": "{{item}}"}, {"name": "round", "value": "1"}]
    },
}


def test_a_fan_out_makes_a_node_per_item_as_split_writes_them() -> None:
    values = {"tasks.split.outputs.parameters.shard-ids": "[0, 1]"}
    assert expand(TRAIN_TASK, values) == [
        ("train-round-1(0:0)", {"shard": "0", "round": "1"}),
        ("train-round-1(1:1)", {"shard": "1", "round": "1"}),
    ]
    assert expand(TRAIN_TASK, {"tasks.split.outputs.parameters.shard-ids": '["a"]'}) == [
        ("train-round-1(0:a)", {"shard": "a", "round": "1"})
    ]
    assert expand(TRAIN_TASK, {"tasks.split.outputs.parameters.shard-ids": "[]"}) == []
    single = {
        "name": "evaluate",
        "arguments": {"parameters": [{"name": "m", "value": "{{workflow.name}}/x"}]},
    }
    assert expand(single, {"workflow.name": "run-1"}) == [("evaluate", {"m": "run-1/x"})]
    assert expand({"name": "split"}, {}) == [("split", {})]
    unknown = TRAIN_TASK | {"arguments": {"parameters": [{"name": "shard", "value": "{{item.x}}"}]}}
    ids = {"tasks.split.outputs.parameters.shard-ids": "[0]"}
    for task, values in ((single, {}), (TRAIN_TASK, {}), (unknown, ids)):
        with pytest.raises(UnresolvedReference, match=rf"\(task '{task['name']}'\)"):
            expand(task, values)


@pytest.mark.parametrize("ids", ["{0: 1}", "not json", "[[0]]", '"0"'])
def test_a_fan_out_over_anything_but_a_list_of_names_is_an_error(ids: str) -> None:
    with pytest.raises(
        ValueError, match="withParam value could not be parsed as a JSON list of names"
    ):
        expand(TRAIN_TASK, {"tasks.split.outputs.parameters.shard-ids": ids})
