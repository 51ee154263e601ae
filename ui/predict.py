"""Predict digits in image files with the page's preprocessing and model; one JSON object per line.

python -m ui.predict IMAGE... [--model-uri URI]

Each line holds `file`, `digit`, `confidence` and `probabilities` (digits 0-9), or `file` and `error`
for a file that cannot be used. The exit code is 2 if any file failed or no model could be loaded.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from steps.lib import defaults
from steps.lib.errors import EXIT_BAD_INPUT, StepError
from steps.lib.inference import Network
from steps.lib.input_files import open_regular
from ui.images.decode import MAX_FILE_MB, MB, ImageRejected
from ui.model_source import ModelKeeper, ModelUnavailable, Status, model_uri, parse_model_uri
from ui.preprocess import prepare

LOW_CONFIDENCE = 0.6  # below this the page labels a prediction as a guess


@dataclass(frozen=True)
class Prediction:
    digit: int
    confidence: float
    probabilities: list[float]  # index = digit

    @property
    def is_low_confidence(self) -> bool:
        return self.confidence < LOW_CONFIDENCE


class NoAnswer(ValueError):
    """The model's output is not a probability distribution (a model with broken weights)."""


def classify(model: Network, pixels: np.ndarray) -> Prediction:
    """What `model` says about one 28x28 image in [0, 1] (from ui.preprocess)."""
    probabilities = model.probabilities(pixels.astype(np.float32).reshape(1, 28, 28))[0]
    if not all(math.isfinite(p) for p in probabilities):
        raise NoAnswer("the model gave no usable answer (its output is not a number)")
    digit = int(probabilities.argmax())
    return Prediction(digit, float(probabilities[digit]), [float(p) for p in probabilities])


def read_image_file(path: Path, limit: int = MAX_FILE_MB * MB) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; OSError or ImageRejected saying why not.

    Opened without blocking (a FIFO would wait for a writer) and read no further than the limit (a
    device such as /dev/zero never ends).
    """
    try:
        stream = open_regular(path, "image")
    except StepError:
        raise ImageRejected("This is not a regular file.") from None
    with stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ImageRejected(
            f"The file is over {limit / MB:.0f} MB; the limit is {limit / MB:.0f} MB."
        )
    return data


def predict_file(model: Network, path: Path) -> dict:
    """One output record for `path`: the prediction, or an error."""
    try:
        prediction = classify(model, prepare(read_image_file(path)))
    except OSError as error:
        return {"file": str(path), "error": f"cannot read the file ({error.strerror or error})"}
    except (ImageRejected, NoAnswer) as error:
        return {"file": str(path), "error": str(error)}
    return {
        "file": str(path),
        "digit": prediction.digit,
        "confidence": round(prediction.confidence, 6),
        "probabilities": [round(p, 6) for p in prediction.probabilities],
    }


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ui.predict", description=__doc__)
    parser.add_argument("images", type=Path, nargs="+", metavar="IMAGE", help="image files")
    parser.add_argument(
        "--model-uri",
        default=model_uri(),
        help="a store's models/mnist/LATEST, a store, or a .h5 file "
        "(env MODEL_URI; default: $ARTIFACTS/models/mnist/LATEST, ARTIFACTS defaulting to "
        f"{defaults.STORE})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    status: Status | None = None
    try:
        status = ModelKeeper(parse_model_uri(args.model_uri)).refresh()
        problem = status.problem or f"no model at {args.model_uri}; train one with `make pipeline`"
    except ModelUnavailable as error:
        problem = str(error)
    if status is None or status.model is None:
        print(f"python -m ui.predict: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    failed = 0
    for path in args.images:
        record = predict_file(status.model.model, path)
        failed += "error" in record
        print(json.dumps(record, allow_nan=False), flush=True)
    return EXIT_BAD_INPUT if failed else 0


if __name__ == "__main__":
    sys.exit(main())
