"""What submit.py can know before a local run (workflows/preflight.py), it refuses before the run
starts: one line, exit code 2, nothing created, no task's line printed."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from workflows.submit import main

SETTINGS = ("ARTIFACTS", "MNIST_SOURCE", "WORKER_NUMBER", "EPOCH", "BATCH", "ROUNDS")


@pytest.fixture
def refused(
    tmp_path: Path,
    small_mnist: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., str]:
    """submit.py --local ARGS (a real source, the store `work/store`): refused at once in one line,
    nothing made in tmp_path's `work`."""
    for name in [*SETTINGS, *(k for k in os.environ if k.startswith("ARGO_"))]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MNIST_SOURCE", str(small_mnist))
    monkeypatch.setenv("ARTIFACTS", str(tmp_path / "work" / "store"))

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


@pytest.mark.parametrize(
    ("flag", "made", "said"),
    [
        ("--artifacts", "store.txt", "{path} is a file, not a folder"),
        (
            "--artifacts",
            "nonexistent/dir/x",
            "{path}: its folder {path.parent} does not exist; the store and the logs are made "
            "only inside an existing folder",
        ),
        ("--source", "mnist.npz", "{path}: no such file"),
        ("--source", "mnist.npz/", "{path} is not a file (mnist.npz)"),
    ],
    ids=["store-a-file", "store-without-its-folder", "source-missing", "source-a-folder"],
)
def test_a_store_or_source_that_is_not_there_creates_nothing(
    refused: Callable[..., str], tmp_path: Path, flag: str, made: str, said: str
) -> None:
    """--artifacts /nonexistent/dir/x made /nonexistent/dir/x and its parents."""
    path = tmp_path / "work" / made
    if made == "store.txt":
        path.parent.mkdir()
        path.write_text("not a folder")
    elif made.endswith("/"):
        path.mkdir(parents=True)
    line = refused(flag, str(path))
    assert line == f"submit: error: {flag} " + said.format(path=path)
    assert not (tmp_path / "work" / "nonexistent").exists()


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
    refused: Callable[..., str], flags: list[str], message: str
) -> None:
    line = refused(*flags)
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


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"PATH": "{tmp}/empty"}, "the container engine 'docker' is not installed"),
        pytest.param(  # a real docker command whose daemon is not there
            {"DOCKER_HOST": "unix://{tmp}/no-daemon.sock"},
            "docker does not answer: .+",
            marks=pytest.mark.skipif(shutil.which("docker") is None, reason="needs docker"),
        ),
    ],
    ids=["not-installed", "no-daemon"],
)
def test_an_engine_that_cannot_run_the_steps(
    refused: Callable[..., str], tmp_path: Path, environment: dict, said: str
) -> None:
    changed = {name: value.format(tmp=tmp_path) for name, value in environment.items()}
    line = refused("--engine", "docker", env=changed)
    assert re.fullmatch(f"submit: error: --engine docker: {said}", line), line


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
def test_a_name_argo_would_refuse(refused: Callable[..., str], name: str) -> None:
    line = refused(f"--name={name}")
    assert "a run's name is lowercase letters, digits" in line


def test_a_name_already_in_the_store(refused: Callable[..., str], tmp_path: Path) -> None:
    store = tmp_path / "work" / "store"
    (store / "models" / "mnist" / "quick-try").mkdir(parents=True)
    (store / "models" / "mnist" / "quick-try" / "run.json").write_text("{}")
    line = refused("--name", "quick-try")
    assert "a run of that name is already in" in line
