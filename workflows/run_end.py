"""The lines that end a run, the same for both engines: its phase and time, then why it failed, or its
test accuracy and whether it became the served model, with what only one engine knows."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from steps.lib.defaults import STORE as DEFAULT_STORE
from steps.lib.registry import LATEST_KEY
from steps.promote import command as promote_command

EXIT_RUN_FAILED = 1  # it was tried and failed: the run, or the Argo Server


@dataclass(frozen=True)
class RunEnd:
    """How a run ended, as either engine tells it."""

    run: str
    phase: str
    seconds: float | None
    failure: str = ""  # why it did not succeed
    accuracy: str | None = None  # evaluate's output
    served: str | None = None  # publish's outputs
    reason: str | None = None
    notes: tuple[str, ...] = ()  # what only one engine says: the model's place, the logs, ...


def python_command() -> str:
    """This Python as the user can type it here: relative to the current folder when inside it."""
    executable = Path(sys.executable)
    try:
        return str(executable.relative_to(Path.cwd()))
    except ValueError:
        return str(executable)


def serving_lines(run: str, store: str, served: str | None, reason: str | None) -> list[str]:
    """publish's outcome: LATEST moved and why, or why not and the command that serves the run anyway."""
    if served is None:  # a template registered before publish had these outputs
        return []
    if served == "true":
        return [f"served: {LATEST_KEY} → {run} ({reason})"]
    command = promote_command(run, "" if store == DEFAULT_STORE else store, python_command())
    return [f"not served: {reason}; to serve it anyway: {command}"]


def report(ended: RunEnd, store: str) -> int:
    """Print the run's end; its exit code: 0 when it succeeded, else 1."""
    took = ""
    if ended.seconds is not None:  # a cluster's times are whole seconds: said whole
        took = f" in {ended.seconds:.1f}".removesuffix(".0") + "s"
    print(f"\nrun {ended.run} {ended.phase}{took}")
    if ended.phase != "Succeeded":
        print(f"submit: {ended.failure or 'the run did not succeed'}", file=sys.stderr)
        return EXIT_RUN_FAILED
    print(f"test accuracy: {ended.accuracy}")
    for line in [*serving_lines(ended.run, store, ended.served, ended.reason), *ended.notes]:
        print(line)
    return 0
