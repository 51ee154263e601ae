"""The baseline: the method of the system this project replaces. Its CNN, each worker from its own random
initial weights, one unweighted average of the workers' models at the end.

The network is Keras' classic mnist_cnn example as the replaced system used it (Conv32-Conv64-MaxPool-
Dropout 0.25-Dense128-Dropout 0.5-Dense10) with Adadelta at the tf.keras 1.x defaults (learning rate 1.0,
rho 0.95). Workers train one after another in this process on the IID shards the split step makes.
Prints one JSON line: each worker's test accuracy (scored after training), the averaged model's, and the
seconds all that scoring took.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from bench.data import add_data_arguments, add_training_arguments, fit, shards
from steps.lib.arguments import positive_int
from steps.lib.mnist import IMAGE_SHAPE, NUM_CLASSES


def build_baseline_model():  # -> keras.Model (keras is imported lazily, as in the steps)
    """The replaced system's network, compiled as it compiled it."""
    import keras

    model = keras.Sequential(
        [
            keras.Input(shape=(*IMAGE_SHAPE, 1)),
            keras.layers.Conv2D(32, kernel_size=3, activation="relu"),
            keras.layers.Conv2D(64, kernel_size=3, activation="relu"),
            keras.layers.MaxPooling2D(pool_size=2),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(NUM_CLASSES, activation="softmax"),
        ],
        name="baseline_mnist_cnn",
    )
    model.compile(
        optimizer=keras.optimizers.Adadelta(learning_rate=1.0, rho=0.95, epsilon=1e-7),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def unweighted_average(weight_sets: list[list[np.ndarray]]) -> list[np.ndarray]:
    """The replaced system's aggregator: the plain mean of each tensor over the workers."""
    return [np.mean(np.stack(tensors), axis=0) for tensors in zip(*weight_sets, strict=True)]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline_method", description=__doc__)
    add_data_arguments(parser)
    add_training_arguments(parser)
    parser.add_argument("--workers", type=positive_int, required=True)
    return parser


def main(args: argparse.Namespace) -> None:
    parts, test = shards(args.source, args.workers, args.seed, args.limit)

    import keras

    from steps.lib.keras_model import to_inputs

    test_x = to_inputs(test.x)
    scoring = {"seconds": 0.0}

    def test_accuracy(model: keras.Model) -> float:
        started = time.monotonic()
        accuracy = model.evaluate(test_x, test.y, batch_size=1000, verbose=0)[1]
        scoring["seconds"] += time.monotonic() - started
        return accuracy

    weight_sets, worker_accuracies = [], []
    for index, shard in enumerate(parts):
        keras.utils.set_random_seed(1000 * (args.seed + 1) + index)  # no shared starting model
        model = build_baseline_model()
        fit(model, shard, args, [])
        worker_accuracies.append(test_accuracy(model))
        weight_sets.append(model.get_weights())
    model.set_weights(unweighted_average(weight_sets))
    line = {
        "accuracy": test_accuracy(model),
        "worker_accuracies": worker_accuracies,
        "scoring_seconds": scoring["seconds"],
    }
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    from steps.lib.entry_point import run

    sys.exit(run(main, make_parser()))
