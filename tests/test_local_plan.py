"""workflows/local/plan.py: `depends` read and evaluated as Argo v4.1.4's controller does
(workflow/common/ancestry.go, workflow/controller/dag.go), fan-outs, and the DAG's phase (assessDAGPhase)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.errors import UnresolvedReference, UnsupportedFeature, WorkflowError
from workflows.local.plan import Dag, Node, dag_phase, expand, parse, read_dag, task_phase, verdict
from workflows.local.spec import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow


def nodes(**phases: str | tuple[str, ...]) -> dict[str, list[Node]]:
    """Each task's nodes in the given phase (a tuple: a fan-out's children)."""
    made = {task: phase if isinstance(phase, tuple) else (phase,) for task, phase in phases.items()}
    return {
        t: [Node(f"{t}({i})", t, "t", {}, Path("log"), phase=p) for i, p in enumerate(c)]
        for t, c in made.items()
    }


def dag(depends: str) -> Dag:
    """Task `x` depending on `depends`, over the tasks a, b and c."""
    tasks = [{"name": n, "template": "t"} for n in "abc"] + [
        {"name": "x", "template": "t", "depends": depends}
    ]
    return read_dag({"name": "main", "dag": {"tasks": tasks}})


@pytest.mark.parametrize(
    ("depends", "phases", "holds"),
    [
        ("a", "Succeeded", True),  # a bare name: (a.Succeeded || a.Skipped || a.Daemoned)
        ("a", "Skipped", True),
        ("a", "Failed", False),
        ("a", "Omitted", False),
        ("a.Errored", "Error", True),
        ("a.Failed", "Error", False),
        ("a.Failed || a.Errored", "Failed", True),
        ("(a || b) && c.Failed", ("Succeeded", "Failed", "Succeeded"), False),
        ("(a || b) && c.Failed", ("Failed", "Succeeded", "Failed"), True),
    ],
)
def test_depends_holds_as_argo_evaluates_it(depends: str, phases: str | tuple, holds: bool) -> None:
    phases = phases if isinstance(phases, tuple) else (phases,) * 3
    assert verdict(dag(depends), "x", nodes(**dict(zip("abc", phases, strict=True)))) is holds


@pytest.mark.parametrize(
    "text",
    ["a &&", "a.Finished", "(a || b", "a b", "&& a", "!a", "a)", "()", "a || b && c", "((a))"],
)
def test_what_the_pipeline_never_writes_is_refused(text: str) -> None:
    with pytest.raises(UnsupportedFeature) as refused:
        parse(text)
    assert str(refused.value) == f"the local runner cannot read depends {text!r}"


@pytest.mark.parametrize(
    ("children", "phase"),
    [
        (("Succeeded", "Succeeded"), "Succeeded"),
        (("Error", "Failed", "Succeeded"), "Failed"),
        (("Failed", "Error"), "Error"),
        (("Succeeded", "Running"), None),
        (("Skipped",), "Skipped"),  # an empty withParam
    ],
)
def test_a_fan_outs_phase_is_its_last_failed_or_errored_child(children: tuple, phase: str) -> None:
    """dag.go:executeDAGTask: the group is Failed or Error as the last child that was."""
    fan_out = read_dag({"name": "main", "dag": {"tasks": [{"name": "t", "withParam": "[]"}]}})
    assert task_phase(fan_out, "t", nodes(t=children)) == phase


def test_the_pipelines_fan_in_runs_however_the_trainers_ended_and_not_when_they_never_ran() -> None:
    workflow = compile_workflow(PipelineSettings(rounds=1, store="gs://bucket"))
    pipeline = read_dag(templates_by_name(workflow)["pipeline"])
    assert pipeline.targets == ("publish",)
    done = nodes(split="Succeeded", init="Succeeded")
    assert verdict(pipeline, "train-round-1", done) is True
    assert verdict(pipeline, "aggregate-round-1", done) is None  # not fulfilled yet
    for children in (("Succeeded", "Error"), ("Failed", "Failed"), ("Error",)):
        trained = done | nodes(**{"train-round-1": children})
        assert verdict(pipeline, "aggregate-round-1", trained) is True
        assert dag_phase(pipeline, trained) == "Running"
    never = nodes(split="Failed", init="Succeeded", **{"train-round-1": "Omitted"})
    assert verdict(pipeline, "aggregate-round-1", never) is False
    ran = done | nodes(
        **{"train-round-1": ("Succeeded", "Error"), "aggregate-round-1": "Succeeded"}
    )
    assert (
        dag_phase(pipeline, ran | nodes(evaluate="Succeeded", publish="Succeeded")) == "Succeeded"
    )
    assert dag_phase(pipeline, ran | nodes(evaluate="Error", publish="Omitted")) == "Error"


def test_a_failure_the_dag_handles_does_not_fail_it_unless_a_target_inherits_it() -> None:
    diamond = [{"name": "a", "template": "t"}, {"name": "b", "template": "t", "depends": "a"}]
    diamond.append({"name": "c", "template": "t", "depends": "a.Failed"})
    graph = read_dag({"name": "main", "dag": {"tasks": diamond}})
    assert graph.targets == ("b", "c")
    assert dag_phase(graph, nodes(a="Failed", b="Omitted", c="Succeeded")) == "Failed"  # b under a
    assert dag_phase(graph, nodes(a="Succeeded", b="Succeeded", c="Omitted")) == "Succeeded"
    assert dag_phase(graph, nodes(a="Succeeded", b="Running", c="Omitted")) == "Running"


@pytest.mark.parametrize(
    ("tasks", "fault"),
    [
        ([{"name": "a", "depends": "b"}, {"name": "b", "depends": "a"}], "cycle"),
        ([{"name": "a", "depends": "missing || other"}], "unknown tasks: missing, other"),
        ([{"name": "a"}, {"name": "a"}], "used twice"),
    ],
)
def test_a_graph_that_cannot_run_is_refused(tasks: list, fault: str) -> None:
    with pytest.raises(WorkflowError, match=fault):
        read_dag({"name": "main", "dag": {"tasks": tasks}})


SHARD = {"name": "shard", "value": "{{item}}"}
TRAIN = {"name": "train", "withParam": "{{tasks.split.outputs.parameters.shard-ids}}"}
TRAIN |= {"arguments": {"parameters": [SHARD, {"name": "r", "value": "1"}]}}


def test_a_fan_out_makes_a_node_per_item_as_split_writes_them() -> None:
    made = expand(TRAIN, {"tasks.split.outputs.parameters.shard-ids": "[0, 1]"})
    assert made == [
        ("train(0:0)", {"shard": "0", "r": "1"}),
        ("train(1:1)", {"shard": "1", "r": "1"}),
    ]
    assert (
        expand(TRAIN, {"tasks.split.outputs.parameters.shard-ids": '["a"]'})[0][0] == "train(0:a)"
    )
    assert expand(TRAIN, {"tasks.split.outputs.parameters.shard-ids": "[]"}) == []


@pytest.mark.parametrize("ids", ["{0: 1}", "not json", "[[0]]", '"0"'])
def test_a_fan_out_over_anything_but_a_list_of_names_is_an_error(ids: str) -> None:
    with pytest.raises(ValueError, match="withParam value could not be parsed as a JSON list"):
        expand(TRAIN, {"tasks.split.outputs.parameters.shard-ids": ids})
    with pytest.raises(UnresolvedReference, match=r"\(task 'train'\)"):
        expand(TRAIN, {})
