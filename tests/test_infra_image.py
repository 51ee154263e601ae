"""The container images (infra/docker/Dockerfile) parsed, and the wheel they install built from exactly
what .dockerignore sends; `make test-containers` builds and runs the images themselves."""

from __future__ import annotations

import fnmatch
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.dockerfile import effective, instructions, stages
from tests.support.project import ROOT

PACKAGES = ("steps", "workflows", "ui")


def build_args() -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults."""
    declared = {}
    for instruction, value in instructions():
        if instruction == "FROM":
            break
        if instruction == "ARG":
            name, _, default = value.partition("=")
            declared[name.strip()] = default.strip()
    return declared


def test_base_images_are_one_pinned_python_matching_ci() -> None:
    external = [
        value.split()[0]
        for instruction, value in instructions()
        if instruction == "FROM" and value.split()[0] not in (*stages(), "scratch")
    ]
    # One base, a build argument (a machine without a registry builds on a stand-in) whose default is the
    # official image. (scratch is no image: the empty filesystem the source stage holds the project in.)
    assert external and set(external) == {"${BASE_IMAGE}"}, external
    base = build_args()["BASE_IMAGE"]
    assert base == "python:3.11.11-slim-bookworm", "a Python pinned to its patch release"
    minor = tuple(int(part) for part in base.removeprefix("python:").split(".")[:2])
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(part) for part in requires.removeprefix(">=").split("."))
    # CI tests the project on this interpreter; the image must run the same minor version.
    assert minimum <= minor == sys.version_info[:2]


def test_each_image_installs_only_its_own_dependencies() -> None:
    """The steps image gets the core and TensorFlow, the page image the core and Streamlit (it runs the
    network in numpy); neither gets the submit tools (Hera), the dev tools, or TensorFlow's CUDA build."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda requirements: {Requirement(r).name for r in requirements}  # noqa: E731
    core, extras = names(project["dependencies"]), project["optional-dependencies"]
    assert {"numpy", "google-cloud-storage", "h5py"} <= core
    assert not core & {"tensorflow", "tensorflow-cpu", "streamlit", "hera", "pytest"}
    assert "tensorflow-cpu" in names(extras["train"])
    assert {"streamlit", "streamlit-drawable-canvas"} <= names(extras["page"])
    assert not names(extras["page"]) & {"hera", "pytest", "tensorflow", "tensorflow-cpu"}
    assert "hera" in names(extras["submit"])
    # tensorflow-cpu where it exists; the full wheel (CUDA kernels included) only where it does not.
    for requirement in map(Requirement, extras["train"]):
        if requirement.name.startswith("tensorflow"):
            on_linux_x86 = requirement.marker.evaluate(
                {"sys_platform": "linux", "platform_machine": "x86_64"}
            )
            assert on_linux_x86 == (requirement.name == "tensorflow-cpu"), requirement
    # Running (make run) needs both images' dependencies and Hera; the dev environment (make setup,
    # make test) adds to that what the tests need.
    assert extras["run"] == ["mnist-argo[train,page,submit]"]
    assert "mnist-argo[run]" in extras["dev"]


def test_images_run_as_a_non_root_user_with_their_commands() -> None:
    """Which user: test_infra_pod_security.py (the pods' own)."""
    named = stages()
    for target in ("steps", "train"):
        steps = dict(effective(target))
        assert steps["WORKDIR"] == "/work"
        uid = steps["USER"].split(":")[0]
        assert f"--owner={uid}" in steps["RUN"] and "/work" in steps["RUN"], "/work is the user's"
    page = dict(named["page"])
    # ui.serve runs `streamlit run ui/app.py` with its upload store bounded (ui/uploads.py)
    assert shlex.split(page["CMD"].strip("[]").replace(",", " ")) == ["python", "-m", "ui.serve"]
    assert page["EXPOSE"] == "8501" and "/_stcore/health" in page["HEALTHCHECK"]
    # Each final image copies its own build stage's environment, not its sources or caches.
    for target in ("steps", "train", "page"):
        copied = [v for i, v in effective(target) if i == "COPY" and v.startswith("--from")]
        assert copied == [f"--from=build-{target} /opt/venv /opt/venv"], copied
    assert not [v for i, v in named["runtime"] if i == "COPY"]


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def in_build_context(relative: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for pattern in dockerignore_patterns():
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            included = negated
    return included


def test_dockerignore_sends_the_project_and_nothing_else() -> None:
    needed = ["pyproject.toml", "uv.lock", "README.md", "ui/app.py", "steps/lib/staged_outputs.py"]
    needed.append("workflows/pipeline/workflow.py")
    left_out = [".venv/bin/python", ".runs/x", ".git/HEAD", "tests/conftest.py", "ui/__pycache__/x"]
    assert [path for path in needed + left_out if in_build_context(path)] == needed
    copied = [value.split()[0] for instruction, value in instructions() if instruction == "COPY"]
    for source in copied:
        if not source.startswith("--from"):
            assert in_build_context(source.rstrip("/")), source


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built as the image builds it: from the files of the Docker build context."""
    context = tmp_path_factory.mktemp("context")
    # Top-level entries left out are not walked (.venv, .runs, .git can be large); the allow-list
    # .dockerignore re-includes nothing below a left-out folder.
    tops = [top for top in sorted(ROOT.iterdir()) if in_build_context(top.name)]
    for path in [p for top in tops for p in ([top] if top.is_file() else sorted(top.rglob("*")))]:
        relative = path.relative_to(ROOT).as_posix()
        if path.is_file() and in_build_context(relative):
            (context / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, context / relative)
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out)]
    subprocess.run([*pip, "."], cwd=context, check=True, capture_output=True, text=True)
    (built,) = out.glob("mnist_argo-*.whl")
    return built


def test_wheel_holds_every_package_the_images_run(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names, package
        for module in (ROOT / package).rglob("*.py"):
            assert module.relative_to(ROOT).as_posix() in names, module
    assert {"ui/app.py", "steps/train.py", "workflows/pipeline/workflow.py"} <= names


def test_wheel_requires_exactly_the_projects_dependencies(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
    lines = archive.read(metadata).decode().splitlines()
    required = {
        line.removeprefix("Requires-Dist: ") for line in lines if line.startswith("Requires-Dist: ")
    }
    runtime = {line for line in required if "extra ==" not in line}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    normalise = lambda requirement: str(Requirement(requirement)).lower()  # noqa: E731
    assert {normalise(item) for item in runtime} == {normalise(item) for item in declared}
