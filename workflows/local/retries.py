"""The retry rule as the template declares it (workflows/pipeline/templates.py, retry_strategy), read from the
compiled Workflow, and whether and when a failed try is tried again, as Argo v4.1.4's controller decides it
(workflow/controller/operator.go, processNodeRetries): the workflow's deadline, then the backoff (waited out
before anything else is looked at), then the limit, then the expression.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.errors import UnsupportedFeature

# Go's time.ParseDuration units; wfv1.ParseStringToDuration first reads bare whole seconds ("30").
UNITS = dict(ns=1e-9, us=1e-6, ms=1e-3, s=1.0, m=60.0, h=3600.0) | {"µs": 1e-6, "μs": 1e-6}
DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
WHOLE = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: ASCII digits, an optional sign, nothing else
# The only expression the template writes: a try that exited with this code is not retried.
EXPRESSION = re.compile(r"asInt\(lastRetry\.exitCode\) != ([0-9]+)")
STRATEGY_FIELDS = {"limit", "retryPolicy", "expression", "backoff"}
BACKOFF_FIELDS = {"duration", "factor", "cap"}


class DurationError(ValueError):
    """Not a duration Argo accepts."""


def parse_duration(text: str) -> float:
    """Seconds in `text` as Argo reads a duration ("15s", "1m30s", "1.5h", or bare seconds "30")."""
    if WHOLE.fullmatch(text):
        return float(int(text))
    body = text[1:] if text.startswith(("+", "-")) else text
    parts = list(DURATION_PART.finditer(body))
    if not body or "".join(part.group(0) for part in parts) != body:
        raise DurationError(f"time: invalid duration {text!r}")
    seconds = sum(float(part.group(1)) * UNITS[part.group(2)] for part in parts)
    return -seconds if text.startswith("-") else seconds


def whole_number(value: Any, where: str) -> int:
    """An int-or-string field (a limit, a factor, a deadline) as util/intstr reads it: strconv.Atoi."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and WHOLE.fullmatch(value):
        return int(value)
    raise UnsupportedFeature(f"{where} must be a whole number, got {value!r}")


@dataclass(frozen=True)
class RetryRule:
    """A template's retryStrategy: `limit` retries with policy Always, after a backoff growing by `factor`
    up to `cap`, none after a try that exited with `final_exit_code`."""

    limit: int
    backoff: float = 0.0
    factor: int = 1
    cap: float | None = None
    final_exit_code: int | None = None


def read_rule(strategy: Mapping[str, Any] | None, where: str) -> RetryRule | None:
    """The template's retryStrategy, or UnsupportedFeature for one the template never writes."""
    if not strategy:
        return None
    where = f"{where}, retryStrategy"
    backoff = strategy.get("backoff") or {}
    unknown = sorted(set(strategy) - STRATEGY_FIELDS) + sorted(set(backoff) - BACKOFF_FIELDS)
    if unknown:
        raise UnsupportedFeature(
            f"the local runner does not support {', '.join(unknown)} ({where})"
        )
    if strategy.get("retryPolicy") != "Always" or "limit" not in strategy:
        raise UnsupportedFeature(f"the local runner needs retryPolicy Always and a limit ({where})")
    final = None
    if "expression" in strategy:
        if not (match := EXPRESSION.fullmatch(str(strategy["expression"]))):
            raise UnsupportedFeature(
                f"the local runner reads only the expression 'asInt(lastRetry.exitCode) != N' ({where})"
            )
        final = int(match.group(1))
    if (factor := whole_number(backoff.get("factor", 1), f"{where}.backoff.factor")) < 1:
        raise UnsupportedFeature(f"the local runner needs a backoff factor of at least 1 ({where})")
    try:
        return RetryRule(
            limit=whole_number(strategy["limit"], f"{where}.limit"),
            backoff=parse_duration(str(backoff["duration"])) if "duration" in backoff else 0.0,
            factor=factor,
            cap=parse_duration(str(backoff["cap"])) if "cap" in backoff else None,
            final_exit_code=final,
        )
    except DurationError as error:
        raise UnsupportedFeature(f"{error} ({where})") from None


@dataclass(frozen=True)
class Attempt:
    """One finished try of a node."""

    phase: str  # Failed (the step) or Error (the runner's own trouble)
    exit_code: int | None
    message: str
    started: float  # seconds on the runner's clock
    finished: float


@dataclass(frozen=True)
class Stop:
    """Not retried: the node ends with the last try's phase and this message."""

    message: str


@dataclass(frozen=True)
class Wait:
    """Back off until `until`, then decide again."""

    until: float


@dataclass(frozen=True)
class Retry:
    """Start another try."""


Decision = Stop | Wait | Retry


def decide(
    rule: RetryRule | None,
    attempts: Sequence[Attempt],
    now: float,
    workflow_deadline: float | None = None,
    stopping: bool = False,
) -> Decision:
    """What follows the last of `attempts`, in processNodeRetries' order."""
    last = attempts[-1]
    if stopping:
        return Stop("Stopped with strategy 'Stop'")
    if rule is None:
        return Stop(last.message)
    if workflow_deadline is not None and now > workflow_deadline:
        return Stop("retry exceeded workflow deadline")
    wait = rule.backoff * rule.factor ** (len(attempts) - 1)
    if rule.cap is not None:
        wait = min(wait, rule.cap)
    # operator.go: the backoff is waited out while retries are left, before the expression is read
    if rule.backoff and now < last.finished + wait and len(attempts) <= rule.limit:
        return Wait(last.finished + wait)
    if len(attempts) > rule.limit:
        return Stop("No more retries left")
    # a try without an exit code (the runner's Error) reads "-1" (operator.go:buildRetryStrategyLocalScope)
    if rule.final_exit_code is not None and last.exit_code == rule.final_exit_code:
        return Stop("retryStrategy.expression evaluated to false")
    return Retry()
