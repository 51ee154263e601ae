"""A task's progress in Argo's format: `N/M` in the file named by ARGO_PROGRESS_FILE.

Argo's executor watches that file and reports its last line as the pod's progress
(argo/upstream/docs/progress.md; workflow/executor/executor.go: monitorProgress, which watches the
file's folder and re-reads the file on each change). Each write is a new file renamed over the old one,
so a reader never sees half a line; writes are throttled, the last value always written. The file is
made readable by every user: Argo's executor may run as a non-root user other than the step's
(docs/workflow-executors.md), and mkstemp's 0600 would hide the progress from its wait container.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

PROGRESS_VARIABLE = "ARGO_PROGRESS_FILE"
MIN_INTERVAL_SECONDS = 1.0
PROGRESS_MODE = 0o644  # whatever the umask: the wait container reads it as another user


class ProgressFile:
    """`done` of `total` units, written to `path` at most once per `interval` seconds."""

    def __init__(
        self, path: Path, total: int, done: int = 0, interval: float = MIN_INTERVAL_SECONDS
    ):
        self.path, self.total, self.done, self.interval = (
            Path(path),
            total,
            min(done, total),
            interval,
        )
        self.written: str | None = None
        self.last_write = float("-inf")
        self.write()

    def advance_to(self, done: int) -> None:
        """`done` units are done (never fewer than already reported, never more than the total)."""
        self.done = min(max(done, self.done), self.total)
        if time.monotonic() - self.last_write >= self.interval:
            self.write()

    def finish(self) -> None:
        """Write the current count now, whatever the throttle says."""
        self.write()

    def write(self) -> None:
        text = f"{self.done}/{self.total}"
        if text == self.written:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f".{self.path.name[:40]}.", dir=self.path.parent)
            try:
                os.fchmod(handle, PROGRESS_MODE)
                with os.fdopen(handle, "w") as stream:
                    stream.write(text + "\n")
                os.replace(name, self.path)
            finally:
                Path(name).unlink(missing_ok=True)
        except OSError:  # progress is for people watching: never a reason to fail the task
            return
        self.written, self.last_write = text, time.monotonic()


def from_environment(total: int, done: int = 0) -> ProgressFile | None:
    """A ProgressFile at $ARGO_PROGRESS_FILE, or None when the variable is not set."""
    path = os.environ.get(PROGRESS_VARIABLE, "").strip()
    return ProgressFile(Path(path), total, done) if path else None
