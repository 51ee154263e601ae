"""Split MNIST into N training shards, the digits held out of them to score each round, and the test set.

The held-out digits (--validation of them, a seeded draw from the training set before --limit applies) are in
no shard and never in the test set, so watching the rounds on them takes nothing from the final evaluation.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from steps.lib.arguments import (
    add_pipeline_flag,
    non_negative_int,
    positive_float,
    positive_int,
    seed,
)
from steps.lib.bounded_json import to_json
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.mnist import Digits, fetch_source, load_mnist
from steps.lib.shards import PARTITIONS, partition_dirichlet, partition_iid, save_shard
from steps.lib.staged_outputs import staged_outputs

SHARD_NAME = re.compile(r"^[0-9]+\.npz$")
HOLD_OUT_STREAM = 1  # the held-out digits' generator: seeded by (this, --seed)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.split", description=__doc__)
    add_pipeline_flag(
        parser, "--source", "mnist.npz as a URL, a gs:// URI or a path", shown="the Keras URL"
    )
    add_pipeline_flag(parser, "--workers", "number of shards", type=positive_int)
    add_pipeline_flag(parser, "--seed", "shuffling seed", type=seed)
    add_pipeline_flag(
        parser, "--limit", "keep only this many training samples, 0 = all", type=non_negative_int
    )
    add_pipeline_flag(
        parser,
        "--partition",
        "iid: uniform shards; dirichlet: label-skewed shards",
        choices=PARTITIONS,
    )
    add_pipeline_flag(
        parser, "--alpha", "Dirichlet concentration, smaller is more skewed", type=positive_float
    )
    add_pipeline_flag(
        parser,
        "--validation",
        "training digits held out of every shard to score each round on, 0 = none",
        type=non_negative_int,
    )
    parser.add_argument("--shards-dir", type=Path, required=True, help="where 0.npz … N-1.npz go")
    parser.add_argument("--test-out", type=Path, required=True, help="where test.npz goes")
    parser.add_argument(
        "--validation-out", type=Path, help="where the held-out digits go (.npz, as a shard)"
    )
    parser.add_argument("--ids-out", type=Path, help="also write the JSON list of shard ids here")
    parser.add_argument(
        "--sizes-out",
        type=Path,
        help="also write each shard's digit count here, a JSON object {id: count}: aggregate "
        "weighs the workers' models by it (not by what each worker says it trained on)",
    )
    return parser


def hold_out(train: Digits, count: int, seed: int) -> tuple[Digits, Digits]:
    """(the training digits left, `count` digits drawn from them for validation), the same for a seed.

    Drawn with a generator of its own, so the shards' draw from `seed` stays what it is without it.
    """
    if count >= len(train):
        raise StepError(f"--validation {count} leaves no training digits of the {len(train)}")
    if not count:
        return train, train.take(np.arange(0))
    held = np.zeros(len(train), dtype=bool)
    held[np.random.default_rng([HOLD_OUT_STREAM, seed]).permutation(len(train))[:count]] = True
    return train.take(np.flatnonzero(~held)), train.take(np.flatnonzero(held))


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


def check_replaceable(folder: Path) -> None:
    """Refuse to replace anything but a missing or empty folder, or one holding only shards."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise StepError(f"--shards-dir {folder} is a file")
    try:
        foreign = sorted(
            entry.name
            for entry in folder.iterdir()
            if not (SHARD_NAME.match(entry.name) and entry.is_file() and not entry.is_symlink())
        )
    except OSError as error:
        raise StepError(f"cannot read --shards-dir {folder}: {error.strerror}") from None
    if foreign:
        raise StepError(
            f"--shards-dir {folder} holds files that are not shards ({', '.join(foreign[:5])}); "
            "it is replaced as a whole, so give an empty or new folder"
        )


def main(args: argparse.Namespace) -> None:
    check_replaceable(args.shards_dir)
    if args.validation_out and not args.validation:
        raise StepError("--validation-out needs digits to hold out: --validation is 0")
    for other in filter(None, (args.test_out, args.ids_out, args.sizes_out, args.validation_out)):
        if other.resolve().is_relative_to(args.shards_dir.resolve()):
            raise StepError(f"{other} is inside --shards-dir {args.shards_dir}")
    with staged_outputs() as outputs:  # all three appear together, or none does
        folder = outputs.folder(args.shards_dir)
        test_out = outputs.file(args.test_out)
        ids_out = outputs.file(args.ids_out) if args.ids_out else None
        sizes_out = outputs.file(args.sizes_out) if args.sizes_out else None
        validation_out = outputs.file(args.validation_out) if args.validation_out else None
        train, test = load_mnist(fetch_source(args.source))
        train, held = hold_out(train, args.validation, args.seed)
        shards = split(train, args.workers, args.seed, args.limit, args.partition, args.alpha)
        ids = to_json(list(range(len(shards))))
        for index, shard in enumerate(shards):
            save_shard(folder / f"{index}.npz", shard)
        save_shard(test_out, test)
        if validation_out:
            save_shard(validation_out, held)
        if ids_out:
            ids_out.write_text(ids)
        if sizes_out:
            sizes_out.write_text(to_json({str(i): len(shard) for i, shard in enumerate(shards)}))
    sizes = ", ".join(str(len(shard)) for shard in shards)
    print(  # for the person watching the run
        f"{sum(map(len, shards))} training digits in {len(shards)} shards ({sizes}), "
        f"{f'{len(held)} held out to score each round' if len(held) else 'none held out'}; "
        f"{len(test)} test digits"
    )


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
