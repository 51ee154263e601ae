"""The controller's rules the local runner follows, each checked against the Argo v4.1.2 source it cites
(../shared/argo/upstream/workflow/controller/dag.go and operator.go), and the compiled spec against them."""

from __future__ import annotations

import pytest

from workflows.common import depends
from workflows.local import retries
from workflows.local.dag import DagError, TaskOutcome, assess, read_dag, should_run
from workflows.local.supported import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

MINUTE = 60.0


def pipeline(**settings: object) -> dict:
    return compile_workflow(PipelineSettings(**settings, store="gs://bucket"))


def fan_in_depends(workflow: dict) -> depends.Expression:
    tasks = templates_by_name(workflow)["pipeline"]["dag"]["tasks"]
    aggregate = next(task for task in tasks if task["name"] == "aggregate-round-1")
    return depends.parse(depends.expression_text(aggregate))


# ---- depends: controller/dag.go:evaluateDependsLogic, common/ancestry.go:expandDependency ----------


def test_a_bare_name_means_succeeded_skipped_or_daemoned() -> None:
    expression = depends.parse("a && b")
    results = {"a": depends.TaskResults("Succeeded"), "b": depends.TaskResults("Skipped")}
    assert depends.holds(expression, results)
    results["b"] = depends.TaskResults("Omitted")
    assert not depends.holds(expression, results)


def test_all_failed_is_false_when_a_child_ended_in_error() -> None:
    """dag.go:evaluateDependsLogic: allFailed = allFailed && childPhase == NodeFailed."""
    group = depends.TaskResults("Error", ("Failed", "Error", "Failed"))
    assert not group.result("AllFailed") and not group.result("AnySucceeded")
    assert group.result("Errored") and not group.result("Failed")


def test_the_fan_in_runs_whatever_way_the_trainers_ended() -> None:
    """Every trainer failed, one of them in Error: aggregate must still run and name the missing shards."""
    children = ("Failed", "Error", "Failed")
    results = {"train-round-1": depends.TaskResults(depends.group_phase(children), children)}
    assert depends.holds(fan_in_depends(pipeline()), results)
    for children in [("Succeeded",) * 3, ("Failed",) * 3, ("Succeeded", "Error", "Failed")]:
        results = {"train-round-1": depends.TaskResults(depends.group_phase(children), children)}
        assert depends.holds(fan_in_depends(pipeline()), results), children


def test_group_phase_is_the_last_failed_or_errored_child() -> None:
    """dag.go:executeDAGTask: groupPhase = node.Phase for each child that FailedOrError."""
    assert depends.group_phase(["Succeeded", "Succeeded"]) == "Succeeded"
    assert depends.group_phase(["Error", "Succeeded", "Failed", "Succeeded"]) == "Failed"


def test_continue_on_widens_a_bare_dependency() -> None:
    """ancestry.go:expandDependency adds .Failed/.Errored for continueOn (dependencies only)."""
    expression = depends.parse("a")
    failed = {"a": depends.TaskResults("Failed")}
    assert not depends.holds(expression, failed)
    assert depends.holds(expression, failed, {"a": {"failed": True}})


@pytest.mark.parametrize("text", ["a &&", "a.Finished", "(a || b", "a b", "&& a"])
def test_unreadable_depends_are_refused(text: str) -> None:
    with pytest.raises(depends.DependsError):
        depends.parse(text)


# ---- the DAG's phase: dag.go:assessDAGPhase ------------------------------------------------------


DIAMOND = {
    "name": "main",
    "dag": {
        "tasks": [
            {"name": "a", "template": "t"},
            {"name": "b", "template": "t", "depends": "a"},
            {"name": "c", "template": "t", "depends": "a.Failed"},
            {"name": "d", "template": "t", "depends": "b"},
        ]
    },
}


def test_an_omitted_target_inherits_the_failure_above_it() -> None:
    dag = read_dag(DIAMOND)
    assert dag.targets == ("c", "d")
    outcomes = {"a": TaskOutcome("Succeeded"), "b": TaskOutcome("Failed")}
    assert should_run(dag, "c", outcomes) is False
    assert should_run(dag, "d", outcomes) is False
    outcomes |= {"c": TaskOutcome("Omitted"), "d": TaskOutcome("Omitted")}
    assert assess(dag, outcomes) == "Failed"


def test_a_failure_the_dag_handles_does_not_fail_it() -> None:
    dag = read_dag(DIAMOND)
    outcomes = {
        "a": TaskOutcome("Failed"),
        "b": TaskOutcome("Omitted"),
        "c": TaskOutcome("Succeeded"),
        "d": TaskOutcome("Omitted"),
    }
    # d is omitted below a failed a: its branch failed, so the DAG fails (c's success does not save it)
    assert assess(dag, outcomes) == "Failed"
    handled = read_dag({"name": "main", "dag": {"tasks": DIAMOND["dag"]["tasks"][:3]}})
    assert handled.targets == ("b", "c")
    assert assess(handled, {k: outcomes[k] for k in "abc"}) == "Failed"  # b omitted under failed a


def test_the_pipeline_succeeds_when_aggregate_goes_ahead_without_a_shard() -> None:
    dag = read_dag(templates_by_name(pipeline(rounds=1))["pipeline"])
    assert dag.targets == ("publish",)
    outcomes = {
        "split": TaskOutcome("Succeeded"),
        "init": TaskOutcome("Succeeded"),
        "train-round-1": TaskOutcome(None, ("Succeeded", "Error", "Succeeded")),
    }
    assert should_run(dag, "aggregate-round-1", outcomes) is True
    assert assess(dag, outcomes) == "Running"
    outcomes |= {name: TaskOutcome("Succeeded") for name in ("aggregate-round-1", "evaluate")}
    assert assess(dag, outcomes) == "Running"
    outcomes["publish"] = TaskOutcome("Succeeded")
    assert assess(dag, outcomes) == "Succeeded"


def test_a_running_task_keeps_the_dag_running() -> None:
    dag = read_dag(DIAMOND)
    assert assess(dag, {"a": TaskOutcome(None)}) == "Running"
    assert assess(dag, {"a": TaskOutcome("Succeeded"), "b": TaskOutcome(None)}) == "Running"


def test_a_graph_argo_would_refuse_is_refused_in_its_words() -> None:
    """util/sorting (workflows/local/spec_rules.py sort_tasks): a cycle, an
    unknown dependency and a task named twice (which the runner once ran as one)."""
    cases = [
        ([{"name": "a", "depends": "b"}, {"name": "b", "depends": "a"}], "graph with cycle"),
        ([{"name": "a", "depends": "z"}], "invalid dependency z"),
        ([{"name": "a"}, {"name": "a", "depends": ""}], "duplicated nodeName a"),
    ]
    for tasks, fault in cases:
        with pytest.raises(DagError, match=f"^templates.m sorting failed: {fault}$"):
            read_dag({"name": "m", "dag": {"tasks": tasks}})


# ---- retries: operator.go:processNodeRetries -----------------------------------------------------


def tries(*specs: tuple[str, int | None, float, float]) -> list[retries.Attempt]:
    return [retries.Attempt(phase, code, "", start, end) for phase, code, start, end in specs]


def strategy_of(workflow: dict, template: str) -> dict:
    return templates_by_name(workflow)[template]["retryStrategy"]


MAIN_SPEC_RETRY = {  # the spec as it was: OnError for most steps, a 5m maxDuration on every backoff
    "limit": "2",
    "retryPolicy": "OnError",
    "backoff": {"duration": "15s", "factor": "2", "maxDuration": "5m"},
}


def test_a_trainer_failing_after_six_minutes_is_retried() -> None:
    """maxDuration is a budget from the first try's start (firstChildNode.StartedAt + maxDuration), so a
    5m maxDuration never retries a trainer that dies after 6 minutes; the spec has none."""
    failed = tries(("Failed", 137, 0.0, 6 * MINUTE))
    old = dict(MAIN_SPEC_RETRY, retryPolicy="Always")
    assert retries.decide(old, failed, now=6 * MINUTE) == retries.Stop(
        "Max duration limit exceeded"
    )
    train = strategy_of(pipeline(), "train")
    assert "maxDuration" not in train["backoff"]
    waited = retries.decide(train, failed, now=6 * MINUTE)
    assert waited == retries.Wait(6 * MINUTE + 15)
    assert retries.decide(train, failed, now=6 * MINUTE + 15) == retries.Retry(deadline=None)


def test_max_duration_is_also_the_deadline_of_every_retry() -> None:
    """opts.executionDeadline = maxDurationDeadline: the retried pod dies 5 minutes after the FIRST start."""
    decision = retries.decide(
        dict(MAIN_SPEC_RETRY, retryPolicy="Always"), tries(("Failed", 1, 0.0, 10.0)), now=25.0
    )
    assert decision == retries.Retry(deadline=5 * MINUTE)


@pytest.mark.parametrize("step", ["split", "init", "aggregate", "evaluate", "publish", "train"])
def test_an_evicted_pod_is_retried(step: str) -> None:
    """An eviction, OOM kill, preemption or node shutdown ends the pod Failed (operator.go:inferFailedReason:
    the pod's message, or the main container's exit code), never Error: OnError would not retry it."""
    evicted = tries(("Failed", None, 0.0, 30.0))  # no exit code: lastRetry.exitCode is "-1"
    assert isinstance(retries.decide(MAIN_SPEC_RETRY, evicted, now=60.0), retries.Stop)
    assert retries.decide(strategy_of(pipeline(), step), evicted, now=60.0) == retries.Retry(None)
    oom = tries(("Failed", 137, 0.0, 30.0))
    assert retries.decide(strategy_of(pipeline(), step), oom, now=60.0) == retries.Retry(None)


