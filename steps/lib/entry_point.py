"""A step's entry point: parse the command line, run the step, and turn a StepError into one line and
exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from steps.lib.errors import EXIT_BAD_INPUT, StepError


def run(
    main: Callable[[argparse.Namespace], None],
    parser: argparse.ArgumentParser,
    argv: list[str] | None = None,
) -> int:
    """Parse `argv`, run `main`, and turn a StepError into one line on stderr and exit code 2."""
    args = parser.parse_args(argv)
    try:
        main(args)
    except StepError as error:
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
