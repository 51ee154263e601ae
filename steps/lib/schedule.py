"""The learning rate across rounds: geometric steps from the first round's to the last round's."""

from __future__ import annotations

import math


def round_learning_rate(first: float, final: float, round_number: int, rounds: int) -> float:
    """Adam's step size in round `round_number` of `rounds` (both from 1): `first` in round 1, `final` in
    the last, geometric steps between. A run of one round covers the whole schedule at once, so it trains
    at the schedule's middle, sqrt(first x final)."""
    if rounds <= 1:
        return math.sqrt(first * final)
    share = (round_number - 1) / (rounds - 1)
    return first * (final / first) ** share
