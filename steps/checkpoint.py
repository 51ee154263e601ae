"""Per-epoch training checkpoints kept in the artifact store, so a retried trainer resumes, not restarts.

A checkpoint is one .npz (no pickles): the model's weights, the optimizer's state, how many epochs are
done, the last epoch's metrics, and a fingerprint of the inputs, so a checkpoint from other inputs is
never resumed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import keras
import numpy as np

from steps.cli import StepError
from steps.storage import ArtifactStore


def fingerprint(*parts: Path | str) -> str:
    """sha256 over files' bytes and strings: what a checkpoint must have been trained from."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.read_bytes() if isinstance(part, Path) else part.encode())
    return digest.hexdigest()


def save(model: keras.Model, epochs_done: int, logs: dict, inputs: str, path: Path) -> None:
    arrays = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    arrays |= {f"o{i}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
    meta = json.dumps({"epochs_done": epochs_done, "logs": logs, "inputs": inputs})
    np.savez(path, meta=np.array(meta), **arrays)


def restore(model: keras.Model, inputs: str, path: Path) -> tuple[int, dict] | None:
    """Load a checkpoint into a compiled `model`; (epochs done, last logs), or None if unusable."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["meta"]))
            if meta["inputs"] != inputs:
                return None
            weights = [archive[f"w{i}"] for i in range(len(model.get_weights()))]
            model.set_weights(weights)
            model.optimizer.build(model.trainable_variables)
            for i, variable in enumerate(model.optimizer.variables):
                variable.assign(archive[f"o{i}"])
            return int(meta["epochs_done"]), dict(meta["logs"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        print(f"ignoring an unreadable checkpoint ({error})", file=sys.stderr)
        return None


class StoreCheckpoint(keras.callbacks.Callback):
    """After each epoch, save a checkpoint and upload it to `key` in `store`."""

    def __init__(self, store: ArtifactStore, key: str, inputs: str) -> None:
        super().__init__()
        self.store, self.key, self.inputs = store, key, inputs

    def resume(self) -> tuple[int, dict] | None:
        """Restore the stored checkpoint into the model, if one exists for these inputs."""
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "checkpoint.npz"
            try:
                self.store.download_file(self.key, local)
            except StepError:  # none yet: a first attempt
                return None
            return restore(self.model, self.inputs, local)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "checkpoint.npz"
            save(
                self.model,
                epoch + 1,
                {k: float(v) for k, v in (logs or {}).items()},
                self.inputs,
                local,
            )
            self.store.upload_file(local, self.key)
        print(f"checkpoint saved after epoch {epoch + 1}", file=sys.stderr, flush=True)
