"""Shards: how the training digits are dealt out to the workers (IID or label-skewed), and the shard
file (.npz with x and y) each worker reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from steps.lib.errors import StepError
from steps.lib.mnist import IMAGES, LABELS, NUM_CLASSES, Digits, check_digits
from steps.lib.npz import read_arrays
from steps.lib.staged_outputs import atomic_path

PARTITIONS = ("iid", "dirichlet")  # how training digits are dealt out to the shards


def read_shard(path: Path) -> Digits:
    """Read and validate a shard file (keys x, y)."""
    if not path.is_file():
        raise StepError(f"shard not found: {path}")
    arrays = read_arrays(path, {"x": IMAGES, "y": LABELS})
    return check_digits(arrays["x"], arrays["y"], str(path))


def save_shard(path: Path, digits: Digits) -> None:
    """Write a shard to `path` as it is (uncompressed: compressing full MNIST takes longer than the
    rest of split, and an uncompressed shard is read in a few milliseconds)."""
    np.savez(path, x=digits.x, y=digits.y)


def write_shard(path: Path, digits: Digits) -> None:
    """save_shard, atomically."""
    with atomic_path(path) as temporary:
        save_shard(temporary, digits)


def partition_iid(count: int, parts: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle 0..count-1 into `parts` index arrays whose sizes differ by at most one."""
    return [np.sort(part) for part in np.array_split(rng.permutation(count), parts)]


def partition_dirichlet(
    labels: np.ndarray, parts: int, alpha: float, rng: np.random.Generator, attempts: int = 100
) -> list[np.ndarray]:
    """Label-skewed shards: each class is spread over the parts in Dirichlet(alpha) proportions.

    Smaller alpha means more skew. Draws again (up to `attempts` times) until no part is empty.
    """
    for _ in range(attempts):
        buckets: list[list[np.ndarray]] = [[] for _ in range(parts)]
        for digit in range(NUM_CLASSES):
            members = rng.permutation(np.flatnonzero(labels == digit))
            shares = rng.dirichlet(np.full(parts, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(int)
            for bucket, piece in zip(buckets, np.split(members, cuts), strict=True):
                bucket.append(piece)
        result = [np.sort(np.concatenate(bucket)) for bucket in buckets]
        if all(len(part) for part in result):
            return result
    raise StepError(f"could not draw {parts} non-empty Dirichlet shards with alpha={alpha}")
