"""Whether and when a failed step is tried again, decided as Argo v4.1.2's controller decides it.

The order is controller/operator.go:processNodeRetries: the workflow's deadline; then `backoff` (maxDuration is a
budget from the FIRST attempt's start and also the deadline of every later attempt; the wait before retry n is
duration x factor^(n-1), at most `cap`; Argo waits out the backoff before it looks at the policy); then
`retryPolicy`; then `limit`; then `expression`, evaluated with `lastRetry.*` and `retries`
(operator.go:buildRetryStrategyLocalScope, docs/retries.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.common.durations import parse_duration
from workflows.common.numbers import atoi
from workflows.common.retry_strategy import RETRY_VARIABLES, policy_error
from workflows.common.tokens import KEYWORDS, scan


class RetrySpecError(ValueError):
    """A retryStrategy the runner cannot read."""


@dataclass(frozen=True)
class Attempt:
    """One finished try of a node."""

    phase: str  # Failed or Error
    exit_code: int | None  # None: no process exit code (Argo reads "-1")
    message: str
    started: float  # seconds on the runner's clock
    finished: float


@dataclass(frozen=True)
class Stop:
    """Not retried: the node ends with the last attempt's phase and this message."""

    message: str


@dataclass(frozen=True)
class Wait:
    """Back off until `until`, then decide again."""

    until: float


@dataclass(frozen=True)
class Retry:
    """Start another attempt; it must end by `deadline` (maxDuration), if set."""

    deadline: float | None


Decision = Stop | Wait | Retry


def policy_of(strategy: Mapping[str, Any]) -> str:
    """retryPolicy, defaulting as Argo 3.5+ does: Always with an expression, else OnFailure."""
    policy = strategy.get("retryPolicy") or (
        "Always" if strategy.get("expression") else "OnFailure"
    )
    if fault := policy_error(policy):
        raise RetrySpecError(fault)
    return policy


def _int_or_string(value: Any, what: str) -> int | None:
    """An IntOrString as Argo reads it (util/intstr.Int): an int, or a string strconv.Atoi reads."""
    if value is None:
        return None
    try:
        return as_int(value)
    except ValueError:
        raise RetrySpecError(f"{what} must be an integer, got {value!r}") from None


def limit_of(strategy: Mapping[str, Any]) -> int | None:
    """How many retries the strategy allows; None: no limit, so retried for ever."""
    return _int_or_string(strategy.get("limit"), "retryStrategy.limit")


def decide(
    strategy: Mapping[str, Any],
    attempts: Sequence[Attempt],
    now: float,
    workflow_deadline: float | None = None,
    stopping: bool = False,
) -> Decision:
    """What happens after the last of `attempts` failed (processNodeRetries, in its order)."""
    last = attempts[-1]
    if stopping:
        return Stop("Stopped with strategy 'Stop'")
    if workflow_deadline is not None and now > workflow_deadline:
        return Stop("retry exceeded workflow deadline")
    limit = limit_of(strategy)
    deadline = None
    backoff = strategy.get("backoff")
    if backoff:
        if backoff.get("maxDuration"):
            deadline = attempts[0].started + parse_duration(backoff["maxDuration"])
            if now > deadline:
                return Stop("Max duration limit exceeded")
        if not backoff.get("duration"):
            raise RetrySpecError("no base duration specified for retryStrategy")
        wait = parse_duration(backoff["duration"])
        factor = _int_or_string(backoff.get("factor"), "retryStrategy.backoff.factor")
        if factor is not None and factor > 0:
            wait *= math.pow(factor, len(attempts) - 1)
        if backoff.get("cap"):
            wait = min(wait, parse_duration(backoff["cap"]))
        until = last.finished + wait
        if deadline is not None and until > deadline:
            return Stop("Backoff would exceed max duration limit")
        if now < until and limit is not None and len(attempts) <= limit:
            return Wait(until)
    policy = policy_of(strategy)
    retry_failed = policy in ("Always", "OnFailure")
    retry_error = policy in ("Always", "OnError")
    if (last.phase == "Failed" and not retry_failed) or (last.phase == "Error" and not retry_error):
        return Stop(last.message)
    if limit is not None and len(attempts) > limit:
        return Stop("No more retries left")
    expression = strategy.get("expression")
    if expression and not evaluate(expression, retry_scope(attempts)):
        return Stop("retryStrategy.expression evaluated to false")
    return Retry(deadline)


def retry_scope(attempts: Sequence[Attempt]) -> dict[str, str]:
    """The variables a retry expression sees; every value is a string, as in Argo."""
    last = attempts[-1]
    values = (
        str(len(attempts) - 1),
        "-1" if last.exit_code is None else str(last.exit_code),
        last.phase,
        go_float(last.finished - last.started),
        last.message,
    )
    return dict(zip(RETRY_VARIABLES, values, strict=True))


