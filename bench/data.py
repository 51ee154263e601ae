"""The benchmark's data: MNIST split as the pipeline's split step splits it (same function, same seed)."""

from __future__ import annotations

import argparse

from steps.lib import defaults
from steps.lib.arguments import add_source_argument, non_negative_int, positive_int, seed
from steps.lib.mnist import Digits, fetch_source, load_mnist
from steps.split import hold_out, split
from workflows.pipeline.settings import PipelineSettings


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_argument(parser)
    parser.add_argument(
        "--limit",
        type=non_negative_int,
        default=0,
        help="keep this many training digits, 0 = all (the same subset as the pipeline's --limit)",
    )
    parser.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="the pipeline's --seed: subset, shards and initial model",
    )


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """What each worker's training takes, as the pipeline's flags of the same names."""
    parser.add_argument("--epochs", type=positive_int, required=True)
    parser.add_argument("--batch", type=positive_int, required=True)


def iid_shards(
    train: Digits, workers: int, seed: int, limit: int, validation: int = defaults.VALIDATION
) -> list[Digits]:
    """The IID training shards the split step makes for `workers` (its own functions): what is left
    once its `validation` digits are held out, then split."""
    kept, _ = hold_out(train, validation, seed)
    return split(kept, workers, seed, limit, "iid", PipelineSettings().alpha)


def shards(source: str, workers: int, seed: int, limit: int) -> tuple[list[Digits], Digits]:
    """(the IID training shards split makes for `workers`, the 10000 test digits)."""
    train, test = load_mnist(fetch_source(source))
    return iid_shards(train, workers, seed, limit), test


def fit(model, digits: Digits, args: argparse.Namespace, callbacks: list) -> None:
    """Train `model` (a keras.Model) on `digits` for --epochs at --batch, quietly, with `callbacks`."""
    from steps.lib.keras_model import EpochLogger, training_batches

    model.fit(
        training_batches(digits, args.batch, args.seed),  # as the pipeline's trainers take theirs
        epochs=args.epochs,
        shuffle=False,
        verbose=0,
        callbacks=[EpochLogger(args.epochs), *callbacks],
    )
