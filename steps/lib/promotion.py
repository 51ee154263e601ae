"""When a published run becomes the served model, the one models/mnist/LATEST names: the `--serve`
policy, decided from what the two runs' cards and metrics say. Every run publish accepts is kept under
models/mnist/<run>/ whatever is decided here; only the pointer follows the policy.

- `if-better`: served when its test accuracy is at least --min-accuracy and above the served model's;
- `if-not-worse`: served when at least --min-accuracy and no more than --max-accuracy-drop below it;
- `always`: served; `never`: kept only.

Under `if-better` and `if-not-worse` a partial run (one that trained on part of the data: `--limit`,
or a round averaged without some workers' models) never replaces a complete one, whatever it scores:
its test accuracy is not comparable with a model that saw every digit. Nor does a run scored on other
test digits than the served one (metrics.json's `test_sha256`), or when the served run's test set or
accuracy is not recorded: accuracies compare only on the same digits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

POLICIES = ("if-better", "if-not-worse", "always", "never")
GATED = ("if-better", "if-not-worse")  # the policies --min-accuracy and the partial rule apply to


@dataclass(frozen=True)
class Contender:
    """What the decision needs to know of a run: its id, test accuracy, and why it is partial."""

    run: str
    accuracy: float | None  # None: not recorded (a served run whose card and metrics say none)
    partial: str = ""  # '' for a complete run, else what it left out ("--limit 3000")
    test_set: str = ""  # the sha256 of the test digits it was scored on ('' not recorded)
    test_samples: int | None = None  # how many there were


@dataclass(frozen=True)
class Verdict:
    """Whether the run is to be served, and why, in a few words that follow "served:" or "not served:"."""

    served: bool
    reason: str


def partial_reason(settings: Mapping[str, object], metrics: Mapping[str, object]) -> str:
    """Why a run's model saw only part of the training data ('' when it saw all of it), from its
    card's settings (`limit`) and its metrics.json (`missing_shards`, the rounds that went ahead
    without some workers' models under --min-workers)."""
    reasons = []
    limit = settings.get("limit")
    if limit not in (None, 0):
        reasons.append(f"--limit {limit}")
    missing = metrics.get("missing_shards") or {}
    if isinstance(missing, Mapping):
        for round_number, shards in missing.items():
            if shards:
                listed = ", ".join(map(str, shards)) if isinstance(shards, list) else "some"
                reasons.append(f"round {round_number} without shard {listed}")
    return "; ".join(reasons)


def contender(
    run: str,
    accuracy: float | None,
    settings: Mapping[str, object],
    metrics: Mapping[str, object] | None,
) -> Contender:
    """What the decision needs to know of a run, from its card's settings and its metrics.json."""
    metrics = metrics or {}
    samples = metrics.get("test_samples")
    return Contender(
        run,
        accuracy,
        partial_reason(settings, metrics),
        str(metrics.get("test_sha256", "")),
        samples if isinstance(samples, int) else None,
    )


def decide(
    policy: str,
    ours: Contender,
    served: Contender | None,
    min_accuracy: float,
    max_drop: float,
) -> Verdict:
    """Whether `ours` replaces `served` (None: nothing valid is served) under `policy`."""
    if policy == "never":
        return Verdict(False, "--serve never")
    if policy == "always":
        return Verdict(True, "--serve always")
    if policy not in GATED:
        raise ValueError(f"not a serving policy: {policy!r}")
    if ours.accuracy is None:
        raise ValueError(f"{ours.run} has no test accuracy to judge")
    accuracy = f"its test accuracy {ours.accuracy:.4f}"
    if ours.accuracy < min_accuracy:
        return Verdict(False, f"{accuracy} is below --min-accuracy {min_accuracy}")
    if served is None:
        return Verdict(True, "no model was served")
    if incomparable := not_comparable(ours, served):
        return Verdict(False, f"{incomparable}; accuracies compare only on the same test digits")
    assert served.accuracy is not None  # not_comparable said so
    theirs = f"{served.run}'s {served.accuracy:.4f}"
    if ours.partial and not served.partial:
        return Verdict(
            False,
            f"it is a partial run ({ours.partial}) and LATEST serves a complete one, {served.run}",
        )
    if policy == "if-better":
        if ours.accuracy > served.accuracy:
            return Verdict(True, f"{accuracy} is above {theirs}")
        return Verdict(
            False, f"{accuracy} is not above {theirs}, which LATEST serves (--serve if-better)"
        )
    if ours.accuracy < served.accuracy - max_drop:
        return Verdict(
            False,
            f"{accuracy} is more than --max-accuracy-drop {max_drop} below {theirs}, which LATEST "
            "serves",
        )
    return Verdict(True, f"{accuracy} is within --max-accuracy-drop {max_drop} of {theirs}")


def not_comparable(ours: Contender, served: Contender) -> str:
    """Why the two runs' accuracies cannot be compared ('' when they can): the served one records no
    accuracy or test set, or the two were scored on different test digits."""
    if served.accuracy is None:
        return f"{served.run} has no recorded test accuracy"
    if not served.test_set:
        return f"{served.run}'s test set is not recorded"
    if not ours.test_set:
        return "its test set is not recorded"
    if ours.test_set != served.test_set:
        return (
            f"its test set ({ours.test_samples} digits) is not the one {served.run} was scored on "
            f"({served.test_samples} digits)"
        )
    return ""
