"""What the container tests share: the engine (podman or docker) and the three images, built once per session.
Selected (`make test-containers`), they fail, never skip, when no engine answers or an image cannot be built."""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from tests.support.project import ROOT
from workflows.local.engines import Invocation

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
STEPS_IMAGE = f"mnist-argo-steps:{VERSION}"  # the steps that do not train: no TensorFlow
TRAIN_IMAGE = f"mnist-argo-train:{VERSION}"  # train, with TensorFlow
PAGE_IMAGE = f"mnist-argo-page:{VERSION}"
IMAGE_UID = 10001


@dataclass(frozen=True)
class Images:
    engine: str  # podman or docker
    steps: str
    train: str
    page: str


def invocation(host_dir: Path, code: str = "pass", **changes) -> Invocation:
    """A try of `python -c code` in the steps image, in /work (`host_dir` here) with the pipeline's emptyDirs."""
    host_dir.mkdir(parents=True, exist_ok=True)
    fields = {"name": "fake-step(0)", "image": STEPS_IMAGE, "command": ["python", "-c", code]}
    fields |= {"environment": {}, "working_dir": PurePosixPath("/work"), "host_dir": host_dir}
    fields |= {"progress_file": host_dir.parent / "argo" / "progress", "on_output": lambda _: None}
    return Invocation(
        **(fields | {"scratch": (PurePosixPath("out"), PurePosixPath("/tmp"))} | changes)
    )


def engine_program() -> str:
    found = subprocess.run(
        [str(ROOT / "infra" / "docker" / "engine.sh")], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.fail(f"no container engine for the container tests: {found.stderr.strip()}")
    return found.stdout.strip()


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Images:
    """The images, built with `make images`'s script (the layer cache makes a rebuild take seconds)."""
    engine = engine_program()
    log = tmp_path_factory.mktemp("build") / "build.log"
    with log.open("w") as out:
        built = subprocess.run(
            [str(ROOT / "infra" / "docker" / "build-images.sh")],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None,
        )
    if built.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        pytest.fail(f"building the images failed (exit {built.returncode}):\n{tail}")
    return Images(engine=engine, steps=STEPS_IMAGE, train=TRAIN_IMAGE, page=PAGE_IMAGE)


def leftover_containers(engine: str, name_part: str) -> list[str]:
    """Names of containers (running or not) whose name contains `name_part`."""
    command = [engine, "ps", "--all", "--format", "{{.Names}}"]
    listed = subprocess.run(command, capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.split() if name_part in name]


def finds_tensorflow(engine: str, image: str) -> bool:
    """Whether `tensorflow` can be found in the image (found, not imported: that takes seconds)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"
    command = [engine, "run", "--rm", "--network", "none", image, "python", "-c", probe]
    found = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert found.returncode in (0, 1), found.stderr
    return found.returncode == 0
