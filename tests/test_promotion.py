"""The --serve policy's rules (steps.lib.promotion), judged on what two runs' cards and metrics say."""

from __future__ import annotations

import pytest

from steps.lib.promotion import Contender, decide

MNIST = "5" * 64  # a test set's sha256


def contender(
    run: str, accuracy: float | None, partial: str = "", test_set: str = MNIST
) -> Contender:
    return Contender(run, accuracy, partial, test_set, 10_000)


def test_a_partial_run_may_replace_a_worse_partial_one() -> None:
    served = contender("mnist-a", 0.90, "--limit 3000")
    assert decide("if-better", contender("mnist-b", 0.92, "--limit 6000"), served, 0.5, 0.05).served
    assert not decide(
        "if-better", contender("mnist-c", 0.95, "--limit 50"), None, 0.96, 0.05
    ).served


@pytest.mark.parametrize(
    ("served", "why"),
    [
        (contender("mnist-old", 0.90, test_set=""), "mnist-old's test set is not recorded"),
        (contender("mnist-old", None), "mnist-old has no recorded test accuracy"),
        (contender("mnist-old", 0.90, test_set="6" * 64), "is not the one mnist-old was scored on"),
    ],
)
def test_only_scores_on_one_recorded_test_set_are_compared(served: Contender, why: str) -> None:
    """A served run whose test set or score is not recorded is not "no model served": under if-better
    and if-not-worse nothing replaces it; always still does."""
    ours = contender("mnist-new", 0.99)
    for policy in ("if-better", "if-not-worse"):
        verdict = decide(policy, ours, served, 0.5, 0.05)
        assert not verdict.served and why in verdict.reason, verdict
    assert decide("always", ours, served, 0.5, 0.05).served
    assert decide("if-better", ours, contender("mnist-old", 0.90), 0.5, 0.05).served
