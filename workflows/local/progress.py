"""Steps' self-reported progress, read the way Argo's executor reads it, and shown while a run goes on.

A step writes `N/M` to the file named by ARGO_PROGRESS_FILE; the executor takes the file's last non-empty line
and keeps it when it parses as N/M with 0 <= N <= M (executor.go:monitorProgress, docs/progress.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

PROGRESS = re.compile(r"^(\d+)/(\d+)$")
REPORT_EVERY_SECONDS = 10.0  # without a terminal: a task's progress at most this often


def read_progress(path: Path | None) -> str | None:
    """The progress in `path` as `N/M`, or None when there is none yet (or it does not parse)."""
    if path is None:
        return None
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    last = lines[-1].strip() if lines else ""
    match = PROGRESS.match(last)
    if not match or int(match.group(1)) > int(match.group(2)):
        return None
    return last


def percent(progress: str) -> str:
    done, total = (int(part) for part in progress.split("/"))
    return f"{100 * done // total}%" if total else "0%"


class ProgressReport:
    """Prints progress changes: one status line redrawn in place on a terminal, else a line per task at
    most every REPORT_EVERY_SECONDS (and when a task reaches M/M)."""

    def __init__(self, echo: Callable[[str], None], live: bool) -> None:
        self.echo, self.live = echo, live
        self._last: dict[str, tuple[str, float]] = {}
        self._drawn = False

    def update(self, progress: dict[str, str], elapsed: float) -> None:
        """`progress`: node name → N/M of the nodes running now."""
        if self.live:
            line = "  ".join(f"{name} {percent(value)}" for name, value in progress.items())
            print(f"\r\x1b[2K{elapsed:7.1f}s  running: {line}"[:200], end="", flush=True)
            self._drawn = bool(progress)
            return
        now = time.monotonic()
        for name, value in progress.items():
            shown, at = self._last.get(name, ("", 0.0))
            done, total = value.split("/")
            if value != shown and (now - at >= REPORT_EVERY_SECONDS or done == total):
                self._last[name] = (value, now)
                self.echo(f"{elapsed:7.1f}s  progress {name}: {value} ({percent(value)})")

    def clear(self) -> None:
        """Erase the status line before another line is printed."""
        if self.live and self._drawn:
            print("\r\x1b[2K", end="", flush=True)
            self._drawn = False
