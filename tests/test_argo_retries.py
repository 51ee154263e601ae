"""workflows/local/retries.py against the Argo v4.1.2 rules it ports, case by case, with inputs that tell right from
wrong: several tries where the rule is about the first, start times that are not zero, a `now` on each side
of every boundary. The rules: controller/operator.go:processNodeRetries (the order of the checks and their
messages), operator.go:buildRetryStrategyLocalScope (what a retry expression sees), util/expr/env/env.go
GetFuncMap (asInt and asFloat are expr-lang's builtin.Int and builtin.Float), docs/retries.md."""

from __future__ import annotations

import pytest

from workflows.local import retries
from workflows.local.retries import Attempt, Retry, RetrySpecError, Stop, Wait, decide
from workflows.local.supported import templates_by_name
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

T0 = 1000.0  # the first try's start: never zero, so a deadline from it differs from a duration


def tried(
    *spans: tuple[float, float], phase: str = "Failed", code: int | None = 1
) -> list[Attempt]:
    """Tries at these (start, end) offsets from T0, each with its own message."""
    return [
        Attempt(phase, code, f"try {number}", T0 + start, T0 + end)
        for number, (start, end) in enumerate(spans)
    ]


# ---- processNodeRetries: the shutdown and the workflow's deadline come first -------------------------


def test_stopping_comes_before_everything() -> None:
    """`Stopped with strategy 'Stop'` even past the workflow's deadline and with retries left."""
    decision = decide(
        {"limit": "5"}, tried((0, 1)), now=T0 + 9, workflow_deadline=T0, stopping=True
    )
    assert decision == Stop("Stopped with strategy 'Stop'")


def test_the_workflow_deadline_is_passed_only_strictly_after_it() -> None:
    """time.Now().After(*woc.workflowDeadline): at the deadline itself the try may still be retried."""
    failed = tried((0, 1))
    late = decide({"limit": "5"}, failed, now=T0 + 8.5, workflow_deadline=T0 + 8)
    assert late == Stop("retry exceeded workflow deadline")
    assert decide({"limit": "5"}, failed, now=T0 + 8, workflow_deadline=T0 + 8) == Retry(None)


# ---- backoff: maxDuration from the FIRST try, the wait, and its bounds --------------------------------


def test_max_duration_counts_from_the_first_try_not_the_last() -> None:
    """maxDurationDeadline = firstChildNode.StartedAt + maxDuration."""
    strategy = {"limit": "5", "backoff": {"duration": "1s", "maxDuration": "60s"}}
    two = tried((0, 10), (50, 55))  # from the last try's start the budget would run to T0 + 110
    assert decide(strategy, two, now=T0 + 61) == Stop("Max duration limit exceeded")
    assert decide(strategy, two, now=T0 + 60) == Retry(deadline=T0 + 60)  # After is strict


def test_every_retry_gets_the_max_duration_deadline_of_the_first_try() -> None:
    """opts.executionDeadline = maxDurationDeadline, the same for every later try."""
    strategy = {"limit": "5", "backoff": {"duration": "5s", "maxDuration": "2m"}}
    assert decide(strategy, tried((0, 10), (20, 30)), now=T0 + 40) == Retry(deadline=T0 + 120)
    assert decide({"limit": "5", "backoff": {"duration": "5s"}}, tried((0, 1)), T0 + 9) == Retry(
        None
    )


def test_a_backoff_that_would_end_past_max_duration_stops_at_once() -> None:
    """waitingDeadline.After(maxDurationDeadline): "Backoff would exceed max duration limit"."""
    strategy = {"limit": "5", "backoff": {"duration": "20s", "maxDuration": "60s"}}
    assert decide(strategy, tried((0, 41)), now=T0 + 41) == Stop(
        "Backoff would exceed max duration limit"
    )
    # ending exactly at the deadline is not past it: wait, then retry
    assert decide(strategy, tried((0, 40)), now=T0 + 40) == Wait(T0 + 60)


def test_a_backoff_without_a_duration_is_refused() -> None:
    """`no base duration specified for retryStrategy`, whatever else the backoff holds."""
    for backoff in ({"factor": "2"}, {"maxDuration": "1h"}, {"cap": "1m", "duration": ""}):
        with pytest.raises(RetrySpecError, match=r"^no base duration specified for retryStrategy$"):
            decide({"limit": "2", "backoff": backoff}, tried((0, 1)), now=T0 + 1)


