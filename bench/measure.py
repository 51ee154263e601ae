"""Run one command as a child process and measure it: wall time, CPU time, peak RSS, timed output lines."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Measurement:
    """What one process tree cost. `lines` holds (seconds since start, stdout line)."""

    command: list[str]
    returncode: int
    started: float  # time.monotonic() when the process was started
    wall_seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    lines: list[tuple[float, str]] = field(default_factory=list)
    stderr: str = ""

    def record(self) -> dict[str, object]:
        """The costs and the machine's state around the measurement, for the reader of the numbers."""
        return {
            "wall_seconds": round(self.wall_seconds, 1),
            "cpu_seconds": round(self.cpu_seconds, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "loadavg_before": [round(value, 2) for value in self.load_before],
            "loadavg_after": [round(value, 2) for value in self.load_after],
        }


class ChildFailed(RuntimeError):
    """A measured command ended with a non-zero exit code."""


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def measure(
    command: list[str], echo: bool = True, environment: Mapping[str, str | None] | None = None
) -> Measurement:
    """Run `command` from the project root; wait4 gives the tree's CPU time and its largest peak RSS.

    The kernel reports, for a reaped child, its own usage plus that of every descendant it reaped,
    and as maxrss the peak resident set of the largest single process among them. `environment`
    adds variables (None removes one).
    """
    child_environment = os.environ | {
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])
        ),
        "PYTHONUNBUFFERED": "1",
    }
    for name, value in (environment or {}).items():
        if value is None:
            child_environment.pop(name, None)
        else:
            child_environment[name] = value
    load_before = os.getloadavg()
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=child_environment,
    )
    lines: list[tuple[float, str]] = []
    errors: list[str] = []

    def read_stdout() -> None:
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
            if echo:
                print(f"    {line.rstrip()}", flush=True)

    def read_stderr() -> None:
        errors.extend(process.stderr)

    readers = [threading.Thread(target=read_stdout), threading.Thread(target=read_stderr)]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    return Measurement(
        command=command,
        returncode=process.returncode,
        started=started,
        wall_seconds=wall,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # Linux reports kilobytes
        load_before=load_before,
        load_after=os.getloadavg(),
        lines=lines,
        stderr="".join(errors),
    )


def measure_ok(command: list[str], **options: object) -> Measurement:
    """`measure`, raising ChildFailed with the end of its stderr when the command fails."""
    measured = measure(command, **options)
    if measured.returncode != 0:
        raise ChildFailed(
            f"{' '.join(command[:4])} … failed ({measured.returncode}):\n{measured.stderr[-2000:]}"
        )
    return measured


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
