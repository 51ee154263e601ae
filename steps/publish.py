"""Publish a model and its metrics under models/mnist/<run>/ in the store, then move LATEST to it, last."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from steps.cli import StepError, require_file, run
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


def parse_args() -> argparse.ArgumentParser:
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
    try:
        value = json.loads(text)
    except ValueError as error:
        raise StepError(f"{what}: not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise StepError(f"{what}: expected a JSON object")
    return value


def typed(value: object) -> object:
    """'3' → 3, '0.001' → 0.001; anything else stays as it is (workflow parameters are strings)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def main(args: argparse.Namespace) -> None:
    if not RUN_ID.match(args.run):
        raise StepError(f"--run {args.run!r}: use lowercase letters, digits, '-' and '.'")
    settings = {
        key: typed(value) for key, value in read_json_object(args.settings, "--settings").items()
    }
    metrics = read_json_object(require_file(args.metrics, "metrics").read_text(), str(args.metrics))
    if not isinstance(metrics.get("accuracy"), float):
        raise StepError(f"{args.metrics}: has no 'accuracy'")
    for path in args.attach:
        require_file(path, "attachment")

    from steps.model import load_model

    load_model(args.model)  # publish only what the page will be able to load
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
    store.write_text(f"{prefix}/{RUN_FILE}", json.dumps(card, indent=2))
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
    sys.exit(run(main, parse_args()))