def test_bad_input_is_not_retried_but_the_backoff_is_waited_out_first() -> None:
    """The backoff comes before the policy and the expression in processNodeRetries."""
    train = strategy_of(pipeline(), "train")
    bad = tries(("Failed", 2, 0.0, 5.0))
    assert retries.decide(train, bad, now=6.0) == retries.Wait(20.0)
    assert retries.decide(train, bad, now=20.0) == retries.Stop(
        "retryStrategy.expression evaluated to false"
    )


def test_waits_grow_by_the_factor_up_to_the_cap() -> None:
    strategy = {"limit": "10", "backoff": {"duration": "1m", "factor": "2", "cap": "3m"}}
    waits = []
    history: list[retries.Attempt] = []
    for number in range(4):
        history.append(retries.Attempt("Failed", 1, "", number * 1000.0, number * 1000.0 + 1))
        decision = retries.decide(strategy, history, now=history[-1].finished)
        waits.append(decision.until - history[-1].finished)
    assert waits == [60.0, 120.0, 180.0, 180.0]


def test_limit_policy_and_workflow_deadline() -> None:
    failed, errored = tries(("Failed", 1, 0.0, 1.0)), tries(("Error", None, 0.0, 1.0))
    assert retries.decide({"limit": "1"}, failed, now=2) == retries.Retry(None)  # OnFailure
    assert retries.decide({"limit": "1"}, errored, now=2) == retries.Stop("")
    assert retries.decide({"limit": "1", "retryPolicy": "OnError"}, errored, 2) == retries.Retry(
        None
    )
    twice = tries(("Failed", 1, 0.0, 1.0), ("Failed", 1, 2.0, 3.0))
    assert retries.decide({"limit": "1"}, twice, now=4) == retries.Stop("No more retries left")
    assert retries.decide({"limit": "5"}, failed, now=9, workflow_deadline=8) == retries.Stop(
        "retry exceeded workflow deadline"
    )


def test_an_expression_alone_means_policy_always() -> None:
    """docs/retries.md: from v3.5 an expression without a policy makes the decision."""
    errored = tries(("Error", None, 0.0, 1.0))
    assert retries.decide({"limit": "1", "expression": "true"}, errored, 2) == retries.Retry(None)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("asInt(lastRetry.exitCode) != 2", True),
        ("asInt(lastRetry.exitCode) > 1 && lastRetry.status == 'Failed'", True),
        ('lastRetry.status != "Failed"', False),
        ("lastRetry.message matches 'node (lost|shutdown)'", True),
        ("asInt(retries) < 1 and not (asInt(lastRetry.exitCode) == 2)", True),
        ("asFloat(lastRetry.duration) >= 30.5", False),
    ],
)
def test_retry_expressions(expression: str, expected: bool) -> None:
    scope = retries.retry_scope([retries.Attempt("Failed", 3, "node lost", 0.0, 30.0)])
    assert retries.evaluate(expression, scope) is expected


@pytest.mark.parametrize("expression", ["lastRetry.exitCode != 2", "foo == 1", "asInt(", "1 +"])
def test_unreadable_retry_expressions_are_refused(expression: str) -> None:
    scope = retries.retry_scope([retries.Attempt("Failed", 3, "", 0.0, 1.0)])
    with pytest.raises(retries.RetrySpecError):
        retries.evaluate(expression, scope)


# ---- the compiled spec ---------------------------------------------------------------------------


def test_no_task_combines_continue_on_with_depends() -> None:
    """validate.go:validateDAG refuses continueOn when any task uses depends."""
    for rounds in (1, 3):
        tasks = templates_by_name(pipeline(rounds=rounds))["pipeline"]["dag"]["tasks"]
        assert any("depends" in task for task in tasks)
        assert not any("continueOn" in task for task in tasks)


def test_input_folders_are_readable_by_the_steps_user() -> None:
    """gcs.go:downloadObject makes folders 0700 as argoexec's user; only `mode` opens them."""
    models = templates_by_name(pipeline())["aggregate"]["inputs"]["artifacts"][0]
    assert models["name"] == "models" and models["mode"] & 0o005 == 0o005
    assert models["recurseMode"] is True


def test_every_step_retries_everything_but_bad_input() -> None:
    for name, template in templates_by_name(pipeline()).items():
        if "container" not in template:
            continue
        strategy = template["retryStrategy"]
        assert strategy["retryPolicy"] == "Always", name
        assert strategy["expression"] == "asInt(lastRetry.exitCode) != 2", name
        assert set(strategy["backoff"]) == {"duration", "factor", "cap"}, name


def test_steps_run_on_a_read_only_root_with_scratch_folders() -> None:
    for name, template in templates_by_name(pipeline()).items():
        if "container" not in template:
            continue
        container = template["container"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts == {"/work/out", "/tmp"}, name
        for output in template.get("outputs", {}).get("artifacts", []):
            assert output["path"].startswith("/work/out/"), (name, output["path"])
