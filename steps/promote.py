"""Promote a published run to the served model: point models/mnist/LATEST at a run kept under
models/mnist/<run>/.

python -m steps.promote mnist-u05r5 [--store gs://BUCKET]

publish's --serve policy decides at the end of a run; this promotes a kept run anyway (an experiment to
try on the page, or the previous model back). The run's card, metrics and model are checked as the page
checks them before the pointer moves, by the same compare-and-swap publish uses.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from steps.lib import published, registry
from steps.lib.arguments import add_pipeline_flag
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.model_file import read_weights
from steps.lib.storage import open_store


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.promote", description=__doc__)
    parser.add_argument("run", help="the published run to promote, e.g. mnist-u05r5")
    add_pipeline_flag(parser, "--store", "the store: a folder or gs://bucket[/prefix]")
    return parser


def command(run_id: str, store: str, python: str = "python") -> str:
    """This tool's command line promoting `run_id` from `store` ('' leaves out --store: the default)."""
    return f"{python} -m steps.promote {run_id}" + (f" --store {store}" if store else "")


def main(args: argparse.Namespace) -> None:
    if not published.RUN_ID.match(args.run):
        raise StepError(f"{args.run[:80]!r} is not a run id")
    store = open_store(args.store)
    prefix = registry.run_prefix(args.run)
    if store.read_head(f"{prefix}/{registry.RUN_FILE}", published.MAX_FILE_BYTES) is None:
        raise StepError(
            f"no run {args.run} is published in {store.uri} ({prefix}/ has no run.json)"
        )
    registry.read_published(store, args.run)  # what the page will check
    with tempfile.TemporaryDirectory(prefix="mnist-promote-") as folder:
        model = Path(folder) / registry.MODEL_FILE
        model.write_bytes(registry.read_model(store, args.run))
        try:
            read_weights(model)
        except StepError as error:  # said of the store's file, not of the copy
            raise StepError(f"run {args.run}: {str(error).removeprefix(f'{model}: ')}") from None
    try:
        before = registry.latest_run(store)
    except published.BadRunFile:
        before = None
    try:
        registry.move_latest(store, args.run)
    except RuntimeError as error:
        raise StepError(str(error)) from None
    was = "it was already" if before == args.run else f"was {before or 'nothing'}"
    print(f"{registry.LATEST_KEY} → {args.run} in {store.uri} ({was})")


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
