"""Centralized training: the project's model in one process on all the training digits, scored each epoch.

The baseline the pipeline's time to 99% is compared with: the same network (steps.lib.keras_model), Adam at the
given learning rate, seeded like the pipeline's run (its initial weights and its shuffling). Prints one
JSON line per epoch: the epoch, its test accuracy and the seconds spent scoring so far (taken off the
clock by the benchmark); stops after the first epoch at or above --target.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.data import add_data_arguments, add_training_arguments, fit, shards
from steps.lib.arguments import positive_float


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.centralized", description=__doc__)
    add_data_arguments(parser)
    add_training_arguments(parser)
    parser.add_argument("--learning-rate", type=positive_float, required=True)
    parser.add_argument(
        "--target", type=positive_float, required=True, help="stop at this accuracy"
    )
    return parser


def main(args: argparse.Namespace) -> None:
    (train,), test = shards(args.source, 1, args.seed, args.limit)

    from steps.lib.keras_model import build_model, compile_model, keras, to_inputs

    test_x = to_inputs(test.x)
    scoring = {"seconds": 0.0}

    class ScoreEachEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            started = time.monotonic()
            accuracy = self.model.evaluate(test_x, test.y, batch_size=1000, verbose=0)[1]
            scoring["seconds"] += time.monotonic() - started
            line = {"epoch": epoch + 1, "accuracy": accuracy, "scoring_seconds": scoring["seconds"]}
            print(json.dumps(line), flush=True)
            self.model.stop_training = accuracy >= args.target

    keras.utils.set_random_seed(args.seed)  # the initial weights and the shuffling
    model = compile_model(build_model(), args.learning_rate)
    fit(model, train, args, [ScoreEachEpoch()])


if __name__ == "__main__":
    from steps.lib.entry_point import run
    from steps.lib.tensorflow_setup import keep_out_unused_modules

    keep_out_unused_modules()  # as the pipeline's trainers do
    sys.exit(run(main, make_parser()))
