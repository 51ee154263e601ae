"""The container engine's command line (workflows/local/containers.py), checked without running a container: what
`podman create` is asked for is what an Argo pod of the template would be. The same engine runs for real in
tests/test_containers_engine.py (the slow `make test-containers`)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from workflows.local.containers import ContainerEngine, container_name, quantity
from workflows.local.engines import Invocation

WORK = PurePosixPath("/work")


def invocation(tmp_path: Path, **changes) -> Invocation:
    fields = {
        "name": "aggregate-round-1",
        "image": "mnist-argo-steps:0.1.0",
        "command": ["python", "-m", "steps.aggregate", "--models-dir", "in/models"],
        "environment": {"TF_NUM_INTEROP_THREADS": "1"},
        "working_dir": WORK,
        "host_dir": tmp_path / "task",
        "inputs": (PurePosixPath("in/models"),),
        "outputs": (PurePosixPath("out/model.h5"),),
        "scratch": (PurePosixPath("out"),),
    }
    return Invocation(**(fields | changes))


def options(command: list[str], flag: str) -> list[str]:
    """Every value given to `flag`."""
    return [command[i + 1] for i, word in enumerate(command) if word == flag]


def test_the_templates_image_and_command_as_the_images_user_on_a_read_only_root(
    tmp_path: Path,
) -> None:
    command = ContainerEngine().create_command(invocation(tmp_path), "c1")
    assert command[:4] == ["podman", "create", "--name", "c1"]
    image = command.index("mnist-argo-steps:0.1.0")
    assert command[image + 1 :] == ["python", "-m", "steps.aggregate", "--models-dir", "in/models"]
    assert "--user" not in command and "-u" not in command  # the image's USER, as in the pod
    assert options(command, "--workdir") == ["/work"]
    assert "--read-only" in command
    assert [t.split(":")[0] for t in options(command, "--tmpfs")] == ["/tmp"]
    assert options(command, "--network") == ["none"]
    networked = ContainerEngine().create_command(invocation(tmp_path, network=True), "c1")
    assert options(networked, "--network") == ["host"]  # the emulator and the store, as seen here


def test_inputs_empty_dirs_and_progress_are_mounted_at_their_paths_and_mounts_at_the_same_path(
    tmp_path: Path,
) -> None:
    store, data = tmp_path / "store", tmp_path / "mnist.npz"
    task = invocation(tmp_path, mounts=((store, True), (data, False)))
    volumes = options(ContainerEngine().create_command(task, "c1"), "--volume")
    assert f"{tmp_path / 'task' / 'in' / 'models'}:/work/in/models" in volumes
    assert f"{tmp_path / 'task' / 'out'}:/work/out" in volumes
    assert f"{store}:{store}:rw" in volumes
    assert f"{data}:{data}:ro" in volumes
    progress = tmp_path / "progress" / "train-0"  # in Argo's shared folder
    command = ContainerEngine().create_command(invocation(tmp_path, progress_file=progress), "c1")
    assert f"{progress.parent}:/var/run/argo" in options(command, "--volume")
    assert "ARGO_PROGRESS_FILE=/var/run/argo/train-0" in options(command, "--env")


def test_limits_become_memory_and_cpus_without_swap(tmp_path: Path) -> None:
    task = invocation(tmp_path, memory_limit="3Gi", cpu_limit="500m")
    command = ContainerEngine().create_command(task, "c1")
    assert options(command, "--memory") == [f"{3 * 2**30}b"]
    assert options(command, "--memory-swap") == [f"{3 * 2**30}b"]
    assert options(command, "--cpus") == ["0.5"]
    unlimited = ContainerEngine().create_command(invocation(tmp_path), "c1")
    assert "--memory" not in unlimited and "--cpus" not in unlimited


def test_the_emulator_is_passed_through_only_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.setenv("HOME", "/root")  # the host's other variables never reach the container
    environment = options(ContainerEngine().create_command(invocation(tmp_path), "c1"), "--env")
    assert environment == ["TF_NUM_INTEROP_THREADS=1"]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9023")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    environment = options(ContainerEngine().create_command(invocation(tmp_path), "c1"), "--env")
    assert "STORAGE_EMULATOR_HOST=http://127.0.0.1:9023" in environment
    assert "GOOGLE_CLOUD_PROJECT=test" in environment


def test_an_image_override_and_docker(tmp_path: Path) -> None:
    command = ContainerEngine(program="docker", image="other:1").create_command(
        invocation(tmp_path), "c1"
    )
    assert command[:2] == ["docker", "create"] and "other:1" in command
    assert "mnist-argo-steps:0.1.0" not in command
    assert ContainerEngine(program="/usr/bin/docker").name == "docker"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3Gi", 3 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1G", 10**9),
        ("1.5Gi", 3 * 2**29),
        ("500m", 0.5),
    ],
)
def test_quantities(text: str, expected: float) -> None:
    assert quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "3GB", "-1", "lots"])
def test_bad_quantities_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        quantity(bad)


def test_container_names_are_safe_and_unique() -> None:
    first, second = container_name("train-round-1(0:0)"), container_name("train-round-1(0:0)")
    assert first != second and first.startswith("mnist-train-round-1-0-0-")