@pytest.mark.parametrize(
    ("factor", "waits"),
    [
        (None, [10, 10, 10]),
        ("0", [10, 10, 10]),  # factor > 0 only: 0 leaves the base duration
        ("-2", [10, 10, 10]),
        ("1", [10, 10, 10]),
        ("3", [10, 30, 90]),  # duration * factor^(tries - 1)
        (3, [10, 30, 90]),  # an int or a string (IntOrString)
    ],
)
def test_the_wait_grows_by_the_factor(factor: str | int | None, waits: list[float]) -> None:
    backoff = {"duration": "10s"} | ({"factor": factor} if factor is not None else {})
    history: list[Attempt] = []
    seen = []
    for number in range(3):
        history.append(Attempt("Failed", 1, "", T0 + 500 * number, T0 + 500 * number + 7))
        decision = decide({"limit": "9", "backoff": backoff}, history, now=history[-1].finished)
        assert isinstance(decision, Wait)
        seen.append(decision.until - history[-1].finished)
    assert seen == waits


def test_the_cap_bounds_the_wait() -> None:
    strategy = {"limit": "9", "backoff": {"duration": "10s", "factor": "4", "cap": "25s"}}
    history = tried((0, 1), (20, 21))
    assert decide(strategy, history[:1], now=T0 + 1) == Wait(T0 + 11)  # under the cap
    assert decide(strategy, history, now=T0 + 21) == Wait(T0 + 46)  # 40s capped at 25s


def test_the_wait_ends_exactly_at_its_deadline() -> None:
    """time.Now().Before(waitingDeadline): waiting until then, not a moment longer."""
    strategy = {"limit": "2", "backoff": {"duration": "10s"}}
    assert decide(strategy, tried((0, 5)), now=T0 + 14.9) == Wait(T0 + 15)
    assert decide(strategy, tried((0, 5)), now=T0 + 15) == Retry(None)


def test_no_wait_after_the_last_allowed_try() -> None:
    """The backoff is waited only while len(children) <= limit: after the last allowed try the node fails
    at once ("No more retries left"), as it does with the pipeline's own retry strategy."""
    strategy = {"limit": "2", "backoff": {"duration": "1m", "factor": "2"}}
    assert decide(strategy, tried((0, 1), (70, 71)), now=T0 + 71) == Wait(T0 + 191)
    three = tried((0, 1), (70, 71), (200, 201))
    assert decide(strategy, three, now=T0 + 201) == Stop("No more retries left")

    train = templates_by_name(compile_workflow(PipelineSettings(store="gs://bucket")))["train"]
    limit = int(train["retryStrategy"]["limit"])
    spans = [(100 * number, 100 * number + 5) for number in range(limit + 1)]
    last = T0 + spans[-1][1]
    assert decide(train["retryStrategy"], tried(*spans), now=last) == Stop("No more retries left")
    assert isinstance(decide(train["retryStrategy"], tried(*spans[:-1]), now=T0 + 5), Wait)


def test_without_a_limit_the_backoff_is_not_waited() -> None:
    """Argo waits only when retryStrategy.Limit is set: without one the retry starts at once."""
    assert decide({"backoff": {"duration": "1m"}}, tried((0, 1)), now=T0 + 1) == Retry(None)


# ---- retryPolicy, then limit, then expression ------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "policy"),
    [
        ({}, "OnFailure"),
        ({"expression": "true"}, "Always"),  # RetryPolicyActual: Always when an expression is set
        ({"expression": "true", "retryPolicy": "OnError"}, "OnError"),
        ({"retryPolicy": "OnTransientError"}, "OnTransientError"),
    ],
)
def test_the_policy_and_its_default(strategy: dict, policy: str) -> None:
    assert retries.policy_of(strategy) == policy


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(RetrySpecError, match=r"^Sometimes is not a valid RetryPolicy$"):
        decide({"retryPolicy": "Sometimes"}, tried((0, 1)), now=T0 + 1)


