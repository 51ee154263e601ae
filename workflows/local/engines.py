"""One try of a container template, an `Invocation`, run by an engine: here a process of this machine."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

import steps

PROJECT_ROOT = Path(steps.__file__).resolve().parents[1]
STOP_GRACE_SECONDS = 5
OUTPUT_DRAIN_SECONDS = 5.0  # how long a step's stdout is read after it ended (a child may hold it)


def safe_filename(name: str) -> str:
    """`name` with runs of anything but letters, digits, `.` and `-` as one `-`."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")


class EngineError(RuntimeError):
    """The engine itself failed (no image, a bad mount): the runner's trouble, not the step's."""


@dataclass(frozen=True)
class Invocation:
    """One try of a container template, resolved."""

    name: str  # the node's name, e.g. train-round-1(0:0)
    image: str
    command: list[str]  # the container's command followed by its args
    environment: dict[str, str]  # the container's env
    working_dir: PurePosixPath  # the container's workingDir, e.g. /work
    host_dir: Path  # this machine's folder standing for working_dir
    progress_file: Path  # this machine's file the runner polls for `N/M` progress
    on_output: Callable[[str], None]  # each stdout line as it comes, without its \n
    inputs: tuple[PurePosixPath, ...] = ()  # input artifact paths, already placed under host_dir
    scratch: tuple[PurePosixPath, ...] = ()  # emptyDir volume mounts: writable, empty at start
    cpus: float = 0  # resources.limits.cpu (0: none)
    memory: int = 0  # resources.limits.memory in bytes (0: none)

    def host_path(self, path: PurePosixPath | str) -> Path:
        """Where a container path lives here: under host_dir, or a `volumes` folder beside it (/tmp, say)."""
        posix = self.working_dir / path  # a relative path is under working_dir
        if posix.is_relative_to(self.working_dir):
            return self.host_dir / posix.relative_to(self.working_dir)
        return self.host_dir.parent / "volumes" / posix.relative_to("/")


class Engine(Protocol):
    """Runs invocations (several at once) to their exit code, None when stopped at `timeout`; `stop_all`."""

    name: str

    def execute(
        self, invocation: Invocation, log: IO[str], timeout: float | None
    ) -> int | None: ...

    def stop_all(self) -> None: ...


def attach(
    command: list[str],
    invocation: Invocation,
    log: IO[str],
    timeout: float | None,
    stop: Callable[[subprocess.Popen], None],
    running: set[subprocess.Popen],
    **popen: Any,
) -> int | None:
    """`command`'s exit code (None once `stop`ped at `timeout`); stdout to `log` and `on_output`."""
    log.flush()
    process = subprocess.Popen(  # in a group of its own, to be stopped as one
        command,
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        **popen,
    )
    running.add(process)  # where stop_all finds it; set operations hold the GIL

    def relay(stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            log.write(line + "\n")
            log.flush()
            invocation.on_output(line)
        stream.close()

    relaying = threading.Thread(target=relay, args=(process.stdout,), daemon=True)
    relaying.start()
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        process.wait()
        return None
    finally:
        running.discard(process)
        relaying.join(OUTPUT_DRAIN_SECONDS)


@dataclass
class ProcessEngine:
    """Each attempt is a process of this machine's Python, in host_dir, with the container's command line."""

    name: str = "process"
    _running: set[subprocess.Popen] = field(default_factory=set)

    def execute(self, invocation: Invocation, log: IO[str], timeout: float | None) -> int | None:
        command = list(invocation.command)
        if command[0] in ("python", "python3"):
            command[0] = sys.executable
        environment = os.environ | invocation.environment | {"PYTHONUNBUFFERED": "1"}
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), environment.get("PYTHONPATH")])
        )
        environment["ARGO_PROGRESS_FILE"] = str(invocation.progress_file)
        for path in invocation.scratch:  # scratch outside the working folder (/tmp): the host's
            if invocation.working_dir in path.parents:
                invocation.host_path(path).mkdir(parents=True, exist_ok=True)

        stop, running, folder = stop_process, self._running, invocation.host_dir
        code = attach(command, invocation, log, timeout, stop, running, cwd=folder, env=environment)
        return 128 - code if code is not None and code < 0 else code  # signal N: 128 + N

    def stop_all(self) -> None:
        for process in list(self._running):
            stop_process(process)


HINTS = {9: "killed (signal 9, e.g. out of memory)", 15: "terminated (signal 15, SIGTERM)"}


def exit_description(code: int) -> str:
    """How a try's exit code reads: 128 + N is signal N (Kubernetes' OOM kill is 137)."""
    try:
        name = signal.Signals(code - 128).name
    except ValueError:
        return f"exit code {code}"
    return f"{HINTS.get(code - 128, f'killed by signal {code - 128} ({name})')}, exit code {code}"


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL it if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass
