"""The container engine's command line (workflows/local/containers.py) without running a container: what
`podman create` is asked for is what an Argo pod of the template would be (run for real: test_containers_*)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from tests.support.containers import invocation
from workflows.local.containers import ContainerEngine, container_name


def create(tmp_path: Path, program: str = "podman", **changes) -> list[str]:
    """The `create` command line of an aggregate try, with `changes` to its invocation."""
    command = ["python", "-m", "steps.aggregate", "--models-dir", "in/models"]
    environment = {"TF_NUM_INTEROP_THREADS": "1"}
    aggregate = dict(
        name="aggregate-round-1", command=command, inputs=(PurePosixPath("in/models"),)
    )
    task = invocation(tmp_path / "task", **(aggregate | {"environment": environment} | changes))
    return ContainerEngine(program).create_command(task, "c1")


def options(command: list[str], flag: str) -> list[str]:
    """Every value given to `flag`."""
    return [command[i + 1] for i, word in enumerate(command) if word == flag]


def test_the_templates_image_and_command_as_the_images_user_on_a_read_only_root(
    tmp_path: Path,
) -> None:
    command = create(tmp_path)
    assert command[:4] == ["podman", "create", "--name", "c1"]
    image = command.index("mnist-argo-steps:0.1.0")
    assert command[image + 1 :] == ["python", "-m", "steps.aggregate", "--models-dir", "in/models"]
    assert "--user" not in command and "-u" not in command  # the image's USER, as in the pod
    assert options(command, "--workdir") == ["/work"] and "--read-only" in command
    assert options(command, "--network") == ["none"]
    networked = create(tmp_path, command=["python", "-m", "steps.split", "gs://bucket/x"])
    assert options(networked, "--network") == ["host"]  # the emulator and the store, as seen here
    assert create(tmp_path, "/usr/bin/docker")[:2] == ["/usr/bin/docker", "create"]
    assert ContainerEngine("/usr/bin/docker").name == "docker"


def test_inputs_empty_dirs_and_progress_are_mounted_at_their_paths_and_mounts_at_the_same_path(
    tmp_path: Path,
) -> None:
    store, data = tmp_path / "store", tmp_path / "mnist.npz"
    store.mkdir()
    data.write_bytes(b"")
    progress = tmp_path / "progress" / "train-0"  # in Argo's shared folder
    command = create(
        tmp_path, command=["python", "x", str(store), str(data)], progress_file=progress
    )
    volumes = options(command, "--volume")
    assert f"{tmp_path / 'task' / 'in' / 'models'}:/work/in/models" in volumes
    assert f"{tmp_path / 'task' / 'out'}:/work/out" in volumes
    assert f"{store}:{store}:rw" in volumes and f"{data}:{data}:ro" in volumes
    assert f"{progress.parent}:/var/run/argo" in volumes
    assert "ARGO_PROGRESS_FILE=/var/run/argo/train-0" in options(command, "--env")


def test_limits_become_memory_and_cpus_without_swap(tmp_path: Path) -> None:
    command = create(tmp_path, memory=3 * 2**30, cpus=0.5)
    assert options(command, "--memory") == options(command, "--memory-swap") == [f"{3 * 2**30}b"]
    assert options(command, "--cpus") == ["0.5"]
    unlimited = create(tmp_path)
    assert "--memory" not in unlimited and "--cpus" not in unlimited


def test_the_emulator_is_passed_through_only_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", "/root")  # the host's other variables never reach the container
    progress = "ARGO_PROGRESS_FILE=/var/run/argo/progress"
    assert options(create(tmp_path), "--env") == ["TF_NUM_INTEROP_THREADS=1", progress]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9023")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    environment = options(create(tmp_path), "--env")
    assert "STORAGE_EMULATOR_HOST=http://127.0.0.1:9023" in environment
    assert "GOOGLE_CLOUD_PROJECT=test" in environment


def test_container_names_are_safe_and_unique() -> None:
    first, second = container_name("train-round-1(0:0)"), container_name("train-round-1(0:0)")
    assert first != second and first.startswith("mnist-train-round-1-0-0-")
