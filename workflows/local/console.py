"""What a local run shows: a line per event or output line, and on a terminal the tries' progress."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

PROGRESS = re.compile(r"([0-9]+)/([0-9]+)")  # executor.go:monitorProgress's N/M
STATUS_WIDTH = 200
CLEAR_LINE = "\r\x1b[2K"


def read_progress(path: Path | None) -> str | None:
    """The `N/M` in `path`, or None when there is none yet (or it does not parse)."""
    try:
        lines = path.read_text(errors="replace").strip().splitlines() if path else []
    except OSError:
        return None
    match = PROGRESS.fullmatch(lines[-1].strip()) if lines else None
    return match[0] if match and int(match[1]) <= int(match[2]) else None


class Console:
    """Lines timed from the run's start, from any thread; the status line only when `live`."""

    def __init__(self, echo: Callable[[str], None], live: bool) -> None:
        self.echo, self.live = echo, live
        self.started = time.monotonic()
        self._drawn = False
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self._draw("")
            self.echo(f"{time.monotonic() - self.started:7.1f}s  {text}")

    def progress(self, progress: Mapping[str, str]) -> None:
        """`progress`: node name → N/M of the tries running now."""
        done = {name: [int(part) for part in value.split("/")] for name, value in progress.items()}
        shown = "  ".join(f"{name} {100 * n // m if m else 0}%" for name, (n, m) in done.items())
        with self._lock:
            elapsed = time.monotonic() - self.started
            self._draw(f"{elapsed:7.1f}s  running: {shown}" if shown else "")

    def _draw(self, status: str) -> None:
        """On a terminal: the status line redrawn, or cleared when `status` is empty."""
        if self.live and (status or self._drawn):
            print(f"{CLEAR_LINE}{status}"[:STATUS_WIDTH], end="", flush=True)
            self._drawn = bool(status)
