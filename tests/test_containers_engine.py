"""The container engine for real: small fake steps (`python -c ...`) and a real one (aggregate) in the built
steps image, as uid 10001 on a read-only root, with their inputs laid out as Argo's executor lays them out.

The permission fault of a real cluster run: argoexec creates a directory input with `os.MkdirAll(dir, 0o700)`
as root and chmods it only when the artifact sets `mode` (`workflow/executor/executor.go:loadArtifact`), so a
step running as uid 10001 cannot read it. Files are written 0644 (`executor.go`, the `mode := 0o644` default).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path, PurePosixPath

import pytest

from tests.support import containers
from tests.support.containers import IMAGE_UID, Images, leftover_containers
from workflows.local.containers import ContainerEngine
from workflows.local.engines import DeadlineExceeded, Invocation

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name

WORK = PurePosixPath("/work")


def fake_step(tmp_path: Path, images: Images, code: str, **changes) -> Invocation:
    fields = {
        "name": "fake-step(0)",
        "image": images.steps,
        "command": ["python", "-c", code],
        "environment": {},
        "working_dir": WORK,
        "host_dir": tmp_path / "task",
        "scratch": (PurePosixPath("out"),),
    }
    (tmp_path / "task").mkdir(parents=True, exist_ok=True)
    return Invocation(**(fields | changes))


def run(
    engine: ContainerEngine, task: Invocation, tmp_path: Path, timeout: float = 120
) -> tuple[int, str]:
    log_path = tmp_path / f"{task.name}.log"
    with log_path.open("w") as log:
        code = engine.execute(task, log, timeout=timeout)
    return code, log_path.read_text()


def lay_out_folder_input(
    host_dir: Path, path: str, files: dict[str, bytes], mode: int | None
) -> None:
    """As argoexec does: the folder made by root 0700 (or the artifact's `mode`), its files 0644."""
    folder = host_dir / path
    folder.mkdir(parents=True)
    folder.chmod(0o700 if mode is None else mode)
    for name, content in files.items():
        (folder / name).write_bytes(content)
        (folder / name).chmod(0o644)


LIST_MODELS = "import os; print(sorted(os.listdir('in/models')))"


@pytest.mark.parametrize(("mode", "readable"), [(None, False), (0o755, True)])
def test_a_root_owned_0700_input_folder_is_unreadable_to_the_step(
    tmp_path: Path, images: Images, mode: int | None, readable: bool
) -> None:
    task = fake_step(tmp_path, images, LIST_MODELS, inputs=(PurePosixPath("in/models"),))
    lay_out_folder_input(task.host_dir, "in/models", {"0.h5": b"x"}, mode)
    code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    if readable:
        assert code == 0, log
        assert "['0.h5']" in log
    else:
        assert code == 1, log
        assert "PermissionError" in log and "in/models" in log


def write_models(folder: Path, shards: int) -> None:
    """Two small trained-shape models with their stats, made by the steps themselves (init)."""
    folder.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "steps.init",
                "--seed",
                str(shard),
                "--out",
                str(folder / f"{shard}.h5"),
            ],
            check=True,
            capture_output=True,
        )
        (folder / f"{shard}.json").write_text(json.dumps({"samples": 100 * (shard + 1)}))


@pytest.fixture(scope="module")
def worker_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("models")
    write_models(folder, 2)
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize(("mode", "fails"), [(None, True), (0o755, False)])
def test_aggregate_cannot_read_its_models_unless_the_artifact_sets_mode(
    tmp_path: Path, images: Images, worker_models: dict[str, bytes], mode: int | None, fails: bool
) -> None:
    """Issue 10 point 2, reproduced: the real aggregate step, its models folder as argoexec leaves it."""
    task = fake_step(
        tmp_path,
        images,
        "",
        name="aggregate-round-1",
        command=[
            "python",
            "-m",
            "steps.aggregate",
            "--models-dir",
            "in/models",
            "--out",
            "out/model.h5",
        ],
        inputs=(PurePosixPath("in/models"),),
        outputs=(PurePosixPath("out/model.h5"),),
    )
    lay_out_folder_input(task.host_dir, "in/models", worker_models, mode)
    code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    averaged = task.host_path("out/model.h5")
    if fails:
        # The folder cannot even be listed: Path.glob swallows the PermissionError, so the step reports
        # "no .h5 models in in/models" (exit 2) while two models sit there.
        assert code != 0, log
        assert "in/models" in log
        assert not averaged.exists()
    else:
        assert code == 0, log
        assert averaged.stat().st_size > 0


def test_the_step_runs_as_the_images_user_on_a_read_only_root(
    tmp_path: Path, images: Images
) -> None:
    code = """
import os, pathlib
print("uid", os.getuid())
pathlib.Path("/tmp/scratch").write_text("tmp is writable")
pathlib.Path("out/ok").write_text("emptyDir is writable")
try:
    pathlib.Path("/work/not-allowed").write_text("x")
except OSError as error:
    print("root:", error.strerror)
"""
    task = fake_step(tmp_path, images, code)
    exit_code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    assert exit_code == 0, log
    assert f"uid {IMAGE_UID}" in log
    assert "root: Read-only file system" in log
    assert task.host_path("out/ok").read_text() == "emptyDir is writable"


