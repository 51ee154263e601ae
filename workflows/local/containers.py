"""Each try in a container of the step's image (podman or docker), as an Argo pod runs it: the image's user
on a read-only root, `resources.limits` without swap, inputs, emptyDirs and named paths bind-mounted."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from workflows.local.engines import (
    STOP_GRACE_SECONDS,
    EngineError,
    Invocation,
    attach,
    safe_filename,
)

ARGO_RUN_DIR = PurePosixPath("/var/run/argo")  # Argo's shared volume (common.VarRunArgoPath)
PASSED_THROUGH = ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")  # a store's emulator, when used
LABEL = "mnist-argo.engine=local-runner"
EMPTY_DIR_MODE = 0o777  # how the kubelet creates an emptyDir
ENGINE_TIMEOUT_SECONDS = 120  # for create, cp, stop, rm: never the step itself
SIGTERM_EXIT_CODE = 143  # what a stopped container exits with (128 + SIGTERM)


def container_name(node: str) -> str:
    """An engine-safe, unique container name for a try, e.g. mnist-train-round-1-0-0-3f9a1c."""
    return f"mnist-{safe_filename(node)[:80]}-{secrets.token_hex(3)}"


def mounts(invocation: Invocation) -> list[Path]:
    """The paths of this machine the command line names (a folder store, a data file)."""
    return [Path(part) for part in invocation.command if part[:1] == "/" and Path(part).exists()]


@dataclass
class ContainerEngine:
    """Runs invocations in containers of their image with `program` (podman or docker)."""

    program: str = "podman"
    name: str = field(init=False)
    _running: set[str] = field(default_factory=set)  # set operations hold the GIL
    _stopped: bool = False  # by stop_all: every try ends with SIGTERM's exit code

    def __post_init__(self) -> None:
        self.name = Path(self.program).name

    def create_command(self, invocation: Invocation, container: str) -> list[str]:
        """`podman create ...`: everything the try's container is, but not started."""
        command = [self.program, "create", "--name", container, "--label", LABEL]
        # readOnlyRootFilesystem, and the network only for a store or data reached over it
        command += ["--workdir", str(invocation.working_dir), "--read-only"]
        network = any("://" in part for part in invocation.command)
        command += ["--network", "host" if network else "none"]
        if memory := invocation.memory:
            command += ["--memory", f"{memory}b", "--memory-swap", f"{memory}b"]
        if invocation.cpus:
            command += ["--cpus", f"{invocation.cpus:g}"]
        for path in (*invocation.inputs, *invocation.scratch):  # a relative path: under working_dir
            command += ["--volume", f"{invocation.host_path(path)}:{invocation.working_dir / path}"]
        for host in mounts(invocation):  # a folder store: writable; a data file: read-only
            command += ["--volume", f"{host}:{host}:{'rw' if host.is_dir() else 'ro'}"]
        environment = {v: os.environ[v] for v in PASSED_THROUGH if v in os.environ}
        environment |= invocation.environment
        command += ["--volume", f"{invocation.progress_file.parent}:{ARGO_RUN_DIR}"]
        environment["ARGO_PROGRESS_FILE"] = str(ARGO_RUN_DIR / invocation.progress_file.name)
        for variable, value in environment.items():
            command += ["--env", f"{variable}={value}"]
        return [*command, invocation.image, *invocation.command]

    def execute(self, invocation: Invocation, log: IO[str], timeout: float | None) -> int | None:
        self._prepare(invocation)
        container = container_name(invocation.name)
        self._running.add(container)
        try:
            failure = f"{self.name} could not create the container of {invocation.name}"
            self._engine(self.create_command(invocation, container), failure)
            if self._stopped:  # stop_all came first: never start it
                return SIGTERM_EXIT_CODE
            # start --attach returns the container's exit code and keeps its two streams apart
            command = [self.program, "start", "--attach", container]
            stop = lambda _: self._stop(container)  # noqa: E731
            code = attach(command, invocation, log, timeout, stop, set())
            if code is None or self._stopped:
                return code
            # the container's own exit code; an engine failure (it never ran) is an EngineError
            state = "{{.State.ExitCode}} {{.State.StartedAt}}"
            inspected = self._engine([self.program, "inspect", "--format", state, container])
            if len(fields := inspected.stdout.split()) < 2 or fields[1].startswith("0001-01-01"):
                raise EngineError(f"{self.name} could not start the container {container}")
            return int(fields[0])
        finally:
            self._engine([self.program, "rm", "--force", "--volumes", container])
            self._running.discard(container)

    def stop_all(self) -> None:
        self._stopped = True
        for container in list(self._running):  # each try then removes its own container
            self._stop(container)

    def check_ready(self, images: Iterable[str]) -> None:
        """Before a run: EngineError in one line unless the engine answers and holds every image."""
        self._engine([self.program, "info"], f"{self.name} does not answer")
        for image in dict.fromkeys(images):
            self.image_uid(image)

    def image_uid(self, image: str) -> int | None:
        """The numeric user the image runs as (its USER), None for root or a name."""
        inspect = [self.program, "image", "inspect", "--format", "{{.Config.User}}", image]
        failure = f"{self.name} has no image {image}: build it with `make images`"
        user = self._engine(inspect, failure).stdout.strip().split(":")[0]
        return int(user) if user.isdigit() and user != "0" else None

    def _prepare(self, invocation: Invocation) -> None:
        """Empty, world-writable emptyDirs and progress folder; folders it names writable by its user."""
        scratch = [invocation.host_path(path) for path in invocation.scratch]
        for folder in [*scratch, invocation.progress_file.parent]:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            folder.chmod(EMPTY_DIR_MODE)
        writable = [host for host in mounts(invocation) if host.is_dir()]
        uid = self.image_uid(invocation.image) if writable else None
        for host in writable if uid is not None else []:  # ACL entries, also for what is made there
            if shutil.which("setfacl") is None:
                raise EngineError(f"the writable mount {host} needs setfacl (apt-get install acl)")
            entries = ["-R", "--modify", f"u:{uid}:rwX", "--modify", f"d:u:{uid}:rwX", str(host)]
            self._engine(["setfacl", *entries], f"cannot let uid {uid} write to {host}")

    def _stop(self, container: str) -> None:
        self._engine([self.program, "stop", "--time", str(STOP_GRACE_SECONDS), container])

    def _engine(
        self, command: Sequence[str], failure: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`command`'s outcome; with a `failure`, EngineError with its last line unless it succeeded."""
        try:
            done = subprocess.run(
                list(command),
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=ENGINE_TIMEOUT_SECONDS,
            )
        except FileNotFoundError:
            raise EngineError(f"the container engine {self.program!r} is not installed") from None
        except subprocess.TimeoutExpired:
            raise EngineError(f"{self.name} did not answer: {' '.join(command[:3])}") from None
        if failure and done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise EngineError(f"{failure}: {reason}")
        return done
