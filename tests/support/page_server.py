"""The page as it is served (`python -m ui.serve`), started on 127.0.0.1 for a test and stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from steps.lib.registry import LATEST_KEY
from tests.support.project import ROOT, free_port, wait_for_port

PILLOW_COUNTER = Path(__file__).resolve().parent / "pillow_counter"  # its sitecustomize.py


@dataclass(frozen=True)
class Server:
    url: str
    pid: int
    pillow_log: Path  # what Pillow did in the server: "open" and "decode WxH" lines

    def pillow_calls(self) -> list[str]:
        return self.pillow_log.read_text().splitlines() if self.pillow_log.exists() else []


@contextlib.contextmanager
def serving(store: Path, log: Path) -> Iterator[Server]:
    """`python -m ui.serve` on 127.0.0.1 serving `store`'s LATEST; Pillow's calls counted."""
    port = free_port()
    pillow_log = log.with_suffix(".pillow")
    env = {
        **os.environ,
        "MODEL_URI": str(store / LATEST_KEY),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{PILLOW_COUNTER}",
        "PILLOW_COUNT_LOG": str(pillow_log),
    }
    with log.open("wb") as output:
        options = {"headless": "true", "address": "127.0.0.1", "port": port}
        flags = [f"--server.{name}={value}" for name, value in options.items()]
        server = subprocess.Popen(
            [sys.executable, "-m", "ui.serve", *flags, "--browser.gatherUsageStats=false"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            try:
                wait_for_port(port, timeout=60)
            except TimeoutError:
                pytest.fail(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            url = f"http://127.0.0.1:{port}"
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=30) as response:
                assert response.read() == b"ok"
            yield Server(url, server.pid, pillow_log)
        finally:
            server.terminate()
            server.wait(timeout=20)
