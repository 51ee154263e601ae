"""FedAvg: the weighted mean equals one computed by hand; unequal sample counts weigh as they should."""

from __future__ import annotations

import numpy as np
import pytest

from steps.lib.averaging import federated_average


def test_each_layer_is_averaged_with_the_same_shares_of_unequal_counts() -> None:
    """A share is a worker's count over the total, for every layer alike (never the first layer's only)."""
    a = [np.array([2.0, 0.0], np.float32), np.array([10.0]), np.array([0.0])]
    b = [np.array([8.0, 6.0], np.float32), np.array([40.0]), np.array([9.0])]
    mean = federated_average([a, b], [200, 100])
    np.testing.assert_allclose(mean[0], [4.0, 2.0])
    np.testing.assert_allclose([m[0] for m in mean[1:]], [20.0, 3.0])
    assert mean[0].dtype == np.float32


GOOD = [np.zeros((2, 3)), np.zeros(3)]


@pytest.mark.parametrize(
    ("sets", "counts", "message"),
    [
        ([], [], "nothing to average"),
        (
            [GOOD, GOOD, [np.zeros((3, 2)), np.zeros(3)], GOOD],
            [1, 1, 1, 1],
            "weight set 2 has shapes [(3, 2), (3,)], expected [(2, 3), (3,)]",
        ),
        ([GOOD, GOOD], [1], "2 weight sets but 1 sample counts"),
        ([GOOD, GOOD], [5, 0], "sample counts must be positive, got [5, 0]"),
        ([GOOD, GOOD], [0, 5], "sample counts must be positive, got [0, 5]"),
        ([GOOD, GOOD], [-3, 4], "sample counts must be positive, got [-3, 4]"),
    ],
)
def test_mismatches_and_counts_below_one_are_refused(sets, counts, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        federated_average(sets, counts)
    assert str(raised.value) == message


def test_one_worker_is_its_own_average_in_its_own_dtype() -> None:
    weights = [np.array([[0.1, -2.5]], dtype=np.float32), np.array([7], dtype=np.int64)]
    mean = federated_average([weights], [37])
    assert [tensor.dtype for tensor in mean] == [np.float32, np.int64]
    np.testing.assert_array_equal(mean[0], weights[0])
    np.testing.assert_array_equal(mean[1], weights[1])


def test_each_mean_keeps_the_first_sets_dtype() -> None:
    first = [np.array([1.0, 2.0], np.float32)]
    last = [np.array([3.0, 4.0], np.float64)]
    (mean,) = federated_average([first, last], [1, 1])
    assert mean.dtype == np.float32 and np.array_equal(mean, [2.0, 3.0])
    (mean,) = federated_average([last, first], [1, 1])
    assert mean.dtype == np.float64
