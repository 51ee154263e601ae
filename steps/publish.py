"""Publish a model and its metrics under models/mnist/<run>/ in the store, then move LATEST to it, last, if
the --serve policy says so (steps.lib.promotion): a model that is not served is kept, and the step succeeds.

No TensorFlow: the model is verified with h5py against the known architecture (steps.lib.model_file), the
same check the page's loader makes, metrics.json and run.json with the checks the page applies
(steps.lib.published), and the confusion picture with the page's (ui.images.picture: Pillow only), all
before anything is written: only a run the page can show is published.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import re
import sys
from pathlib import Path

from steps.lib import promotion, published, registry
from steps.lib.arguments import add_pipeline_flag, fraction
from steps.lib.bounded_json import is_number, to_json
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.input_files import read_small_file, require_file
from steps.lib.mnist import source_identity
from steps.lib.model_file import read_weights
from steps.lib.staged_outputs import staged_outputs
from steps.lib.storage import ArtifactStore, open_store
from steps.promote import command as promote_command
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
        "--serve",
        "when the run becomes the served model (LATEST): if-better, if-not-worse, always or never; "
        "it is published under its run in any case",
        choices=promotion.POLICIES,
    )
    add_pipeline_flag(
        parser,
        "--min-accuracy",
        "if-better and if-not-worse serve no model whose test accuracy is below this (0: any)",
        type=fraction,
    )
    add_pipeline_flag(
        parser,
        "--max-accuracy-drop",
        "if-not-worse serves a model scoring up to this below the model LATEST serves",
        type=fraction,
    )
    parser.add_argument(
        "--served-out", type=Path, help="write `true` or `false` here: whether LATEST names the run"
    )
    parser.add_argument("--reason-out", type=Path, help="write why (or why not) here, in one line")
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
    if isinstance(settings.get("source"), str):  # the same data, the same record, wherever it was
        settings["source"] = source_identity(settings["source"])
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


def contender_of(store: ArtifactStore, run: str | None) -> promotion.Contender | None:
    """The run LATEST names as the policy sees it, from what the page shows of it
    (registry.read_published), or None: no run, or one the page cannot show (its card or metrics
    fail the page's checks, or it has no model)."""
    if not run:
        return None
    try:
        shown = registry.read_published(store, run)
        if not registry.has_model(store, run):
            return None
    except (ValueError, StepError):
        return None
    return promotion.contender(run, shown.accuracy, shown.card.get("settings", {}), shown.metrics)


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
    card = published.check_card(card, args.run)  # what the page will check
    files = {path.name: path for path in args.attach}
    files |= {registry.METRICS_FILE: args.metrics, registry.MODEL_FILE: args.model}
    with staged_outputs() as outputs:  # a bad output path fails here, before anything is written
        served_out = outputs.file(args.served_out) if args.served_out else None
        reason_out = outputs.file(args.reason_out) if args.reason_out else None
        store = open_store(args.store)
        # a LATEST that is not a regular file ends the step here, before anything is written; one
        # that names no run is replaced
        with contextlib.suppress(published.BadRunFile):
            registry.latest_run(store)
        there = registry.published_already(store, args.run, files, card)  # else refused
        for key in registry.sweep_temporaries(store, files):
            print(f"removed {key}, left by a publish cut short", file=sys.stderr)
        prefix = registry.run_prefix(args.run)
        for name, path in files.items():  # what is there already is this very file
            if name not in there and name != registry.MODEL_FILE:
                store.upload_file(path, f"{prefix}/{name}")
        if registry.RUN_FILE not in there:
            store.write_text(f"{prefix}/{registry.RUN_FILE}", to_json(card, indent=2))
        if registry.MODEL_FILE not in there:  # the model last
            store.upload_file(args.model, f"{prefix}/{registry.MODEL_FILE}")
        ours = promotion.contender(args.run, metrics["accuracy"], settings, metrics)
        verdict = serve_if_chosen(store, args, ours)
        if served_out:
            served_out.write_text("true" if verdict.served else "false")
        if reason_out:
            reason_out.write_text(verdict.reason)
    model = f"{store.uri}/{prefix}/{registry.MODEL_FILE}"
    if verdict.served:
        outcome = f"served: {verdict.reason}; {registry.LATEST_KEY} → {args.run}"
    else:
        outcome = (
            f"not served: {verdict.reason}; to serve it anyway: "
            f"{promote_command(args.run, store.uri)}"
        )
    print(
        f"published {args.run} (accuracy {metrics['accuracy']:.4f}) → {model}; {outcome}",
        file=sys.stderr,
    )


def serve_if_chosen(
    store: ArtifactStore, args: argparse.Namespace, ours: promotion.Contender
) -> promotion.Verdict:
    """Move LATEST to the run if the --serve policy says so, judged against the run LATEST names
    at the moment the pointer is swapped."""
    verdicts: list[promotion.Verdict] = []

    def judge(current: str | None) -> str | None:
        verdict = promotion.decide(
            args.serve,
            ours,
            contender_of(store, current),
            args.min_accuracy,
            args.max_accuracy_drop,
        )
        verdicts.append(verdict)
        return None if verdict.served else verdict.reason

    try:
        moved = registry.move_latest(store, args.run, judge=judge)
    except RuntimeError as error:
        raise StepError(f"{error}; {args.run} is published but LATEST was not moved") from None
    if moved.refusal:
        return promotion.Verdict(False, moved.refusal)
    return verdicts[-1] if verdicts else promotion.Verdict(True, "it was served already")


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
