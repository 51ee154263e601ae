"""Split MNIST into N training shards plus the test set, and print the shard ids as a JSON list."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from steps.cli import StepError, atomic_dir, non_negative_int, positive_float, positive_int, run
from steps.cli import write_text as write_text_file
from steps.dataset import (
    KERAS_MNIST_URL,
    Digits,
    fetch_source,
    load_mnist,
    partition_dirichlet,
    partition_iid,
    write_shard,
)


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.split", description=__doc__)
    parser.add_argument(
        "--source",
        default=KERAS_MNIST_URL,
        help="mnist.npz as a URL, a gs:// URI or a path (default: the Keras URL)",
    )
    parser.add_argument("--workers", type=positive_int, required=True, help="number of shards")
    parser.add_argument("--seed", type=int, default=0, help="shuffling seed (default: 0)")
    parser.add_argument(
        "--limit",
        type=non_negative_int,
        default=0,
        help="keep only this many training samples, 0 = all (default: 0)",
    )
    parser.add_argument(
        "--partition",
        choices=("iid", "dirichlet"),
        default="iid",
        help="iid: uniform shards; dirichlet: label-skewed shards (default: iid)",
    )
    parser.add_argument(
        "--alpha",
        type=positive_float,
        default=0.5,
        help="Dirichlet concentration, smaller is more skewed (default: 0.5)",
    )
    parser.add_argument("--shards-dir", type=Path, required=True, help="where 0.npz … N-1.npz go")
    parser.add_argument("--test-out", type=Path, required=True, help="where test.npz goes")
    parser.add_argument("--ids-out", type=Path, help="also write the JSON list of shard ids here")
    return parser


def split(
    train: Digits, workers: int, seed: int, limit: int, partition: str, alpha: float
) -> list[Digits]:
    """Shard `train` into `workers` parts (after keeping the first `limit` of a seeded shuffle)."""
    rng = np.random.default_rng(seed)
    if limit:
        train = train.take(np.sort(rng.permutation(len(train))[:limit]))
    if workers > len(train):
        raise StepError(f"--workers {workers} is more than the {len(train)} training samples")
    if partition == "dirichlet":
        parts = partition_dirichlet(train.y, workers, alpha, rng)
    else:
        parts = partition_iid(len(train), workers, rng)
    return [train.take(indices) for indices in parts]


def main(args: argparse.Namespace) -> None:
    train, test = load_mnist(fetch_source(args.source))
    shards = split(train, args.workers, args.seed, args.limit, args.partition, args.alpha)
    with atomic_dir(args.shards_dir) as folder:
        for index, shard in enumerate(shards):
            write_shard(folder / f"{index}.npz", shard)
        write_shard(args.test_out, test)
    ids = json.dumps(list(range(len(shards))))
    if args.ids_out:
        write_text_file(args.ids_out, ids)
    sizes = ", ".join(str(len(shard)) for shard in shards)
    print(
        f"split {sum(map(len, shards))} samples into {len(shards)} shards ({sizes}); "
        f"{len(test)} test samples",
        file=sys.stderr,
    )
    print(ids)


if __name__ == "__main__":
    sys.exit(run(main, parse_args()))
