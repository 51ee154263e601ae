"""submit.py against the Argo Server double (tests/doubles/argo_server.py): the fixtures `serve`, `argo`,
`watched_run` and `clean_environment` (a pytest plugin: tests/conftest.py loads it)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.doubles import recordings
from tests.doubles.argo_server import ArgoDouble
from workflows.submit import main

TOKEN = "Bearer good-token"
STORE = "gs://mnist-models"
IMAGE = "us-central1-docker.pkg.dev/project/mnist/mnist-argo-steps:1"
TRAIN_IMAGE = "registry.example/mnist-argo-train:1"
IMAGES = ("--image", IMAGE, "--train-image", TRAIN_IMAGE)
FLAGS = ("--artifacts", STORE, *IMAGES, "--poll-seconds", "0.001")  # before each test's own


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    argo = [name for name in os.environ if name.startswith("ARGO_")]
    for variable in (*argo, "ARTIFACTS", "MNIST_SOURCE", "WORKER_NUMBER"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ArgoDouble, str]]]:
    """Start doubles of the Argo Server, each stopped after the test."""
    started: list[ArgoDouble] = []

    def start(**options: object) -> tuple[ArgoDouble, str]:
        double = ArgoDouble(**options)
        url = double.start()
        started.append(double)
        return double, url

    yield start
    for double in started:
        double.stop()


def on_argo(
    monkeypatch: pytest.MonkeyPatch, url: str, token: str | None = TOKEN, **variables: str
) -> None:
    monkeypatch.setenv("ARGO_SERVER", url)
    if token is not None:
        monkeypatch.setenv("ARGO_TOKEN", token)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def submit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*FLAGS, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def argo(serve: Callable, monkeypatch: pytest.MonkeyPatch) -> ArgoDouble:
    """A double of the Argo Server, the one submit.py is told to use."""
    double, url = serve()
    on_argo(monkeypatch, url)
    return double


@pytest.fixture
def watched_run(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Submit a run with a story's flags (tests/support/stories.py) and watch it on a double of the
    Argo Server that replays the real run recorded for that story."""

    def run(story: str) -> tuple[int, str, str]:
        _, url = serve(story=story)
        on_argo(monkeypatch, url)
        return submit(capsys, *recordings.load(story).flags, "--watch")

    return run


def trainer(shard: str, train_round: int = 1) -> str:
    return f"train-round-{train_round}({shard}:{shard})"
