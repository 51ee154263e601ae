"""Publish a model and its metrics under models/mnist/<run>/ in the store, then move LATEST to it, last.

No TensorFlow: the model is verified with h5py against the known architecture (steps.weights), the
same check the page's loader makes, so only a model the page can load is published.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from steps.cli import StepError, parse_json, read_json_file, require_file, run, to_json
from steps.metrics import check_metrics
from steps.registry import (
    LATEST_KEY,
    METRICS_FILE,
    MODEL_FILE,
    RUN_FILE,
    RUN_ID,
    move_latest,
    run_prefix,
)
from steps.storage import open_store
from steps.weights import read_weights


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.publish", description=__doc__)
    parser.add_argument(
        "--store", required=True, help="the store: a folder or gs://bucket[/prefix]"
    )
    parser.add_argument("--run", required=True, help="the run id (the workflow's name)")
    parser.add_argument("--model", type=Path, required=True, help="the model to publish (.h5)")
    parser.add_argument("--metrics", type=Path, required=True, help="its metrics.json")
    parser.add_argument(
        "--attach",
        type=Path,
        action="append",
        default=[],
        help="another file to publish beside them (repeatable)",
    )
    parser.add_argument(
        "--settings", default="{}", help="JSON object of the run's settings, kept in run.json"
    )
    return parser


def read_json_object(text: str, what: str) -> dict:
    value = parse_json(text, what)
    if not isinstance(value, dict):
        raise StepError(f"{what}: expected a JSON object")
    return value


def typed(value: object) -> object:
    """'3' → 3, '0.001' → 0.001; anything else stays as it is (workflow parameters are strings).

    Only plain numbers, booleans and null are converted, never to NaN or an infinity.
    """
    if isinstance(value, str):
        try:
            converted = json.loads(value, parse_constant=str)
        except (ValueError, RecursionError):
            return value
        if (
            converted is None
            or type(converted) in (bool, int)
            or (
                type(converted) is float
                and converted == converted
                and abs(converted) != float("inf")
            )
        ):
            return converted
    return value


def main(args: argparse.Namespace) -> None:
    if not RUN_ID.match(args.run):
        raise StepError(
            f"--run {args.run[:80]!r}: use lowercase letters, digits, '-' and '.' (63 at most)"
        )
    settings = {
        key: typed(value) for key, value in read_json_object(args.settings, "--settings").items()
    }
    metrics = check_metrics(read_json_file(args.metrics, "metrics"), str(args.metrics))
    for path in args.attach:
        require_file(path, "attachment")
    read_weights(require_file(args.model, "model"))  # publish only what the page can load
    store = open_store(args.store)
    prefix = run_prefix(args.run)
    card = {
        "run": args.run,
        "published_at": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        "accuracy": metrics["accuracy"],
        "settings": settings,
    }
    for path in args.attach:
        store.upload_file(path, f"{prefix}/{path.name}")
    store.upload_file(args.metrics, f"{prefix}/{METRICS_FILE}")
    store.write_text(f"{prefix}/{RUN_FILE}", to_json(card, indent=2))
    store.upload_file(args.model, f"{prefix}/{MODEL_FILE}")
    try:
        latest = move_latest(store, args.run)
    except RuntimeError as error:
        raise StepError(f"{error}; {args.run} is published but LATEST was not moved") from None
    moved = "" if latest == args.run else " (a run published after this one keeps it)"
    print(
        f"published {args.run} (accuracy {metrics['accuracy']:.4f}) → "
        f"{store.uri}/{prefix}/{MODEL_FILE}; {LATEST_KEY} → {latest}{moved}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
