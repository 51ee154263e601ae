"""Per-epoch training checkpoints kept in the artifact store, so a retried trainer resumes, not restarts.

A checkpoint is one .npz (no pickles): the model's weights, the optimizer's state, and a JSON record
(`meta`, a text scalar) of how many epochs are done, the last epoch's metrics, each epoch's loss,
accuracy and seconds (steps.lib.history's columns; a record without them resumes, and the trainer then
cannot say its epochs), and a fingerprint of the inputs, so a checkpoint from other inputs is never
resumed. It lives in a store others can write to, so
it is read like any untrusted file: declared shapes checked before reading, fields typed and ranged,
values finite. One that fails any check is ignored with a warning line, and training starts over.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from steps.lib.bounded_json import is_number, parse_json, to_json
from steps.lib.errors import ArtifactNotFound, StepError
from steps.lib.history import check_epochs
from steps.lib.keras_model import diverged
from steps.lib.npz import ArraySpec, read_arrays
from steps.lib.storage import ArtifactStore
from steps.lib.tensorflow_setup import import_keras

if TYPE_CHECKING:  # the names for the type checker; at run time Keras is loaded quietly, once
    import keras
else:
    keras = import_keras()

MAX_RECORD_CHARS = 16 << 10
RECORD = ArraySpec(None, (), kind="U", max_itemsize=4 * MAX_RECORD_CHARS)
METRICS = ("loss", "accuracy")  # what training logs, and all a checkpoint's record may carry


@dataclass(frozen=True)
class Checkpoint:
    epochs_done: int
    logs: dict[str, float]
    weights: list[np.ndarray]
    optimizer: list[np.ndarray]
    history: dict[str, list[float]] | None = None  # each epoch done, when the record holds them


def fingerprint(*parts: Path | str) -> str:
    """sha256 over files' bytes and strings: what a checkpoint must have been trained from."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.read_bytes() if isinstance(part, Path) else part.encode())
    return digest.hexdigest()


def _specs(arrays: list, prefix: str) -> dict[str, ArraySpec]:
    return {
        f"{prefix}{i}": ArraySpec(np.dtype(array.dtype), tuple(array.shape))
        for i, array in enumerate(arrays)
    }


def save(
    model: keras.Model,
    epochs_done: int,
    logs: dict,
    inputs: str,
    path: Path,
    history: dict[str, list[float]] | None = None,
) -> None:
    arrays = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    arrays |= {f"o{i}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
    record: dict = {"epochs_done": epochs_done, "logs": logs, "inputs": inputs}
    if history is not None:
        record["history"] = history
    np.savez(path, meta=np.array(to_json(record)), **arrays)


def read(
    path: Path,
    inputs: str,
    epochs: int,
    weights: dict[str, ArraySpec],
    optimizer: dict[str, ArraySpec],
) -> Checkpoint:
    """Read and check the checkpoint at `path` for these inputs; StepError saying why it is unusable."""
    record = parse_json(str(read_arrays(path, {"meta": RECORD})["meta"]), "its record")
    if not isinstance(record, dict):
        raise StepError("its record is not a JSON object")
    if record.get("inputs") != inputs:
        raise StepError("it was made from other inputs or settings")
    done = record.get("epochs_done")
    if type(done) is not int or not 1 <= done <= epochs:
        raise StepError(f"epochs_done must be an integer in 1..{epochs}, got {str(done)[:40]}")
    logs = record.get("logs")
    if not isinstance(logs, dict) or not set(logs) <= set(METRICS):
        raise StepError(f"logs must be an object of {', '.join(METRICS)}")
    if not all(is_number(v) and v >= 0 for v in logs.values()):
        raise StepError("logs must hold finite, non-negative numbers")
    history = record.get("history")
    if history is not None:
        history = check_epochs(history, "its history", done)
    arrays = read_arrays(path, weights | optimizer)
    if not all(np.isfinite(array).all() for array in arrays.values()):
        raise StepError("it holds NaN or infinite values")
    return Checkpoint(
        done,
        {name: float(value) for name, value in logs.items()},
        [arrays[key] for key in weights],
        [arrays[key] for key in optimizer],
        history,
    )


def restore(model: keras.Model, inputs: str, epochs: int, path: Path) -> Checkpoint | None:
    """Load a checkpoint into a compiled `model` and return it, or None if it is unusable."""
    model.optimizer.build(model.trainable_variables)
    try:
        checkpoint = read(
            path,
            inputs,
            epochs,
            _specs(model.get_weights(), "w"),
            _specs([np.asarray(v) for v in model.optimizer.variables], "o"),
        )
    except StepError as error:
        print(f"ignoring the stored checkpoint: {error}", file=sys.stderr, flush=True)
        return None
    model.set_weights(checkpoint.weights)
    for variable, value in zip(model.optimizer.variables, checkpoint.optimizer, strict=True):
        variable.assign(value)
    return checkpoint


class StoreCheckpoint(keras.callbacks.Callback):
    """After each epoch, save a checkpoint and upload it to `key` in `store`, with the epochs'
    columns `history` holds then (the trainer's own, filled by its EpochLogger), or None."""

    def __init__(
        self,
        store: ArtifactStore,
        key: str,
        inputs: str,
        epochs: int,
        history: Callable[[], dict[str, list[float]] | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.store, self.key, self.inputs, self.epochs = store, key, inputs, epochs
        self.history = history

    def resume(self) -> Checkpoint | None:
        """Restore the stored checkpoint into the model, if a usable one exists for these inputs."""
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "checkpoint.npz"
            try:
                self.store.download_file(self.key, local)
            except ArtifactNotFound:  # none yet: a first attempt
                return None
            return restore(self.model, self.inputs, self.epochs, local)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        metrics = {k: float(v) for k, v in (logs or {}).items() if k in METRICS}
        if diverged(metrics, self.model):  # nothing worth resuming: the trainer says why, once
            self.model.stop_training = True
            return
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "checkpoint.npz"
            save(self.model, epoch + 1, metrics, self.inputs, local, self.history())
            self.store.upload_file(local, self.key)
        print(f"checkpoint saved after epoch {epoch + 1}", file=sys.stderr, flush=True)
