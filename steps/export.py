"""Export a model of this project to the formats other tools load: `model.keras` (Keras 3), a TensorFlow
SavedModel (`saved_model/`, for TensorFlow Serving and tf.saved_model.load) and `model.tflite` (LiteRT, for
phones and small devices), each loaded back and checked to pick the same digit as the model does on every
MNIST test digit.

The model file is untrusted: it is checked against the known architecture with h5py
(steps.lib.model_file) and only its weights are read, into the network this project builds
(steps.lib.keras_model); its layers are never deserialised. The three are written under temporary names in
--out-dir and renamed into place only once all three passed the check: exit 1 and one line if one picks
another digit for any test digit, exit 2 and one line for bad input. It runs in the train image (it needs
TensorFlow); the pipeline does not run it (docs/steps.md says why).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from steps.lib.arguments import add_source_argument
from steps.lib.entry_point import run
from steps.lib.errors import ProjectError, StepError
from steps.lib.mnist import fetch_source, load_mnist
from steps.lib.model_file import MAX_MODEL_BYTES, read_weights
from steps.lib.registry import LATEST_KEY, MODEL_FILE, latest_run, run_prefix
from steps.lib.staged_outputs import staged_outputs
from steps.lib.storage import ArtifactStore, GCSStore, open_store, split_gs_uri

KERAS_FILE, SAVED_MODEL, TFLITE_FILE = "model.keras", "saved_model", "model.tflite"
BATCH = 1000  # test digits per call of a loaded model
EXIT_MISMATCH = 1


class ExportMismatch(ProjectError):
    """An exported model picks another digit than the model itself for some test digit."""


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.export", description=__doc__)
    parser.add_argument(
        "--model",
        required=True,
        help="the model: a .h5 file (a path or a gs:// URI), or a store (a folder or "
        f"gs://bucket[/prefix]) or its {LATEST_KEY}, for the model LATEST names",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        required=True,
        help=f"where {KERAS_FILE}, {SAVED_MODEL}/ and {TFLITE_FILE} go (replacing them)",
    )
    add_source_argument(parser)  # the test digits every format is checked on
    return parser


def model_file(text: str, folder: Path) -> Path:
    """The model `text` names as a file on this machine (a copy in `folder` when it is in a store),
    read no further than MAX_MODEL_BYTES."""
    pointer = text.rstrip("/").endswith(LATEST_KEY)
    if not pointer and (Path(text).is_file() or (text.endswith(".h5") and "://" not in text)):
        return Path(text)
    if not pointer and text.endswith(".h5"):
        bucket, key = split_gs_uri(text)
        store: ArtifactStore = GCSStore(bucket)
    else:
        store = open_store(text.rstrip("/").removesuffix(LATEST_KEY).rstrip("/") or ".")
        run_id = latest_run(store)
        if run_id is None:
            raise StepError(f"--model {text}: no model is published there (no {LATEST_KEY})")
        key = f"{run_prefix(run_id)}/{MODEL_FILE}"
    data = store.read_head(key, MAX_MODEL_BYTES)
    if data is None:
        raise StepError(f"model not found: {store.uri}/{key}")
    if len(data) > MAX_MODEL_BYTES:
        raise StepError(f"{store.uri}/{key}: larger than {MAX_MODEL_BYTES} bytes, not a model")
    local = folder / MODEL_FILE
    local.write_bytes(data)
    return local


def check_same(reference: np.ndarray, predicted: np.ndarray, name: str) -> None:
    """ExportMismatch unless `predicted` picks the digit `reference` does for every test digit."""
    differ = np.flatnonzero(reference != predicted)
    if len(differ):
        first = differ[0]
        raise ExportMismatch(
            f"{name} picks another digit than the model for {len(differ)} of {len(reference)} "
            f"test digits (the first: test digit {first}, {predicted[first]} for "
            f"{reference[first]}); nothing was written"
        )


def in_batches(predict: Callable[[np.ndarray], np.ndarray], images: np.ndarray) -> np.ndarray:
    """The digit `predict` picks for each image, BATCH images at a time."""
    parts = [predict(images[start : start + BATCH]) for start in range(0, len(images), BATCH)]
    return np.concatenate(parts).argmax(axis=1)


def save_keras(model, path: Path) -> None:
    model.save(path)  # the Keras 3 format: the architecture as JSON and the weights, zipped


def predict_keras(path: Path, images: np.ndarray) -> np.ndarray:
    from steps.lib.keras_model import keras

    loaded = keras.models.load_model(path)  # the file this process has just written
    return in_batches(lambda batch: loaded.predict(batch, verbose=0), images)


def save_saved_model(model, path: Path) -> None:
    model.export(path, format="tf_saved_model", verbose=False)  # its endpoint: `serve`


def predict_saved_model(path: Path, images: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    return in_batches(lambda batch: loaded.serve(batch).numpy(), images)


def save_tflite(saved_model: Path, path: Path) -> None:
    import tensorflow as tf

    path.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved_model)).convert())


def predict_tflite(path: Path, images: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    with warnings.catch_warnings():  # tf.lite.Interpreter's notice that LiteRT will replace it
        warnings.simplefilter("ignore", UserWarning)
        interpreter = tf.lite.Interpreter(model_path=str(path))
    (given,), (answer,) = interpreter.get_input_details(), interpreter.get_output_details()

    def predict(batch: np.ndarray) -> np.ndarray:
        interpreter.resize_tensor_input(given["index"], list(batch.shape))
        interpreter.allocate_tensors()
        interpreter.set_tensor(given["index"], batch)
        interpreter.invoke()
        return interpreter.get_tensor(answer["index"])

    return in_batches(predict, images)


def main(args: argparse.Namespace) -> None:
    if args.out_dir.exists() and not args.out_dir.is_dir():
        raise StepError(f"--out-dir {args.out_dir} is a file")
    with tempfile.TemporaryDirectory(prefix="mnist-export-") as folder:
        source = model_file(args.model, Path(folder))
        weights = read_weights(source)  # checked before TensorFlow loads
        _, test = load_mnist(fetch_source(args.source))
        with staged_outputs() as outputs:
            paths = {
                KERAS_FILE: outputs.file(args.out_dir / KERAS_FILE),
                SAVED_MODEL: outputs.folder(args.out_dir / SAVED_MODEL),
                TFLITE_FILE: outputs.file(args.out_dir / TFLITE_FILE),
            }
            from steps.lib.keras_model import build_model, to_inputs
            from steps.lib.tensorflow_setup import quietly

            model = build_model()
            model.set_weights(weights)
            images = to_inputs(test.x)
            reference = in_batches(lambda batch: model.predict(batch, verbose=0), images)
            save_keras(model, paths[KERAS_FILE])
            save_saved_model(model, paths[SAVED_MODEL])
            quietly(lambda: save_tflite(paths[SAVED_MODEL], paths[TFLITE_FILE]))
            for name, predict in (
                (KERAS_FILE, predict_keras),
                (f"{SAVED_MODEL}/", predict_saved_model),
                (TFLITE_FILE, predict_tflite),
            ):
                path = paths[name.rstrip("/")]
                check_same(reference, quietly(partial(predict, path, images)), name)
    print(
        f"{args.out_dir}: {KERAS_FILE}, {SAVED_MODEL}/ and {TFLITE_FILE} of {args.model}, each "
        f"picking the model's digit for all {len(test)} test digits"
    )


def command(argv: list[str] | None = None) -> int:
    """The export, its exit code: 0, 1 (a format picks another digit) or 2 (bad input)."""
    parser = make_parser()
    try:
        return run(main, parser, argv)
    except ExportMismatch as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_MISMATCH


if __name__ == "__main__":
    from steps.lib.tensorflow_setup import exit_without_teardown

    exit_without_teardown(command())
