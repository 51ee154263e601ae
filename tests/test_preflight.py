"""What submit.py can know before a local run (workflows/preflight.py), it refuses before the run starts:
one line, exit code 2, nothing created, no task's line printed. Each case here started a run that failed
later with exit code 1 and many lines (or, for a bad flag, printed argparse's whole usage block)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.project import run_submit


def refused(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """submit.py --local ARGS: assert it is refused at once with one line and nothing made in
    tmp_path's `work`; return that line."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    before = sorted(work.rglob("*"))
    result = run_submit(
        "--local",
        "--logs-dir",
        str(work / "logs"),
        *args,
        env=env or clean_environment(),
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    assert sorted(work.rglob("*")) == before, "a refused run created files"
    return lines[0]


def clean_environment() -> dict[str, str]:
    settings = ("ARTIFACTS", "MNIST_SOURCE", "WORKER_NUMBER", "EPOCH", "BATCH", "ROUNDS")
    return {k: v for k, v in os.environ.items() if k not in settings and not k.startswith("ARGO_")}


@pytest.fixture
def source(tmp_path: Path, small_mnist: Path) -> str:
    return str(small_mnist)


def test_a_file_as_the_store(tmp_path: Path, source: str) -> None:
    store = tmp_path / "work" / "store.txt"
    store.parent.mkdir()
    store.write_text("not a folder")
    line = refused(tmp_path, "--artifacts", str(store), "--source", source)
    assert line == f"submit: error: --artifacts {store} is a file, not a folder"


def test_a_store_in_a_folder_that_does_not_exist_creates_nothing(
    tmp_path: Path, source: str
) -> None:
    """--artifacts /nonexistent/dir/x made /nonexistent/dir/x and its parents."""
    store = tmp_path / "work" / "nonexistent" / "dir" / "x"
    line = refused(tmp_path, "--artifacts", str(store), "--source", source)
    assert f"its folder {store.parent} does not exist" in line
    assert not (tmp_path / "work" / "nonexistent").exists()


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_a_local_source_that_is_not_a_file(tmp_path: Path, what: str) -> None:
    path = tmp_path / "work" / "mnist.npz"
    if what == "folder":
        path.mkdir(parents=True)
    line = refused(tmp_path, "--artifacts", str(tmp_path / "work" / "store"), "--source", str(path))
    expected = "no such file" if what == "missing" else "is not a file"
    assert line.startswith(f"submit: error: --source {path}") and expected in line


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "3", "--min-workers", "4"], "--min-workers 4 is more than --workers 3"),
        (["--workers", "20", "--limit", "10"], "--workers 20 is more than the 10 training samples"),
        (["--alpha", "0.1"], "--alpha 0.1 shapes only --partition dirichlet shards"),
        (
            ["--learning-rate", "0.001", "--final-learning-rate", "0.01"],
            "--final-learning-rate 0.01 is above --learning-rate 0.001",
        ),
        (["--max-accuracy-drop", "0.2"], "the gate of --serve if-not-worse"),
        (["--serve", "always", "--min-accuracy", "0.9"], "with --serve always it does nothing"),
        (["--retries", "0", "--retry-backoff", "1s"], "with --retries 0 it does nothing"),
    ],
)
def test_settings_that_contradict_each_other(
    tmp_path: Path, source: str, flags: list[str], message: str
) -> None:
    store = str(tmp_path / "work" / "store")
    line = refused(tmp_path, "--artifacts", store, "--source", source, *flags)
    assert message in line, line


def test_settings_that_agree_are_not_refused() -> None:
    from workflows.pipeline.settings import PipelineSettings
    from workflows.preflight import inconsistency

    for agreeing in (
        PipelineSettings(),
        PipelineSettings(partition="dirichlet", alpha=0.1),
        PipelineSettings(serve="if-not-worse", max_accuracy_drop=0.2),
        PipelineSettings(workers=3, min_workers=3, limit=3),
        PipelineSettings(learning_rate=0.001, final_learning_rate=0.001),
    ):
        assert inconsistency(agreeing) is None, agreeing


def test_an_engine_that_is_not_installed(tmp_path: Path, source: str) -> None:
    environment = clean_environment() | {"PATH": str(tmp_path / "empty")}
    line = refused(
        tmp_path,
        *("--artifacts", str(tmp_path / "work" / "store"), "--source", source),
        *("--engine", "docker"),
        env=environment,
    )
    assert line == "submit: error: --engine docker: the container engine 'docker' is not installed"


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker command")
def test_docker_without_its_daemon(tmp_path: Path, source: str) -> None:
    """A real docker command whose daemon is not there (a socket nothing listens on)."""
    environment = clean_environment() | {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    line = refused(
        tmp_path,
        *("--artifacts", str(tmp_path / "work" / "store"), "--source", source),
        *("--engine", "docker"),
        env=environment,
    )
    assert line.startswith("submit: error: --engine docker: docker does not answer: "), line


@pytest.mark.parametrize(
    "flags", [["--workers", "x"], ["--wrokers", "3"], ["--engine", "kubernetes"]]
)
def test_a_bad_flag_is_one_line_pointing_to_help(tmp_path: Path, flags: list[str]) -> None:
    """argparse printed its 22-line usage block before the error."""
    line = refused(tmp_path, *flags)
    assert line.startswith("python workflows/submit.py: error: ") and line.endswith("(see --help)")


@pytest.mark.parametrize("name", ["Quick_Try", "-quick", "quick-", "q" * 64, "a b"])
def test_a_name_argo_would_refuse(tmp_path: Path, source: str, name: str) -> None:
    line = refused(tmp_path, f"--name={name}", "--source", source)
    assert "a run's name is lowercase letters, digits" in line


def test_a_name_already_in_the_store(tmp_path: Path, source: str) -> None:
    store = tmp_path / "work" / "store"
    (store / "models" / "mnist" / "quick-try").mkdir(parents=True)
    (store / "models" / "mnist" / "quick-try" / "run.json").write_text("{}")
    line = refused(tmp_path, "--artifacts", str(store), "--source", source, "--name", "quick-try")
    assert "a run of that name is already in" in line
