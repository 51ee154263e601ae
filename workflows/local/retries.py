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
DURATION = re.compile(r"[+-]?((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+")
DURATION_PART = re.compile(r"([0-9.]+)([^0-9.]+)")
WHOLE = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: ASCII digits, an optional sign, nothing else
# The only expression the template writes: a try that exited with this code is not retried.
EXPRESSION = re.compile(r"asInt\(lastRetry\.exitCode\) != ([0-9]+)")


def parse_duration(text: str) -> float:
    """Seconds in `text` as Argo reads a duration ("15s", "1m30s", "1.5h", or bare seconds "30")."""
    if WHOLE.fullmatch(text):
        return float(text)
    if not DURATION.fullmatch(text):
        raise UnsupportedFeature(f"time: invalid duration {text!r}")
    seconds = sum(float(n) * UNITS[unit] for n, unit in DURATION_PART.findall(text))
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


def read_rule(strategy: Mapping[str, Any], where: str) -> RetryRule:
    """The template's retryStrategy (its fields already checked by spec.py), or UnsupportedFeature for one
    the template never writes."""
    backoff = strategy.get("backoff") or {}
    expression = strategy.get("expression")
    final = EXPRESSION.fullmatch(str(expression)) if expression is not None else None
    if (
        strategy.get("retryPolicy") != "Always"
        or "limit" not in strategy
        or (expression and not final)
    ):
        raise UnsupportedFeature(
            "the local runner reads only retryPolicy Always, a limit and the expression "
            f"'asInt(lastRetry.exitCode) != N' ({where})"
        )
    if (factor := whole_number(backoff.get("factor", 1), f"{where}.backoff.factor")) < 1:
        raise UnsupportedFeature(f"the local runner needs a backoff factor of at least 1 ({where})")
    return RetryRule(
        limit=whole_number(strategy["limit"], f"{where}.limit"),
        backoff=parse_duration(str(backoff.get("duration", "0"))),
        factor=factor,
        cap=parse_duration(str(backoff["cap"])) if "cap" in backoff else None,
        final_exit_code=int(final[1]) if final else None,
    )


@dataclass(frozen=True)
class Attempt:
    """One finished try of a node."""

    phase: str  # Failed (the step) or Error (the runner's own trouble)
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
    """What follows the last of `attempts`, in processNodeRetries' order: a message when it is not retried
    (the node ends with the last try's phase), the time to back off until before deciding again, or None:
    another try."""
    last = attempts[-1]
    if stopping:
        return "Stopped with strategy 'Stop'"
    if rule is None:
        return last.message
    if workflow_deadline is not None and now > workflow_deadline:
        return "retry exceeded workflow deadline"
    wait = min(rule.backoff * rule.factor ** (len(attempts) - 1), rule.cap or float("inf"))
    # operator.go: the backoff is waited out while retries are left, before the expression is read
    if rule.backoff and now < last.finished + wait and len(attempts) <= rule.limit:
        return last.finished + wait
    if len(attempts) > rule.limit:
        return "No more retries left"
    # a try without an exit code (the runner's Error) reads "-1" (operator.go:buildRetryStrategyLocalScope)
    if rule.final_exit_code is not None and last.exit_code == rule.final_exit_code:
        return "retryStrategy.expression evaluated to false"
    return None
