"""Federated averaging: the mean of the workers' weights, weighted by how many samples each trained on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def federated_average(
    weight_sets: Sequence[Sequence[np.ndarray]], sample_counts: Sequence[int]
) -> list[np.ndarray]:
    """Return the per-tensor weighted mean of `weight_sets` (one list of arrays per worker).

    Raises ValueError when the sets disagree in length or shapes, or the counts are not positive.
    """
    if not weight_sets:
        raise ValueError("nothing to average")
    if len(weight_sets) != len(sample_counts):
        raise ValueError(f"{len(weight_sets)} weight sets but {len(sample_counts)} sample counts")
    if any(count <= 0 for count in sample_counts):
        raise ValueError(f"sample counts must be positive, got {list(sample_counts)}")
    reference = [np.shape(tensor) for tensor in weight_sets[0]]
    for index, weights in enumerate(weight_sets[1:], start=1):
        shapes = [np.shape(tensor) for tensor in weights]
        if shapes != reference:
            raise ValueError(f"weight set {index} has shapes {shapes}, expected {reference}")
    shares = np.asarray(sample_counts, dtype=np.float64) / float(sum(sample_counts))
    return [
        sum(
            share * np.asarray(weights[layer], dtype=np.float64)
            for share, weights in zip(shares, weight_sets, strict=True)
        ).astype(np.asarray(weight_sets[0][layer]).dtype)
        for layer in range(len(reference))
    ]
