"""Score a model on the test set: metrics.json (accuracy, loss, per-class, confusion matrix) and a picture.

No TensorFlow: the network runs in numpy (steps.lib.inference) on the weights steps.lib.model_file checked.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from steps.lib import inference
from steps.lib.bounded_json import parse_json, to_json
from steps.lib.confusion_plot import draw_confusion
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.mnist import NUM_CLASSES
from steps.lib.model_file import read_weights
from steps.lib.published import MAX_ROUNDS, check_metrics
from steps.lib.registry import CONFUSION_FILE, METRICS_FILE
from steps.lib.shards import read_shard
from steps.lib.staged_outputs import staged_outputs

OUTPUTS = (METRICS_FILE, CONFUSION_FILE, "report.txt", "accuracy.txt")  # published: the first two


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.evaluate", description=__doc__)
    parser.add_argument("--model", type=Path, required=True, help="the model to score (.h5)")
    parser.add_argument("--test", type=Path, required=True, help="the test set (.npz with x, y)")
    parser.add_argument(
        "--missing-shards",
        default="{}",
        help="JSON object: round → comma-separated shards that delivered no model (aggregate's "
        "--missing-out), recorded in metrics.json",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        required=True,
        help="writes metrics.json, confusion.png, report.txt and accuracy.txt here",
    )
    return parser


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Rows: true digit, columns: predicted digit."""
    matrix = np.zeros((NUM_CLASSES, NUM_CLASSES), dtype=np.int64)
    np.add.at(matrix, (labels.astype(np.int64), predicted.astype(np.int64)), 1)
    return matrix


def missing_shards(text: str) -> dict[str, list[str]]:
    """Rounds that went ahead without some shards: {"1": "2,5"} → {"1": ["2", "5"]}; rounds with
    none are left out."""
    value = parse_json(text, "--missing-shards")
    if (
        not isinstance(value, dict)
        or len(value) > MAX_ROUNDS
        or not all(isinstance(shards, str) for shards in value.values())
    ):
        raise StepError(
            "--missing-shards must be a JSON object of comma-separated shard ids per round, "
            f"got {text[:80]!r}"
        )
    return {round_: shards.split(",") for round_, shards in value.items() if shards}


def summary(metrics: dict) -> str:
    """A short plain-text report: accuracy, loss, and each digit's accuracy."""
    per_class = metrics["per_class_accuracy"]
    weakest = min(per_class, key=per_class.get)
    lines = [
        f"test accuracy {metrics['accuracy']:.4f}, loss {metrics['loss']:.4f} "
        f"on {metrics['test_samples']} digits",
        f"weakest digit: {weakest} ({per_class[weakest]:.4f})",
        "",
        "digit  accuracy",
        *(f"{digit:>5}  {value:.4f}" for digit, value in per_class.items()),
    ]
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> None:
    missing = missing_shards(args.missing_shards)
    with staged_outputs() as outputs:  # all four files appear together, or none does
        paths = {name: outputs.file(args.out_dir / name) for name in OUTPUTS}
        test = read_shard(args.test)

        if not args.model.is_file():
            raise StepError(f"model not found: {args.model}")
        weights = read_weights(args.model)  # checked against the architecture before any use
        scored = inference.score(weights, test)
        loss = scored.loss
        if not math.isfinite(loss):
            raise StepError(f"{args.model}: the test loss is {loss}")
        matrix = confusion_matrix(test.y, scored.predicted)
        per_class = matrix.diagonal() / np.maximum(matrix.sum(axis=1), 1)
        accuracy = float(matrix.trace() / matrix.sum())
        metrics = check_metrics(
            {
                "accuracy": accuracy,
                "loss": loss,
                "test_samples": len(test),
                "test_sha256": test.sha256(),  # scores compare only on the same digits
                "per_class_accuracy": {str(d): float(value) for d, value in enumerate(per_class)},
                "confusion_matrix": matrix.tolist(),
                "missing_shards": missing,
            },
            "metrics",
        )
        paths[METRICS_FILE].write_text(to_json(metrics, indent=2))
        draw_confusion(matrix).save(paths[CONFUSION_FILE], format="PNG")
        paths["report.txt"].write_text(summary(metrics))
        paths["accuracy.txt"].write_text(f"{accuracy:.4f}")
    print(f"test accuracy {accuracy:.4f}, loss {loss:.4f} on {len(test)} samples", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
