"""The network in Keras, for training (train, and the benchmark's contenders): built from
steps.lib.architecture's declaration, compiled with Adam, fed shuffled batches, loaded from a model file
whose weights steps.lib.model_file has checked and written back whole, with train's epoch and progress
callbacks. The steps that do not train, and the page, never load it (nor TensorFlow)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np

from steps.lib.architecture import INPUT_SHAPE, LAYERS, MODEL_NAME
from steps.lib.errors import StepError
from steps.lib.history import add_epoch, no_epochs
from steps.lib.mnist import PIXEL_MAX, Digits
from steps.lib.model_file import check_finite, read_weights
from steps.lib.progress import ProgressFile
from steps.lib.staged_outputs import atomic_path
from steps.lib.tensorflow_setup import import_keras

if TYPE_CHECKING:  # the names for the type checker; at run time Keras is loaded quietly, once
    import keras
    import tensorflow as tf
else:
    keras = import_keras()

# Training steps per call from Python into TensorFlow's graph: Keras runs them in one loop inside the
# graph, so its per-step Python work (about 1 ms a step on one core, an eighth of a step of batch 100)
# is paid once per call. The steps and their numbers are the same; callbacks see every STEPS_PER_CALL-th
# batch.
STEPS_PER_CALL = 50


def build_model() -> keras.Model:
    """steps.lib.architecture's network as a fresh Keras model (tests/test_init.py checks that Keras
    writes the model_config declared there)."""
    layers = [getattr(keras.layers, kind)(**arguments) for kind, arguments in LAYERS]
    return keras.Sequential([keras.Input(shape=INPUT_SHAPE), *layers], name=MODEL_NAME)


def compile_model(model: keras.Model, learning_rate: float) -> keras.Model:
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=STEPS_PER_CALL,
    )
    return model


def to_inputs(images: np.ndarray) -> np.ndarray:
    """uint8 images (n, 28, 28) → float32 (n, 28, 28, 1) in [0, 1]."""
    return (images.astype("float32") / np.float32(PIXEL_MAX))[..., np.newaxis]


def training_batches(digits: Digits, batch: int, seed: int) -> tf.data.Dataset:
    """The digits as `model.fit` takes them: `batch` at a time, in a new seeded order each epoch,
    scaled as `to_inputs` scales them.

    The images stay uint8 and each batch is scaled as it is drawn, so no float copy of the whole shard
    is made before training starts. The pipeline runs on one thread without autotuning: the one Keras
    builds for numpy arrays (a parallel map, an autotuned prefetch) starts threads that, with several
    trainers sharing the cores, slowed them unevenly and held `fit` up to 2 s after its last epoch.
    """
    import tensorflow as tf  # loaded with keras above

    images, labels = tf.constant(digits.x), tf.constant(digits.y)

    def scaled(indices: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pixels = tf.cast(tf.gather(images, indices), tf.float32) / PIXEL_MAX
        return pixels[..., tf.newaxis], tf.gather(labels, indices)

    options = tf.data.Options()
    options.autotune.enabled = False
    options.threading.private_threadpool_size = 1
    return (
        tf.data.Dataset.range(len(digits))
        .shuffle(len(digits), seed=seed, reshuffle_each_iteration=True)
        .batch(batch)
        .map(scaled)
        .prefetch(1)
        .with_options(options)
    )


def load_model(path: Path) -> keras.Model:
    """Rebuild the known architecture and set `path`'s weights into it; never trust the file's layers.

    The file is checked (layout, storage, finite values) by steps.lib.model_file before a weight is read.
    """
    if not Path(path).is_file():
        raise StepError(f"model not found: {path}")
    model = build_model()
    model.set_weights(read_weights(Path(path)))
    return model


def save_model(model: keras.Model, path: Path) -> None:
    """Write a full Keras HDF5 model (architecture + weights) atomically; refuse non-finite weights."""
    with atomic_path(Path(path)) as temporary:
        write_model(model, temporary)


def diverged(metrics: dict[str, float], model: keras.Model) -> bool:
    """Whether training diverged: a metric or a weight is NaN or infinite. Which of the two goes first
    depends on the CPU's rounding, so either counts the same (one message, whichever path)."""
    return not all(np.isfinite(value) for value in metrics.values()) or not all(
        np.isfinite(weight).all() for weight in model.get_weights()
    )


def write_model(model: keras.Model, path: Path) -> None:
    """Write a full Keras HDF5 model to `path` (a .h5 name); refuse non-finite weights."""
    check_finite(model.get_weights(), f"model for {path} (training diverged?)")
    model.save(path)


class EpochLogger(keras.callbacks.Callback):
    """One line per epoch, readable in a pod's log (on stderr unless `stream` says), and each epoch's
    loss and accuracy kept in `history` (steps.lib.history's columns; a resumed trainer puts those of
    the epochs done before in first)."""

    def __init__(self, epochs: int, stream: TextIO | None = None) -> None:
        super().__init__()
        self.epochs = epochs
        self.stream = stream
        self.started = time.monotonic()
        self.history = no_epochs()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.started = time.monotonic()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        metrics = " ".join(f"{name} {value:.4f}" for name, value in logs.items())
        elapsed = time.monotonic() - self.started
        if {"loss", "accuracy"} <= set(logs):
            add_epoch(self.history, logs)
        print(
            f"epoch {epoch + 1}/{self.epochs}: {metrics} ({elapsed:.1f} s)",
            file=self.stream or sys.stderr,
            flush=True,
        )


class BatchProgress(keras.callbacks.Callback):
    """Counts training batches done into a ProgressFile (Argo's self-reported progress).

    Keras calls back once per call of STEPS_PER_CALL batches, with the index in the epoch of the call's
    last batch as if the call were full (keras/src/trainers/epoch_iterator.py), even when the epoch
    ended before it was.
    """

    def __init__(self, progress: ProgressFile, batches_per_epoch: int) -> None:
        super().__init__()
        self.progress = progress
        self.batches_per_epoch = batches_per_epoch
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        done_in_epoch = min(batch + 1, self.batches_per_epoch)
        self.progress.advance_to(self.epoch * self.batches_per_epoch + done_in_epoch)

    def on_train_end(self, logs: dict | None = None) -> None:
        self.progress.finish()
