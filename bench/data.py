"""The benchmark's data: the full MNIST (or a seeded subset of its training digits), as model inputs."""

from __future__ import annotations

import argparse

import numpy as np

from steps.cli import non_negative_int
from steps.dataset import Digits, fetch_source, load_mnist


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="mnist.npz: path, URL or gs:// URI")
    parser.add_argument(
        "--limit",
        type=non_negative_int,
        default=0,
        help="keep this many training digits, 0 = all (the same subset as split's --limit)",
    )


def load(source: str, limit: int) -> tuple[Digits, Digits]:
    """(train, test); with `limit`, the same seeded subset the split step keeps (seed 0)."""
    train, test = load_mnist(fetch_source(source))
    if limit:
        rng = np.random.default_rng(0)
        train = train.take(np.sort(rng.permutation(len(train))[:limit]))
    return train, test
