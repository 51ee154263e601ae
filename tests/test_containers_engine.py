"""The container engine for real: small fake steps (`python -c ...`) in the built steps image, as uid 10001
on a read-only root, their inputs laid out as Argo's executor lays them out."""

from __future__ import annotations

import threading
import time
from pathlib import Path, PurePosixPath

import pytest

from tests.support import containers
from tests.support.containers import IMAGE_UID, Images, invocation, leftover_containers
from workflows.local.containers import ContainerEngine
from workflows.local.engines import Invocation

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name


def run(engine: ContainerEngine, task: Invocation, tmp_path: Path, timeout: float = 120):
    log_path = tmp_path / f"{task.name}.log"
    with log_path.open("w") as log:
        code = engine.execute(task, log, timeout=timeout)
    return code, log_path.read_text()


@pytest.mark.parametrize(("mode", "readable"), [(0o700, False), (0o755, True)])
def test_a_root_owned_0700_input_folder_is_unreadable_to_the_step(
    tmp_path: Path, images: Images, mode: int, readable: bool
) -> None:
    code = "import os; print(sorted(os.listdir('in/models')))"
    task = invocation(tmp_path / "task", code, inputs=(PurePosixPath("in/models"),))
    folder = task.host_dir / "in/models"
    folder.mkdir(parents=True)
    folder.chmod(mode)
    (folder / "0.h5").write_bytes(b"x")
    (folder / "0.h5").chmod(0o644)
    exit_code, log = run(ContainerEngine(images.engine), task, tmp_path)
    assert (exit_code, "['0.h5']" in log) == ((0, True) if readable else (1, False)), log
    assert readable or ("PermissionError" in log and "in/models" in log)


def test_the_step_runs_as_the_images_user_on_a_read_only_root_within_its_limits(
    tmp_path: Path, images: Images
) -> None:
    """Outputs on the emptyDir come back whatever the exit code, as Argo's wait container reads them."""
    code = """
import os, pathlib, sys
print("uid", os.getuid())
pathlib.Path("/tmp/scratch").write_text("tmp is writable")
pathlib.Path("out/model.h5").write_text("on the emptyDir")
pathlib.Path("out/models").mkdir()
pathlib.Path("out/models/0.h5").write_text("a folder output")
try:
    pathlib.Path("/work/not-allowed").write_text("x")
except OSError as error:
    print("root:", error.strerror)
for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if pathlib.Path(path).exists():
        print("memory", pathlib.Path(path).read_text().strip())
sys.exit(3)
"""
    task = invocation(tmp_path / "task", code, memory=512 * 2**20, cpus=0.5)
    exit_code, log = run(ContainerEngine(images.engine), task, tmp_path)
    assert exit_code == 3, log
    assert f"uid {IMAGE_UID}" in log and "root: Read-only file system" in log
    assert f"memory {512 * 2**20}" in log
    assert task.host_path("out/model.h5").read_text() == "on the emptyDir"
    assert task.host_path("out/models/0.h5").read_text() == "a folder output"
    assert not leftover_containers(images.engine, "fake-step")


def test_progress_is_seen_while_steps_run_and_stop_all_stops_and_removes_them(
    tmp_path: Path, images: Images
) -> None:
    code = """
import os, time
with open(os.environ["ARGO_PROGRESS_FILE"], "w") as progress:
    progress.write("1/2\\n")
time.sleep(300)
"""
    engine = ContainerEngine(images.engine)
    results: list[int] = []
    threads, progress = [], [tmp_path / f"progress-{shard}" / "p" for shard in range(2)]
    for shard, file in enumerate(progress):
        name = f"stopped-step({shard})"
        task = invocation(tmp_path / str(shard) / "task", code, name=name, progress_file=file)
        call = lambda t=task, s=shard: results.append(run(engine, t, tmp_path / str(s))[0])  # noqa: E731
        threads.append(threading.Thread(target=call))
        threads[-1].start()
    try:
        deadline = time.monotonic() + 60
        while not all(p.is_file() and p.read_text().strip() for p in progress):
            assert time.monotonic() < deadline, "no progress seen"
            time.sleep(0.2)
        assert [p.read_text().strip() for p in progress] == ["1/2", "1/2"] and not results
    finally:
        engine.stop_all()
        for thread in threads:
            thread.join(timeout=60)
    assert len(results) == 2 and all(code != 0 for code in results)
    assert not leftover_containers(images.engine, "stopped-step")


def test_a_deadline_stops_and_removes_the_container(tmp_path: Path, images: Images) -> None:
    task = invocation(tmp_path / "task", "import time; time.sleep(300)", name="deadline-step")
    assert run(ContainerEngine(images.engine), task, tmp_path, timeout=3)[0] is None
    assert not leftover_containers(images.engine, "deadline-step")


def test_a_writable_folder_mount_lets_the_images_user_write(tmp_path: Path, images: Images) -> None:
    """A folder store (0755) the command names is bind-mounted at its path; the step, uid 10001, publishes
    there; a file it names is mounted read-only."""
    store, data = tmp_path / "store", tmp_path / "mnist.txt"
    (store / "models").mkdir(parents=True, mode=0o755)
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
    task = invocation(tmp_path / "task", code)
    task.command.extend([str(store), str(data)])
    exit_code, log = run(ContainerEngine(images.engine), task, tmp_path)
    assert exit_code == 0, log
    assert (store / "models" / "LATEST").read_text() == "mnist-abcde"
    assert "read-only data" in log and "data: Read-only file system" in log
