"""The template's retry rule read from the compiled Workflow, and whether and when a failed try is tried
again, in the order of Argo v4.1.4's processNodeRetries (workflow/controller/operator.go)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.errors import UnsupportedFeature

# The durations the settings write (workflows/pipeline/settings.py: DURATION): whole seconds, or h, m and s
DURATION = re.compile(r"([0-9]+)|(?=[0-9])(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
WHOLE = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: ASCII digits, an optional sign, nothing else
# The only expression the template writes: a try that exited with this code is not retried.
EXPRESSION = re.compile(r"asInt\(lastRetry\.exitCode\) != ([0-9]+)")
BACKOFF = {"duration", "factor", "cap"}
STOPPED = "Stopped with strategy 'Stop'"


def parse_duration(text: str) -> float:
    """Seconds in a duration as the settings write it ("30", "15s", "1m30s", "2h")."""
    if not (match := DURATION.fullmatch(text)):
        raise UnsupportedFeature(f"the local runner cannot read the duration {text!r}")
    plain, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return float(plain + 3600 * hours + 60 * minutes + seconds)


def whole_number(value: Any, where: str) -> int:
    """An int-or-string field (a limit, a factor, a deadline) as util/intstr reads it: strconv.Atoi."""
    if isinstance(value, bool) or not WHOLE.fullmatch(str(value)):
        raise UnsupportedFeature(f"{where} must be a whole number, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RetryRule:
    """`limit` retries, a backoff growing by `factor` up to `cap`, none after `final_exit_code`."""

    limit: int
    backoff: float
    factor: int
    cap: float
    final_exit_code: int


def read_rule(strategy: Mapping[str, Any], where: str) -> RetryRule:
    """The template's retryStrategy, or UnsupportedFeature for one the template never writes."""
    backoff = strategy.get("backoff") or {}
    final = EXPRESSION.fullmatch(str(strategy.get("expression")))
    if strategy.get("retryPolicy") != "Always" or not final or BACKOFF - backoff.keys():
        raise UnsupportedFeature(
            "the local runner reads only retryPolicy Always, a backoff's duration, factor and cap "
            f"and the expression 'asInt(lastRetry.exitCode) != N' ({where})"
        )
    if (factor := whole_number(backoff["factor"], f"{where}.backoff.factor")) < 1:
        raise UnsupportedFeature(f"the local runner needs a backoff factor of at least 1 ({where})")
    return RetryRule(
        limit=whole_number(strategy.get("limit"), f"{where}.limit"),
        backoff=parse_duration(str(backoff["duration"])),
        factor=factor,
        cap=parse_duration(str(backoff["cap"])),
        final_exit_code=int(final[1]),
    )


@dataclass(frozen=True)
class Attempt:
    """One finished try of a node: Failed (the step) or Error (the runner's own trouble)."""

    phase: str
    exit_code: int | None
    message: str
    started: float  # seconds on the runner's clock
    finished: float


def decide(
    rule: RetryRule | None,
    attempts: Sequence[Attempt],
    now: float,
    workflow_deadline: float | None = None,
    stopping: bool = False,
) -> str | float | None:
    """After the last try: why it is not retried, the time to back off until, or None (try again)."""
    last = attempts[-1]
    if stopping:
        return STOPPED
    if rule is None:
        return last.message
    if workflow_deadline is not None and now > workflow_deadline:
        return "retry exceeded workflow deadline"
    wait = min(rule.backoff * rule.factor ** (len(attempts) - 1), rule.cap)
    if len(attempts) > rule.limit:
        return "No more retries left"
    if now < last.finished + wait:  # operator.go: the backoff is waited out before the expression
        return last.finished + wait
    # a try without an exit code (the runner's Error) reads "-1" (operator.go:buildRetryStrategyLocalScope)
    if last.exit_code == rule.final_exit_code:
        return "retryStrategy.expression evaluated to false"
    return None
