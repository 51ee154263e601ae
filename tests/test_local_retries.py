"""workflows/local/retries.py: the retry rule read from the compiled template, and whether and when a failed
try is tried again, in the order of Argo v4.1.4's processNodeRetries (workflow/controller/operator.go)."""

from __future__ import annotations

import pytest

from workflows.errors import UnsupportedFeature
from workflows.local.retries import Attempt, RetryRule, decide, parse_duration, read_rule
from workflows.local.spec import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

PIPELINE_STRATEGY = {
    "limit": "2",
    "retryPolicy": "Always",
    "expression": "asInt(lastRetry.exitCode) != 2",
    "backoff": {"duration": "15s", "factor": "2", "cap": "5m"},
}
RULE = RetryRule(limit=2, backoff=15, factor=2, cap=20, final_exit_code=2)


def failed(*ends: float, exit_code: int | None = 1, phase: str = "Failed") -> list[Attempt]:
    """Tries of one second each, ending at `ends`."""
    return [Attempt(phase, exit_code, "exit", end - 1, end) for end in ends]


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("15s", 15), ("1m30s", 90), ("2h", 7200)]
)
def test_durations_read_as_the_settings_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "s", "-30", "1.5h", "1d", "5s1m", " 15s", "30\n", "\u0663\u0660"]
)
def test_any_other_duration_is_refused(text: str) -> None:
    with pytest.raises(UnsupportedFeature) as refused:
        parse_duration(text)
    assert str(refused.value) == f"the local runner cannot read the duration {text!r}"


def test_the_rule_is_read_from_every_compiled_template() -> None:
    workflow = compile_workflow(PipelineSettings(retries=2, retry_backoff="15s", store="gs://b"))
    for name, template in templates_by_name(workflow).items():
        if name != "pipeline":
            assert template["retryStrategy"] == PIPELINE_STRATEGY
            assert read_rule(template["retryStrategy"], name) == RetryRule(2, 15, 2, 300, 2)
    none = compile_workflow(PipelineSettings(retries=0, store="gs://b"))
    assert "retryStrategy" not in templates_by_name(none)["train"]


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        ({"retryPolicy": "OnError"}, "reads only retryPolicy Always"),
        ({"backoff": {"duration": "1s", "factor": "2"}}, "a backoff's duration, factor and cap"),
        ({"expression": "lastRetry.status == 'Error'"}, "'asInt(lastRetry.exitCode) != N' (here)"),
        ({"backoff": {"duration": "1s", "factor": "two", "cap": "1s"}}, "backoff.factor must be"),
        (
            {"backoff": {"duration": "1s", "factor": 0, "cap": "1s"}},
            "a backoff factor of at least 1",
        ),
        ({"limit": True}, "limit must be a whole number"),
        ({"limit": "2.0"}, "limit must be a whole number"),
        (
            {"backoff": {"duration": "1 minute", "factor": 2, "cap": "1s"}},
            "cannot read the duration",
        ),
    ],
)
def test_a_rule_the_template_never_writes_is_refused(change: dict, fault: str) -> None:
    with pytest.raises(UnsupportedFeature, match=fault.replace("(", r"\(").replace(")", r"\)")):
        read_rule(PIPELINE_STRATEGY | change, "here")


def test_the_wait_grows_by_the_factor_up_to_the_cap_then_the_limit_stops() -> None:
    assert decide(RULE, failed(100), now=100) == 115
    assert decide(RULE, failed(100), now=115) is None
    assert decide(RULE, failed(100, 200), now=200) == 220  # 30 s, capped at 20
    assert decide(RULE, failed(100, 200), now=220) is None
    assert decide(RULE, failed(100, 200, 300), now=300) == "No more retries left"


@pytest.mark.parametrize(
    ("tries", "now", "decided"),
    [
        (failed(100, exit_code=2), 100, 115),  # bad input: the backoff is waited out first
        (failed(100, exit_code=2), 115, "retryStrategy.expression evaluated to false"),
        (failed(100, exit_code=137), 115, None),  # an OOM kill is retried (policy Always)
        (failed(100, exit_code=None, phase="Error"), 115, None),  # the runner's own: "-1"
    ],
)
def test_bad_input_is_not_retried_and_every_other_failure_is(
    tries: list, now: float, decided: object
) -> None:
    assert decide(RULE, tries, now=now) == decided


def test_stopping_and_the_workflow_deadline_come_first() -> None:
    assert decide(RULE, failed(100), now=100, stopping=True) == "Stopped with strategy 'Stop'"
    assert decide(RULE, failed(100), now=100, workflow_deadline=100) == 115  # not yet past it
    past = decide(RULE, failed(100), now=100.5, workflow_deadline=100)
    assert past == "retry exceeded workflow deadline"
    assert decide(None, failed(100), now=100) == "exit"  # no rule: never retried