def test_outputs_on_the_empty_dir_come_back_whatever_the_exit_code(
    tmp_path: Path, images: Images
) -> None:
    code = """
import pathlib, sys
pathlib.Path("out/model.h5").write_text("on the emptyDir")
pathlib.Path("out/models").mkdir()
pathlib.Path("out/models/0.h5").write_text("a folder output")
sys.exit(3)
"""
    task = fake_step(
        tmp_path,
        images,
        code,
        outputs=(PurePosixPath("out/model.h5"), PurePosixPath("out/models")),
    )
    exit_code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    assert exit_code == 3, (
        log
    )  # outputs are read whatever the exit code, as Argo's wait container does
    assert task.host_path("out/model.h5").read_text() == "on the emptyDir"
    assert task.host_path("out/models/0.h5").read_text() == "a folder output"
    assert not leftover_containers(images.engine, "fake-step")


def test_progress_is_visible_on_the_host_while_the_step_runs(
    tmp_path: Path, images: Images
) -> None:
    code = """
import os, time
with open(os.environ["ARGO_PROGRESS_FILE"], "w") as progress:
    progress.write("1/2\\n")
time.sleep(20)
"""
    progress = tmp_path / "progress" / "fake-step"
    task = fake_step(tmp_path, images, code, progress_file=progress)
    engine = ContainerEngine(program=images.engine)
    finished = threading.Event()
    thread = threading.Thread(target=lambda: (run(engine, task, tmp_path), finished.set()))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while (
            not (progress.is_file() and progress.read_text().strip())
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert not finished.is_set(), "the step ended before its progress was seen"
        assert progress.read_text().strip() == "1/2"
    finally:
        engine.stop_all()
        thread.join(timeout=60)


def test_a_deadline_stops_and_removes_the_container(tmp_path: Path, images: Images) -> None:
    task = fake_step(tmp_path, images, "import time; time.sleep(300)", name="deadline-step")
    engine = ContainerEngine(program=images.engine)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        run(engine, task, tmp_path, timeout=3)
    assert time.monotonic() - started < 60
    assert not leftover_containers(images.engine, "deadline-step")


def test_stop_all_stops_and_removes_every_container(tmp_path: Path, images: Images) -> None:
    engine = ContainerEngine(program=images.engine)
    results: list[int] = []
    threads = []
    for shard in range(2):
        task = fake_step(
            tmp_path / str(shard),
            images,
            "import time; time.sleep(300)",
            name=f"stopped-step({shard})",
        )
        threads.append(
            threading.Thread(
                target=lambda t=task, s=shard: results.append(run(engine, t, tmp_path / str(s))[0])
            )
        )
        threads[-1].start()
    deadline = time.monotonic() + 60
    while (
        len(leftover_containers(images.engine, "stopped-step")) < 2 and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    engine.stop_all()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 2 and all(code != 0 for code in results)
    assert not leftover_containers(images.engine, "stopped-step")


def test_no_network_unless_the_step_needs_one(tmp_path: Path, images: Images) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('reached')"
        engine = ContainerEngine(program=images.engine)
        isolated, log = run(engine, fake_step(tmp_path, images, code, name="isolated"), tmp_path)
        assert isolated != 0 and "reached" not in log
        networked, log = run(
            engine, fake_step(tmp_path, images, code, name="networked", network=True), tmp_path
        )
        assert networked == 0 and "reached" in log


def test_limits_reach_the_containers_cgroup(tmp_path: Path, images: Images) -> None:
    code = """
import pathlib
for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if pathlib.Path(path).exists():
        print("memory", pathlib.Path(path).read_text().strip())
"""
    task = fake_step(tmp_path, images, code, memory_limit="512Mi", cpu_limit="500m")
    exit_code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    assert exit_code == 0, log
    assert f"memory {512 * 2**20}" in log


def test_a_writable_folder_mount_lets_the_images_user_write(tmp_path: Path, images: Images) -> None:
    """A folder store made by root (0755) is bind-mounted at its path; the step, uid 10001, publishes there."""
    store, data = tmp_path / "store", tmp_path / "mnist.txt"
    store.mkdir(mode=0o755)
    (store / "models").mkdir(mode=0o755)
    data.write_text("read-only data")
    code = f"""
import pathlib
pathlib.Path("{store}/models/LATEST").write_text("mnist-abcde")
print(pathlib.Path("{data}").read_text())
try:
    pathlib.Path("{data}").write_text("x")
except OSError as error:
    print("data:", error.strerror)
"""
    task = fake_step(tmp_path, images, code, mounts=((store, True), (data, False)))
    exit_code, log = run(ContainerEngine(program=images.engine), task, tmp_path)
    assert exit_code == 0, log
    assert (store / "models" / "LATEST").read_text() == "mnist-abcde"
    assert "read-only data" in log and "data: Read-only file system" in log
