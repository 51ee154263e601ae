"""The pipeline's method in one process, for accuracy only: W workers train from the shared model on the
shards split makes, their weights are averaged (steps.lib.averaging, weighted by samples), round after round,
the learning rate stepping down over the rounds as the train step steps it (steps.lib.schedule).

For numbers of workers this machine cannot run as a pipeline (16 or 32 trainers on 2 cores), it gives the
accuracy a pipeline of W workers and R rounds would publish. The schedule depends on R, so each R of
--rounds is a run of its own; they are tried in order until one reaches --target. Each worker starts
from the round's average with a fresh Adam, seeded with its shard id as the train step seeds itself; its
random stream is not the step's bit for bit. Prints one JSON line per round.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.data import add_data_arguments, add_training_arguments, iid_shards
from steps.lib.arguments import positive_float, positive_int
from steps.lib.averaging import federated_average
from steps.lib.mnist import fetch_source, load_mnist
from steps.lib.schedule import round_learning_rate


def counts(text: str) -> list[int]:
    """argparse type: a comma-separated list of positive integers."""
    return [positive_int(part) for part in text.split(",") if part]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.fedavg", description=__doc__)
    add_data_arguments(parser)
    add_training_arguments(parser)
    parser.add_argument("--learning-rate", type=positive_float, required=True, help="in round 1")
    parser.add_argument(
        "--final-learning-rate", type=positive_float, required=True, help="in the last round"
    )
    parser.add_argument("--workers", type=counts, required=True, help="e.g. 1,4,8,16,32")
    parser.add_argument("--rounds", type=counts, required=True, help="the R to try, e.g. 2,4")
    parser.add_argument(
        "--target", type=positive_float, required=True, help="stop at this accuracy"
    )
    return parser


def main(args: argparse.Namespace) -> None:
    train, test = load_mnist(fetch_source(args.source))

    from steps.lib.keras_model import build_model, compile_model, keras, to_inputs, training_batches

    test_x = to_inputs(test.x)
    for workers in args.workers:
        parts = iid_shards(train, workers, args.seed, args.limit)
        keras.utils.set_random_seed(
            args.seed
        )  # the shared initial model, as the init step seeds it
        model = compile_model(build_model(), args.learning_rate)
        model.optimizer.build(model.trainable_variables)
        fresh_optimizer = [variable.numpy() for variable in model.optimizer.variables]
        initial = model.get_weights()
        for rounds in args.rounds:
            average = initial
            for round_number in range(1, rounds + 1):
                started = time.monotonic()
                rate = round_learning_rate(
                    args.learning_rate, args.final_learning_rate, round_number, rounds
                )
                trained = []
                for shard_id, part in enumerate(parts):
                    model.set_weights(average)
                    for variable, value in zip(
                        model.optimizer.variables, fresh_optimizer, strict=True
                    ):
                        variable.assign(value)
                    model.optimizer.learning_rate = rate
                    keras.utils.set_random_seed(shard_id)
                    model.fit(
                        training_batches(part, args.batch, shard_id),  # as trainer `shard_id`
                        epochs=args.epochs,
                        shuffle=False,
                        verbose=0,
                    )
                    trained.append(model.get_weights())
                average = federated_average(trained, [len(part) for part in parts])
                model.set_weights(average)
                accuracy = model.evaluate(test_x, test.y, batch_size=1000, verbose=0)[1]
                line = {
                    "workers": workers,
                    "rounds": rounds,
                    "round": round_number,
                    "accuracy": accuracy,
                    "seconds": round(time.monotonic() - started, 1),
                }
                print(json.dumps(line), flush=True)
            if accuracy >= args.target:
                break


if __name__ == "__main__":
    from steps.lib.entry_point import run

    sys.exit(run(main, make_parser()))
