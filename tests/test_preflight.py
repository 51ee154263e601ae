"""What submit.py can know before a local run (workflows/preflight.py), it refuses before the run
starts: one line, exit code 2, nothing created, no task's line printed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from workflows.submit import main

SETTINGS = ("ARTIFACTS", "MNIST_SOURCE", "WORKER_NUMBER", "EPOCH", "BATCH", "ROUNDS")


@pytest.fixture
def refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., str]:
    """submit.py --local ARGS: refused at once in one line, nothing made in tmp_path's `work`."""
    for name in [*SETTINGS, *(k for k in os.environ if k.startswith("ARGO_"))]:
        monkeypatch.delenv(name, raising=False)

    def run(*args: str, env: dict[str, str] | None = None) -> str:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        before = sorted(work.rglob("*"))
        try:
            code = main(["--local", "--logs-dir", str(work / "logs"), *args])
        except SystemExit as exit:  # argparse's refusal
            code = int(exit.code or 0)
        out, err = capsys.readouterr()
        assert (code, out) == (2, ""), out + err
        assert len(err.splitlines()) == 1, err
        assert sorted(work.rglob("*")) == before, "a refused run created files"
        return err.splitlines()[0]

    return run


@pytest.fixture
def source(small_mnist: Path) -> str:
    return str(small_mnist)


def test_a_file_as_the_store(refused: Callable[..., str], tmp_path: Path, source: str) -> None:
    store = tmp_path / "work" / "store.txt"
    store.parent.mkdir()
    store.write_text("not a folder")
    line = refused("--artifacts", str(store), "--source", source)
    assert line == f"submit: error: --artifacts {store} is a file, not a folder"


def test_a_store_in_a_folder_that_does_not_exist_creates_nothing(
    refused: Callable[..., str], tmp_path: Path, source: str
) -> None:
    """--artifacts /nonexistent/dir/x made /nonexistent/dir/x and its parents."""
    store = tmp_path / "work" / "nonexistent" / "dir" / "x"
    line = refused("--artifacts", str(store), "--source", source)
    assert f"its folder {store.parent} does not exist" in line
    assert not (tmp_path / "work" / "nonexistent").exists()


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_a_local_source_that_is_not_a_file(
    refused: Callable[..., str], tmp_path: Path, what: str
) -> None:
    path = tmp_path / "work" / "mnist.npz"
    if what == "folder":
        path.mkdir(parents=True)
    line = refused("--artifacts", str(tmp_path / "work" / "store"), "--source", str(path))
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
    refused: Callable[..., str], tmp_path: Path, source: str, flags: list[str], message: str
) -> None:
    store = str(tmp_path / "work" / "store")
    line = refused("--artifacts", store, "--source", source, *flags)
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


def test_an_engine_that_is_not_installed(
    refused: Callable[..., str], tmp_path: Path, source: str
) -> None:
    environment = {"PATH": str(tmp_path / "empty")}
    line = refused(
        *("--artifacts", str(tmp_path / "work" / "store"), "--source", source),
        *("--engine", "docker"),
        env=environment,
    )
    assert line == "submit: error: --engine docker: the container engine 'docker' is not installed"


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker command")
def test_docker_without_its_daemon(
    refused: Callable[..., str], tmp_path: Path, source: str
) -> None:
    """A real docker command whose daemon is not there (a socket nothing listens on)."""
    environment = {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    line = refused(
        *("--artifacts", str(tmp_path / "work" / "store"), "--source", source),
        *("--engine", "docker"),
        env=environment,
    )
    assert line.startswith("submit: error: --engine docker: docker does not answer: "), line


@pytest.mark.parametrize(
    "flags", [["--workers", "x"], ["--wrokers", "3"], ["--engine", "kubernetes"]]
)
def test_a_bad_flag_is_one_line_pointing_to_help(
    refused: Callable[..., str], tmp_path: Path, flags: list[str]
) -> None:
    """argparse printed its 22-line usage block before the error."""
    line = refused(*flags)
    assert line.startswith("python workflows/submit.py: error: ") and line.endswith("(see --help)")


@pytest.mark.parametrize("name", ["Quick_Try", "-quick", "quick-", "q" * 64, "a b"])
def test_a_name_argo_would_refuse(
    refused: Callable[..., str], tmp_path: Path, source: str, name: str
) -> None:
    line = refused(f"--name={name}", "--source", source)
    assert "a run's name is lowercase letters, digits" in line


def test_a_name_already_in_the_store(
    refused: Callable[..., str], tmp_path: Path, source: str
) -> None:
    store = tmp_path / "work" / "store"
    (store / "models" / "mnist" / "quick-try").mkdir(parents=True)
    (store / "models" / "mnist" / "quick-try" / "run.json").write_text("{}")
    line = refused("--artifacts", str(store), "--source", source, "--name", "quick-try")
    assert "a run of that name is already in" in line
