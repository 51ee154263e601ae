"""Publish a model and its metrics under models/mnist/<run>/ in the store, then move LATEST to it, last.

No TensorFlow: the model is verified with h5py against the known architecture (steps.lib.model_file), the
same check the page's loader makes, metrics.json and run.json with the checks the page applies
(steps.lib.published), and the confusion picture with the page's (ui.images.picture: Pillow only), all
before anything is written: only a run the page can show is published.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

from steps.lib import published, registry
from steps.lib.arguments import add_pipeline_flag, fraction
from steps.lib.bounded_json import is_number, to_json
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.input_files import read_small_file, require_file
from steps.lib.model_file import read_weights
from steps.lib.storage import ArtifactStore, open_store
from ui.images.picture import check_attachment

SETTING_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.publish", description=__doc__)
    add_pipeline_flag(parser, "--store", "the store: a folder or gs://bucket[/prefix]")
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
    add_pipeline_flag(
        parser,
        "--min-accuracy",
        "refuse a model whose test accuracy is below this, 0: publish any",
        type=fraction,
    )
    add_pipeline_flag(
        parser,
        "--max-accuracy-drop",
        "refuse a model scoring more than this below the model LATEST serves, 1: publish any",
        type=fraction,
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting the run was trained with, kept in run.json (repeatable); the value is "
        "everything after the first '=', taken as a number when it reads as one, else as text",
    )
    return parser


def settings_from(pairs: list[str]) -> dict:
    """`NAME=VALUE` arguments as run.json's settings. Each value is one argument: no text in it can
    add, remove or rename a setting."""
    settings: dict = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not (equals and SETTING_NAME.match(name)):
            raise StepError(
                f"--setting {pair[:60]!r}: expected NAME=VALUE, NAME of a-z, 0-9, - and _"
            )
        if name in settings:
            raise StepError(f"--setting {name} is given twice")
        settings[name] = typed(value)
    return settings


def typed(value: str) -> object:
    """'3' → 3, '0.001' → 0.001; anything else stays text (workflow parameters are strings).

    Only finite numbers a float holds are converted: never to NaN, an infinity, a bool or null.
    """
    try:
        converted = json.loads(value, parse_constant=str)
    except (ValueError, RecursionError):
        return value
    return converted if is_number(converted) else value


def serving_accuracy(store: ArtifactStore, run: str) -> tuple[str, float] | None:
    """The run LATEST names and its published test accuracy, unless it is `run`, or unknown."""
    try:
        # a LATEST that is not a regular file ends the step here
        serving = registry.latest_run(store)
    except published.BadRunFile:  # a LATEST that names no run: nothing is served
        return None
    card = registry.card_of(store, serving) if serving and serving != run else None
    if card is None or "accuracy" not in card:
        return None
    return serving, card["accuracy"]


def check_quality(
    store: ArtifactStore, run: str, accuracy: float, floor: float, max_drop: float
) -> None:
    """Refuse a model below the floor, or far below the model LATEST serves."""
    if accuracy < floor:
        raise StepError(
            f"test accuracy {accuracy:.4f} is below --min-accuracy {floor}: {run} is not "
            "published (set it lower to publish it anyway)"
        )
    serving = serving_accuracy(store, run)
    if serving and accuracy < serving[1] - max_drop:
        raise StepError(
            f"test accuracy {accuracy:.4f} is more than --max-accuracy-drop {max_drop} below "
            f"{serving[0]}'s {serving[1]:.4f}, which LATEST serves: {run} is not published "
            "(set it higher to publish it anyway)"
        )


def main(args: argparse.Namespace) -> None:
    if not published.RUN_ID.match(args.run):
        raise StepError(
            f"--run {args.run[:80]!r}: use lowercase letters, digits, '-' and '.' (63 at most)"
        )
    settings = settings_from(args.setting)
    metrics = published.read_metrics(
        read_small_file(args.metrics, "metrics", published.MAX_FILE_BYTES),
        f"metrics {args.metrics}",
    )
    for path in args.attach:
        check_attachment(require_file(path, "attachment"))  # the page's checks of what it reads
    read_weights(require_file(args.model, "model"))  # publish only what the page can load
    card = {
        "run": args.run,
        "published_at": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        "accuracy": metrics["accuracy"],
        "settings": settings,
    }
    published.check_card(card, args.run)  # what the page will check
    store = open_store(args.store)
    check_quality(store, args.run, metrics["accuracy"], args.min_accuracy, args.max_accuracy_drop)
    prefix = registry.run_prefix(args.run)
    for path in args.attach:
        store.upload_file(path, f"{prefix}/{path.name}")
    store.upload_file(args.metrics, f"{prefix}/{registry.METRICS_FILE}")
    store.write_text(f"{prefix}/{registry.RUN_FILE}", to_json(card, indent=2))
    store.upload_file(args.model, f"{prefix}/{registry.MODEL_FILE}")
    try:
        latest = registry.move_latest(store, args.run)
    except RuntimeError as error:
        raise StepError(f"{error}; {args.run} is published but LATEST was not moved") from None
    moved = "" if latest == args.run else " (a run published after this one keeps it)"
    print(
        f"published {args.run} (accuracy {metrics['accuracy']:.4f}) → "
        f"{store.uri}/{prefix}/{registry.MODEL_FILE}; {registry.LATEST_KEY} → {latest}{moved}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