@pytest.mark.parametrize(
    ("policy", "phase", "retried"),
    [
        ("Always", "Failed", True),
        ("Always", "Error", True),
        ("OnFailure", "Failed", True),
        ("OnFailure", "Error", False),
        ("OnError", "Failed", False),
        ("OnError", "Error", True),
        ("OnTransientError", "Failed", False),  # "try 1" is not a transient error's message
        ("OnTransientError", "Error", False),
    ],
)
def test_the_policy_decides_by_the_last_tries_phase(policy: str, phase: str, retried: bool) -> None:
    """The node ends with the LAST try's phase and message when the policy does not retry it."""
    history = [Attempt("Failed" if phase == "Error" else "Error", 1, "try 0", T0, T0 + 1)]
    history.append(Attempt(phase, 1, "try 1", T0 + 5, T0 + 6))
    decision = decide({"limit": "3", "retryPolicy": policy}, history, now=T0 + 7)
    assert decision == (Retry(None) if retried else Stop("try 1"))


@pytest.mark.parametrize(
    ("limit", "tries", "retried"),
    [("0", 1, False), ("1", 1, True), ("2", 2, True), ("2", 3, False), (2, 3, False)],
)
def test_the_limit_counts_retries_after_the_first_try(
    limit: str | int, tries: int, retried: bool
) -> None:
    history = tried(*[(10 * n, 10 * n + 1) for n in range(tries)])
    decision = decide({"limit": limit}, history, now=T0 + 100)
    assert decision == (Retry(None) if retried else Stop("No more retries left"))


def test_no_limit_retries_for_ever() -> None:
    assert decide({}, tried(*[(n, n + 0.5) for n in range(50)]), now=T0 + 60) == Retry(None)


@pytest.mark.parametrize("limit", ["", " 2", "2.0", "two"])
def test_a_limit_is_read_as_strconv_atoi_reads_it(limit: str) -> None:
    """util/intstr.Int: a string limit must be what strconv.Atoi reads; an empty one is no exception."""
    with pytest.raises(RetrySpecError, match=r"^retryStrategy\.limit must be an integer"):
        decide({"limit": limit}, tried((0, 1)), now=T0 + 1)
    assert decide({"limit": "+2"}, tried((0, 1), (2, 3)), now=T0 + 4) == Retry(None)


@pytest.mark.parametrize("field", ["limit", "factor"])
def test_a_limit_or_factor_that_is_not_an_integer_is_refused(field: str) -> None:
    strategy = (
        {"limit": "x"} if field == "limit" else {"backoff": {"duration": "1s", "factor": "1.5"}}
    )
    what = "retryStrategy.limit" if field == "limit" else "retryStrategy.backoff.factor"
    value = "'x'" if field == "limit" else "'1.5'"
    with pytest.raises(RetrySpecError, match=rf"^{what} must be an integer, got {value}$"):
        decide(strategy, tried((0, 1)), now=T0 + 1)


def test_the_expression_decides_last_over_the_last_try() -> None:
    strategy = {"limit": "5", "expression": "asInt(lastRetry.exitCode) != 2"}
    first_bad = [Attempt("Failed", 2, "", T0, T0 + 1), Attempt("Failed", 1, "", T0 + 2, T0 + 3)]
    assert decide(strategy, first_bad, now=T0 + 4) == Retry(None)
    last_bad = list(reversed(first_bad))
    assert decide(strategy, last_bad, now=T0 + 4) == Stop(
        "retryStrategy.expression evaluated to false"
    )


# ---- what the expression sees: buildRetryStrategyLocalScope ----------------------------------------


def test_the_expressions_scope_describes_the_last_try() -> None:
    history = [
        Attempt("Error", 7, "first", T0, T0 + 100),
        Attempt("Failed", 0, "second", T0 + 200, T0 + 230.5),
    ]
    assert retries.retry_scope(history) == {
        "retries": "1",
        "lastRetry.exitCode": "0",
        "lastRetry.status": "Failed",
        "lastRetry.duration": "30.5",
        "lastRetry.message": "second",
    }


def test_a_try_without_an_exit_code_reads_minus_one() -> None:
    """exitCode := "-1" unless the node has outputs.exitCode (an evicted pod has none)."""
    evicted = [Attempt("Failed", None, "The node was low on resource: memory.", T0, T0 + 30)]
    assert retries.retry_scope(evicted)["lastRetry.exitCode"] == "-1"
    assert retries.evaluate("asInt(lastRetry.exitCode) == -1", retries.retry_scope(evicted)) is True
    assert retries.evaluate("lastRetry.exitCode == '-1'", retries.retry_scope(evicted)) is True


