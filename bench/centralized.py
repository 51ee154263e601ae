"""Centralized training: the project's model in one process on all training digits, scored each epoch.

Prints one JSON line per epoch: test accuracy and the seconds spent scoring so far (not training time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.data import add_data_arguments, load
from steps.cli import positive_float, positive_int


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.centralized", description=__doc__)
    add_data_arguments(parser)
    parser.add_argument("--epochs", type=positive_int, required=True)
    parser.add_argument("--batch", type=positive_int, required=True)
    parser.add_argument("--learning-rate", type=positive_float, required=True)
    parser.add_argument("--seed", type=int, default=0, help="initialisation seed, as init's")
    return parser


def main(args: argparse.Namespace) -> None:
    train, test = load(args.source, args.limit)

    import keras

    from steps.model import EpochLogger, build_model, compile_model, to_inputs

    test_x = to_inputs(test.x)
    scoring = {"seconds": 0.0}

    class ScoreEachEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            started = time.monotonic()
            accuracy = self.model.evaluate(test_x, test.y, batch_size=1000, verbose=0)[1]
            scoring["seconds"] += time.monotonic() - started
            line = {"epoch": epoch + 1, "accuracy": accuracy, "scoring_seconds": scoring["seconds"]}
            print(json.dumps(line), flush=True)

    keras.utils.set_random_seed(args.seed)
    model = compile_model(build_model(), args.learning_rate)
    model.fit(
        to_inputs(train.x),
        train.y,
        epochs=args.epochs,
        batch_size=args.batch,
        verbose=0,
        callbacks=[EpochLogger(args.epochs), ScoreEachEpoch()],
    )


if __name__ == "__main__":
    from steps.cli import run

    sys.exit(run(main, parse_args()))