def go_float(value: float) -> str:
    """A float as Go's fmt.Sprint prints it: "30" where Python prints "30.0"."""
    text = repr(float(value))
    return text.removesuffix(".0")


def as_int(value: Any) -> int:
    """expr-lang's builtin.Int (asInt): a number truncated; a string as strconv.Atoi reads it, so "30.0"
    and " 3" are refused."""
    if not isinstance(value, str):
        return int(value)
    if (whole := atoi(value)) is None:
        raise ValueError(f"invalid operation: int({value})")
    return whole


# ---- a small subset of the expr language: enough for retry expressions ------------------------------

EXPR_TOKEN = re.compile(
    r"\s*(?:(?P<number>-?\d+(?:\.\d+)?)|(?P<string>'[^']*'|\"[^\"]*\")"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[<>!(),])|(?P<name>[A-Za-z_][A-Za-z0-9_.]*))"
)
FUNCTIONS: dict[str, Callable[[Any], Any]] = {"asInt": as_int, "asFloat": float, "string": str}


def evaluate(expression: str, scope: Mapping[str, str]) -> bool:
    """Evaluate an expr boolean over `scope` (comparisons, &&, ||, !, matches, asInt, asFloat)."""
    tokens = _expr_tokens(expression)
    value, rest = _Parser(tokens, scope, expression).disjunction()
    if rest:
        raise RetrySpecError(f"cannot read retry expression {expression!r} at {rest[0][1]!r}")
    if not isinstance(value, bool):
        raise RetrySpecError(f"retry expression {expression!r} is not a boolean")
    return value


def _expr_tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    try:
        for match in scan(EXPR_TOKEN, text):
            kind = match.lastgroup or ""
            value = match.group(kind)
            tokens.append(
                ("op", KEYWORDS[value]) if kind == "name" and value in KEYWORDS else (kind, value)
            )
    except ValueError as error:
        raise RetrySpecError(
            f"cannot read retry expression {text!r} at {error.args[0]!r}"
        ) from None
    return tokens


class _Parser:
    """Recursive descent over the tokens; evaluates as it parses (the expressions are tiny)."""

    def __init__(self, tokens: list, scope: Mapping[str, str], text: str) -> None:
        self.tokens, self.scope, self.text = tokens, scope, text

    def _peek(self, *values: str) -> bool:
        return bool(self.tokens) and self.tokens[0][1] in values and self.tokens[0][0] != "string"

    def _take(self) -> tuple[str, str]:
        if not self.tokens:
            raise RetrySpecError(f"retry expression {self.text!r} ends too early")
        return self.tokens.pop(0)

    def disjunction(self) -> tuple[Any, list]:
        value = self.conjunction()
        while self._peek("||"):
            self._take()
            right = self.conjunction()
            value = bool(value) or bool(right)
        return value, self.tokens

    def conjunction(self) -> Any:
        value = self.comparison()
        while self._peek("&&"):
            self._take()
            right = self.comparison()
            value = bool(value) and bool(right)
        return value

    def comparison(self) -> Any:
        left = self.unary()
        if self._peek("==", "!=", "<", "<=", ">", ">=", "matches"):
            operator = self._take()[1]
            right = self.unary()
            return _compare(operator, left, right, self.text)
        return left

    def unary(self) -> Any:
        if self._peek("!"):
            self._take()
            return not self.unary()
        kind, value = self._take()
        if kind == "number":
            return float(value) if "." in value else int(value)
        if kind == "string":
            return value[1:-1]
        if value == "(":
            inner, _ = self.disjunction()
            if self._take()[1] != ")":
                raise RetrySpecError(f"unbalanced parentheses in {self.text!r}")
            return inner
        if kind == "name" and value in ("true", "false"):
            return value == "true"
        if kind == "name" and value in FUNCTIONS and self._peek("("):
            self._take()
            argument, _ = self.disjunction()
            if self._take()[1] != ")":
                raise RetrySpecError(f"unbalanced parentheses in {self.text!r}")
            try:
                return FUNCTIONS[value](argument)
            except ValueError:
                raise RetrySpecError(f"{value}({argument!r}) failed in {self.text!r}") from None
        if kind == "name" and value in self.scope:
            return self.scope[value]
        raise RetrySpecError(f"unknown name {value!r} in retry expression {self.text!r}")


def _compare(operator: str, left: Any, right: Any, text: str) -> bool:
    if operator == "matches":
        return re.search(str(right), str(left)) is not None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
    if not numbers and type(left) is not type(right):
        raise RetrySpecError(f"cannot compare {left!r} with {right!r} in {text!r}")
    if operator in ("==", "!="):
        return (left == right) == (operator == "==")
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[
        operator
    ]
