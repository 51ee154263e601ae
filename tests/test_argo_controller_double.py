"""The Argo double's stand-in for the workflow controller plays Argo's rules through the project's own
functions (workflows/local/dag.py, workflows/common/depends.py, workflows/local/retries.py): the rules
themselves are tested in test_argo_depends.py and test_argo_retries.py; these cases check only that the
double lays them out as nodes, ticks, messages and progress. Small hand-written specs, so these cases do not
move when the pipeline's own spec does."""

from __future__ import annotations

from tests.doubles.argo_controller import (
    FAILING_NODE,
    RETRIED_NODE,
    SECONDS_PER_TICK,
    RunPlan,
)

PARAMETERS = {"workers": "2", "epochs": "1", "batch": "100", "limit": "600", "min-workers": "0"}


def pipeline_spec(retry_strategy: dict | None, aggregate_depends: str) -> dict:
    """A fan-out of trainers and the task gathering them, as the pipeline's DAG has them."""
    train = {"name": "train", "container": {"command": ["python", "-m", "steps.train"]}}
    aggregate = {"name": "aggregate", "container": {"command": ["python", "-m", "steps.aggregate"]}}
    publish = {"name": "publish", "container": {"command": ["python", "-m", "steps.publish"]}}
    if retry_strategy:
        train["retryStrategy"] = retry_strategy
    tasks = [
        {"name": "train-round-1", "template": "train", "withParam": "[0, 1]"},
        {"name": "aggregate-round-1", "template": "aggregate", "depends": aggregate_depends},
        {"name": "publish", "template": "publish", "depends": "aggregate-round-1"},
    ]
    dag = {"name": "main", "dag": {"tasks": tasks}}
    return {"entrypoint": "main", "templates": [train, aggregate, publish, dag]}


def nodes_at(plan: RunPlan, tick: int) -> dict[str, dict]:
    return {node["displayName"]: node for node in plan.status(tick)["nodes"].values()}


def test_a_failed_try_waits_its_backoff_and_is_retried_within_the_limit() -> None:
    strategy = {"limit": "1", "retryPolicy": "OnFailure", "backoff": {"duration": "20s"}}
    plan = RunPlan("run", pipeline_spec(strategy, "train-round-1"), PARAMETERS, "retry")
    retry = next(n for n in plan.nodes if n.display == RETRIED_NODE)
    first, second = (n for n in plan.nodes if n.display.startswith(f"{RETRIED_NODE}("))
    assert first.phase == "Failed" and second.phase == "Succeeded"
    assert second.created - first.finished == 20 // SECONDS_PER_TICK
    waiting = nodes_at(plan, first.finished)[RETRIED_NODE]
    assert waiting["phase"] == "Running"  # the Retry node stays Running through the backoff
    assert waiting["message"].startswith("Backoff for")
    assert retry.phase == "Succeeded" and plan.phase == "Succeeded"


def test_backoff_comes_before_the_policy_and_max_duration_counts_from_the_first_try() -> None:
    """processNodeRetries: the wait is taken before retryPolicy decides, and a try ending past
    maxDuration from the first try's start is not retried."""
    not_retried = {"limit": "2", "retryPolicy": "OnError", "backoff": {"duration": "30s"}}
    plan = RunPlan("run", pipeline_spec(not_retried, "train-round-1"), PARAMETERS, "fail")
    [failed_try] = [n for n in plan.nodes if n.display.startswith(f"{FAILING_NODE}(")]
    step = next(n for n in plan.nodes if n.display == FAILING_NODE)
    assert step.phase == "Failed" and step.message == failed_try.message
    assert step.finished == failed_try.finished + 30 // SECONDS_PER_TICK

    budget = {
        "limit": "5",
        "retryPolicy": "Always",
        "backoff": {"duration": "1s", "maxDuration": "20s"},
    }
    plan = RunPlan("run", pipeline_spec(budget, "train-round-1"), PARAMETERS, "fail")
    step = next(n for n in plan.nodes if n.display == FAILING_NODE)
    assert step.message == "Max duration limit exceeded"
    assert len([n for n in plan.nodes if n.display.startswith(f"{FAILING_NODE}(")]) == 1


def test_the_expression_is_evaluated_over_the_last_try() -> None:
    strategy = {
        "limit": "3",
        "retryPolicy": "Always",
        "expression": "asInt(lastRetry.exitCode) != 137",
    }
    plan = RunPlan("run", pipeline_spec(strategy, "train-round-1"), PARAMETERS, "fail")
    step = next(n for n in plan.nodes if n.display == FAILING_NODE)
    assert step.message == "retryStrategy.expression evaluated to false"


def test_omitted_targets_take_their_branchs_failure() -> None:
    """assessDAGPhase: a failed trainer omits its dependents, and the omitted target fails the run."""
    plan = RunPlan("run", pipeline_spec(None, "train-round-1"), PARAMETERS, "fail")
    final = nodes_at(plan, plan.finished)
    assert final["aggregate-round-1"]["phase"] == "Omitted"
    assert final["publish"]["phase"] == "Omitted"
    assert plan.phase == "Failed"
    assert plan.status(plan.finished)["phase"] == "Failed"


def test_progress_as_argo_sums_it() -> None:
    """A Pod holds its own report (N/N once Succeeded; "0/1" before it reports); a Retry node sums its
    tries; the run sums its Pods."""
    strategy = {"limit": "1", "retryPolicy": "OnFailure", "backoff": {"duration": "10s"}}
    plan = RunPlan("run", pipeline_spec(strategy, "train-round-1"), PARAMETERS, "retry")
    first, second = (n for n in plan.nodes if n.display.startswith(f"{RETRIED_NODE}("))
    batches = 3  # 600 digits over 2 workers, batch 100, 1 epoch
    assert nodes_at(plan, first.started)[f"{RETRIED_NODE}(0)"]["progress"] == "0/1"
    assert nodes_at(plan, first.started + 1)[f"{RETRIED_NODE}(0)"]["progress"] == "1/3"
    during_second = nodes_at(plan, second.started + 2)
    assert during_second[f"{RETRIED_NODE}(0)"]["progress"] == "2/3"  # a failed try keeps its last
    assert during_second[f"{RETRIED_NODE}(1)"]["progress"] == "2/3"
    assert during_second[RETRIED_NODE]["progress"] == "4/6"
    final = plan.status(plan.finished)
    pods = [n for n in final["nodes"].values() if n["type"] == "Pod"]
    done = sum(int(n["progress"].split("/")[0]) for n in pods)
    total = sum(int(n["progress"].split("/")[1]) for n in pods)
    assert final["progress"] == f"{done}/{total}"
    assert nodes_at(plan, plan.finished)[f"{RETRIED_NODE}(1)"]["progress"] == f"{batches}/{batches}"
