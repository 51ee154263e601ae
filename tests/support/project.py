"""What many test modules share: where the project is, free ports, and running Python and submit.py in it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = str(ROOT / "workflows" / "submit.py")
# The seed of the models the tests train as fixtures: TEST_FIXTURE_SEED=N trains them otherwise, to show
# that no verdict hangs on one model's exact numbers (docs/tests.md, the numerics matrix).
FIXTURE_SEED = int(os.environ.get("TEST_FIXTURE_SEED") or 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`python -c CODE ARGS` in the project's folder, to the end, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def local_run(store: Path | str, logs: Path, source: Path, *extra: str) -> list[str]:
    """submit.py's arguments for a run on this machine, with a short retry backoff."""
    paths = [f"--artifacts={store}", f"--logs-dir={logs}", f"--source={source}"]
    return ["--local", *paths, "--retry-backoff", "1s", *extra]


SMALL_RUN: tuple[str, ...] = (
    *("--workers", "2", "--epochs", "1", "--batch", "32", "--rounds", "1", "--limit", "3000"),
    *("--seed", str(FIXTURE_SEED)),
)


def run_submit(
    *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 900
) -> subprocess.CompletedProcess:
    """`python workflows/submit.py ARGS` to the end, its output captured."""
    return subprocess.run(
        [sys.executable, SUBMIT, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
