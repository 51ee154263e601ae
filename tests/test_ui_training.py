"""The card's training curves: a bounded number of points, thinned per worker, every round kept."""

from __future__ import annotations

import pytest

from steps.lib.history import MAX_HISTORY_BYTES
from tests.support.histories import compact, fullest_history, history_of, largest_run, points_in
from tests.support.page import TRAINING_HISTORY
from ui import training

METRICS = ("accuracy", "loss")


@pytest.fixture(scope="module")
def largest() -> dict:
    return largest_run()


@pytest.fixture(scope="module")
def fullest() -> dict:
    kept = fullest_history()
    assert len(compact(kept)) <= MAX_HISTORY_BYTES
    return kept


@pytest.mark.parametrize("which", ["largest", "fullest"])
def test_the_points_drawn_are_bounded_and_every_round_is_kept(
    request: pytest.FixtureRequest, which: str
) -> None:
    """The average's score after every round, and every worker in every round, at its round's end."""
    kept = request.getfixturevalue(which)
    for metric in METRICS:
        assert len(training.curve_points(kept, metric)) <= training.MAX_POINTS, metric
    points = training.curve_points(kept, "accuracy")
    average = points[points["line"] == training.AVERAGE]
    assert list(average["round"]) == [each["round"] for each in kept["rounds"]]
    workers = points[points["line"] != training.AVERAGE]
    drawn = set(zip(workers["round"], workers["line"], workers["epoch"], strict=True))
    end = 0
    for each in kept["rounds"]:
        end += each["epochs"]
        for shard in each["workers"]:
            assert (each["round"], f"worker {shard}", end) in drawn


def test_a_small_history_is_drawn_whole() -> None:
    points = training.curve_points(TRAINING_HISTORY, "loss")
    assert len(points) == points_in(TRAINING_HISTORY) // 2 + len(TRAINING_HISTORY["rounds"])


def test_a_thinned_worker_keeps_its_first_and_last_epoch_of_a_round() -> None:
    kept = history_of(2, 3, 1000)
    points = training.curve_points(kept, "loss")
    first = points[(points["line"] == "worker 0") & (points["round"] == 1)]
    assert {1, 1000} <= set(first["epoch"]) and len(first) < 1000


def test_with_fewer_points_than_rounds_the_average_keeps_every_round() -> None:
    """1000 rounds of 10 workers: a worker draws its last epoch in some rounds, the average all."""
    kept = history_of(1000, 10, 2)
    points = training.curve_points(kept, "loss")
    assert len(points) <= training.MAX_POINTS
    average = points[points["line"] == training.AVERAGE]
    assert list(average["round"]) == list(range(1, 1001))
    for shard in range(10):
        drawn = points[points["line"] == f"worker {shard}"]
        assert len(drawn) >= 250 and set(drawn["epoch"] % 2) == {0}  # each a round's last epoch


@pytest.mark.parametrize(("epochs", "quota"), [(30, 3), (30, 1), (30, 0), (2, 5), (1000, 19)])
def test_kept_epochs_are_within_the_quota_and_end_the_round(epochs: int, quota: int) -> None:
    kept = training.kept_epochs(epochs, quota)
    assert len(kept) == min(epochs, quota) and kept == sorted(set(kept))
    assert not kept or kept[-1] == epochs