def test_a_whole_duration_reads_as_go_prints_it() -> None:
    """fmt.Sprint(float64(30)) is "30", so `asInt(lastRetry.duration)` works for whole seconds."""
    scope = retries.retry_scope([Attempt("Failed", 1, "", T0 + 10, T0 + 40)])
    assert scope["lastRetry.duration"] == "30"
    assert retries.evaluate("asInt(lastRetry.duration) == 30", scope) is True


# ---- the expression language: expr-lang, as far as retry expressions go -----------------------------

SCOPE = {
    "retries": "2",
    "lastRetry.exitCode": "137",
    "lastRetry.status": "Failed",
    "lastRetry.duration": "30.5",
    "lastRetry.message": "OOMKilled: node lost",
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("true", True),
        ("false", False),
        ("!false", True),
        ("!!true", True),
        ("not true", False),
        ("true and false", False),
        ("false or true", True),
        ("true || false && false", True),  # && binds tighter than ||
        ("(true || false) && false", False),
        ("false && true || true", True),
        ("asInt(retries) < 2", False),
        ("asInt(retries) <= 2", True),
        ("asInt(retries) > 2", False),
        ("asInt(retries) >= 2", True),
        ("asInt(retries) == 2", True),
        ("asInt(retries) != 2", False),
        ("asInt(lastRetry.exitCode) == 137 && lastRetry.status == 'Failed'", True),
        ('lastRetry.status == "Error"', False),
        ("lastRetry.status != 'Error'", True),
        ("asFloat(lastRetry.duration) > 30", True),  # an int and a float compare as numbers
        ("asFloat(lastRetry.duration) == 30.5", True),
        ("lastRetry.message matches 'node lost'", True),  # regexp.MatchString: found anywhere
        ("lastRetry.message matches '^node'", False),
        ("lastRetry.message matches 'OOM(Killed|Error)'", True),
        ("string(asInt(retries)) == '2'", True),
        ("true == true", True),
        ("'a' < 'b'", True),
    ],
)
def test_retry_expressions_evaluate_as_expr_does(expression: str, expected: bool) -> None:
    assert retries.evaluate(expression, SCOPE) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("true true", "cannot read retry expression 'true true' at 'true'"),  # trailing tokens
        ("true)", "cannot read retry expression 'true)' at ')'"),
        ("1 + 1", "cannot read retry expression '1 + 1' at ' + 1'"),
        ("retries", "retry expression 'retries' is not a boolean"),
        ("asInt(retries)", "retry expression 'asInt(retries)' is not a boolean"),
        ("foo == 1", "unknown name 'foo' in retry expression 'foo == 1'"),
        ("asInt", "unknown name 'asInt' in retry expression 'asInt'"),
        (
            "lastRetry.exitCode == 137",
            "cannot compare '137' with 137 in 'lastRetry.exitCode == 137'",
        ),
        ("true == 'true'", "cannot compare True with 'true' in \"true == 'true'\""),
        ("(true", "retry expression '(true' ends too early"),
        ("(true false", "unbalanced parentheses in '(true false'"),
        ("asInt(retries", "retry expression 'asInt(retries' ends too early"),
        ("asInt(retries true", "unbalanced parentheses in 'asInt(retries true'"),
        ("asInt('x') == 1", "asInt('x') failed in \"asInt('x') == 1\""),
        # builtin.Int reads a string with strconv.Atoi: "30.0" is not an integer
        ("asInt('30.0') == 30", "asInt('30.0') failed in \"asInt('30.0') == 30\""),
        ("asFloat('x') > 1", "asFloat('x') failed in \"asFloat('x') > 1\""),
    ],
)
def test_unreadable_retry_expressions_are_refused_with_where(expression: str, message: str) -> None:
    with pytest.raises(RetrySpecError) as raised:
        retries.evaluate(expression, SCOPE)
    assert str(raised.value) == message


def test_as_int_reads_what_strconv_atoi_reads() -> None:
    for text, value in [("30", 30), ("-1", -1), ("+7", 7), ("007", 7)]:
        assert retries.evaluate(f"asInt('{text}') == {value}", SCOPE) is True, text
    for text in ["30.0", " 3", "3 ", "1_000", "0x1f", "", "\u0663", "9223372036854775808"]:
        with pytest.raises(RetrySpecError):
            retries.evaluate(f"asInt('{text}') == 1", SCOPE)
    assert retries.evaluate("asInt(asFloat('2.9')) == 2", SCOPE) is True  # a number is truncated
