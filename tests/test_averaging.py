"""FedAvg: the weighted mean equals one computed by hand; unequal sample counts weigh as they should."""

from __future__ import annotations

import numpy as np
import pytest

from steps.averaging import federated_average


def test_equal_counts_give_the_plain_mean() -> None:
    a = [np.array([[1.0, 2.0]]), np.array([0.0])]
    b = [np.array([[3.0, 6.0]]), np.array([4.0])]
    mean = federated_average([a, b], [10, 10])
    np.testing.assert_allclose(mean[0], [[2.0, 4.0]])
    np.testing.assert_allclose(mean[1], [2.0])


def test_unequal_counts_weigh_by_samples() -> None:
    a = [np.array([0.0, 10.0], dtype=np.float32)]
    b = [np.array([4.0, 2.0], dtype=np.float32)]
    # by hand: (1 * a + 3 * b) / 4 = [3.0, 4.0]
    mean = federated_average([a, b], [100, 300])
    np.testing.assert_allclose(mean[0], [3.0, 4.0])
    assert mean[0].dtype == np.float32


def test_three_workers_by_hand() -> None:
    sets = [[np.full((2, 2), value)] for value in (1.0, 2.0, 6.0)]
    counts = [1, 2, 1]
    expected = (1 * 1.0 + 2 * 2.0 + 1 * 6.0) / 4
    np.testing.assert_allclose(federated_average(sets, counts)[0], np.full((2, 2), expected))


@pytest.mark.parametrize(
    ("sets", "counts", "message"),
    [
        ([], [], "nothing to average"),
        ([[np.zeros(2)], [np.zeros(3)]], [1, 1], "has shapes"),
        ([[np.zeros(2)], [np.zeros(2), np.zeros(1)]], [1, 1], "has shapes"),
        ([[np.zeros(2)]], [0], "positive"),
        ([[np.zeros(2)]], [1, 2], "sample counts"),
    ],
)
def test_mismatches_are_refused(sets, counts, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        federated_average(sets, counts)
