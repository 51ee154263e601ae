"""workflows/local/retries.py: the retry rule read from the compiled template, durations as Argo reads them
(wfv1.ParseStringToDuration: strconv.Atoi, then Go's time.ParseDuration), and whether and when a failed try
is tried again, in the order of Argo v4.1.4's processNodeRetries (workflow/controller/operator.go)."""

from __future__ import annotations

import pytest

from workflows.errors import UnsupportedFeature
from workflows.local.retries import (
    Attempt,
    DurationError,
    Retry,
    RetryRule,
    Stop,
    Wait,
    decide,
    parse_duration,
    read_rule,
)
from workflows.local.spec import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

MINUTE = 60.0
PIPELINE_STRATEGY = {
    "limit": "2",
    "retryPolicy": "Always",
    "expression": "asInt(lastRetry.exitCode) != 2",
    "backoff": {"duration": "15s", "factor": "2", "cap": "5m"},
}


def failed(*ends: float, exit_code: int | None = 1, phase: str = "Failed") -> list[Attempt]:
    """Tries of one second each, ending at `ends`."""
    return [Attempt(phase, exit_code, "exit", end - 1, end) for end in ends]


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("-30", -30), ("15s", 15), ("1m30s", 90)]
)
@pytest.mark.parametrize(
    "more", [("1.5h", 5400), (".5s", 0.5), ("250ms", 0.25), ("-1m30s", -90), ("+5s", 5)]
)
def test_durations_read_as_argo_reads_them(text: str, seconds: float, more: tuple) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert parse_duration(more[0]) == pytest.approx(more[1])


@pytest.mark.parametrize(
    "text",
    ["", "-", "s", "5 minutes", "1d", "1m-5s", "--5s", "5s-", ".s", " 15s", "30\n", "\u0663\u0660"],
)
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(DurationError) as refused:
        parse_duration(text)
    assert str(refused.value) == f"time: invalid duration {text!r}"


def test_the_rule_is_read_from_every_compiled_template() -> None:
    workflow = compile_workflow(PipelineSettings(retries=2, retry_backoff="15s", store="gs://b"))
    for name, template in templates_by_name(workflow).items():
        if name != "pipeline":
            assert template["retryStrategy"] == PIPELINE_STRATEGY
            rule = read_rule(template["retryStrategy"], name)
            assert rule == RetryRule(limit=2, backoff=15, factor=2, cap=300, final_exit_code=2)
    none = compile_workflow(PipelineSettings(retries=0, store="gs://b"))
    assert read_rule(templates_by_name(none)["train"].get("retryStrategy"), "train") is None


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        ({"retryPolicy": "OnError"}, "retryPolicy Always"),
        ({"expression": "lastRetry.status == 'Error'"}, "reads only the expression"),
        (
            {"affinity": {}, "backoff": {"duration": "15s", "maxDuration": "1h"}},
            "does not support affinity, maxDuration (template 'split', retryStrategy)",
        ),
        (
            {"backoff": {"duration": "1s", "factor": "two"}},
            "'split', retryStrategy.backoff.factor must",
        ),
        ({"backoff": {"duration": "1s", "factor": 0}}, "a backoff factor of at least 1"),
        ({"limit": True}, "limit must be a whole number"),
        ({"backoff": {"duration": "1 minute"}}, "invalid duration"),
        ({"limit": "2.0"}, "limit must be a whole number"),
    ],
)
def test_a_rule_the_template_never_writes_is_refused(change: dict, fault: str) -> None:
    with pytest.raises(UnsupportedFeature) as refused:
        read_rule(PIPELINE_STRATEGY | change, "template 'split'")
    assert fault in str(refused.value)


def test_without_a_backoff_or_an_expression_every_failure_is_retried_at_once() -> None:
    rule = read_rule({"limit": "1", "retryPolicy": "Always"}, "template 'split'")
    assert rule == RetryRule(limit=1, backoff=0.0, factor=1, cap=None, final_exit_code=None)
    assert decide(rule, failed(100, exit_code=2), now=100) == Retry()


RULE = RetryRule(limit=2, backoff=15, factor=2, cap=20, final_exit_code=2)


def test_the_wait_grows_by_the_factor_up_to_the_cap_then_the_limit_stops() -> None:
    assert decide(RULE, failed(100), now=100) == Wait(115)
    assert decide(RULE, failed(100), now=115) == Retry()
    assert decide(RULE, failed(100, 200), now=200) == Wait(220)  # 30 s, capped at 20
    assert decide(RULE, failed(100, 200), now=220) == Retry()
    assert decide(RULE, failed(100, 200, 300), now=300) == Stop("No more retries left")


def test_bad_input_is_not_retried_but_the_backoff_is_waited_out_first() -> None:
    bad = failed(100, exit_code=2)
    assert decide(RULE, bad, now=100) == Wait(115)
    assert decide(RULE, bad, now=115) == Stop("retryStrategy.expression evaluated to false")


@pytest.mark.parametrize(("exit_code", "phase"), [(137, "Failed"), (None, "Error")])
def test_a_killed_try_and_the_runners_own_trouble_are_retried(
    exit_code: int | None, phase: str
) -> None:
    """Policy Always: an OOM kill (137) and an Error without an exit code ("-1") are both retried."""
    assert decide(RULE, failed(100, exit_code=exit_code, phase=phase), now=115) == Retry()


def test_stopping_and_the_workflow_deadline_come_first() -> None:
    assert decide(RULE, failed(100), now=100, stopping=True) == Stop("Stopped with strategy 'Stop'")
    assert decide(RULE, failed(100), now=100, workflow_deadline=100) == Wait(115)  # not yet past it
    past = decide(RULE, failed(100), now=100.5, workflow_deadline=100)
    assert past == Stop("retry exceeded workflow deadline")
    assert decide(None, failed(100), now=100) == Stop("exit")  # no rule: never retried
