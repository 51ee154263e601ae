"""A GCS emulator of a test's own (gcp-storage-emulator on 127.0.0.1), which the test may stop while
the page still uses it: a store that can no longer be reached (its port closed)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from tests.support.project import free_port, wait_for_port


@dataclass
class Emulator:
    host: str  # for STORAGE_EMULATOR_HOST
    process: subprocess.Popen

    def stop(self) -> None:
        """Stop it by its PID: its port is closed from now on."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextlib.contextmanager
def own_emulator() -> Iterator[Emulator]:
    port = free_port()
    command = ["gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", *command, "--in-memory"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    emulator = Emulator(f"http://127.0.0.1:{port}", process)
    try:
        wait_for_port(port)
        yield emulator
    finally:
        emulator.stop()
