"""Shared fixtures: the real MNIST file (MNIST_SOURCE, else tests/reference's), small slices of it, and a
GCS emulator."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from steps.lib import defaults
from steps.lib.errors import StepError
from steps.lib.mnist import fetch_source
from tests.reference import required
from tests.support import steps as steps_support
from tests.support.ci_strict import pytest_runtest_makereport  # noqa: F401  (on CI a skip fails)
from tests.support.project import free_port, wait_for_port

# A test using one of these fixtures (or one built on them) trains, starts a server (`serve`: the Argo
# Server double) or a browser, or builds the wheel: `slow`, left out of `make test-fast`.
SLOW_FIXTURES = {"digit_model", "gcs_emulator", "browser", "server", "serve", "wheel"}
CLUSTER_TESTS = Path(__file__).parent / "cluster"  # every test under tests/cluster/ is `cluster`
pytest_plugins = ["tests.support.argo_double"]  # the Argo Server double's fixtures


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.path.is_relative_to(CLUSTER_TESTS):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def mnist_path() -> Path:
    """The file MNIST_SOURCE names (a path, URL or gs:// URI, as for the steps), else the reference one."""
    source = os.environ.get(defaults.SOURCE_ENV, "").strip()
    if not source:
        return required("mnist")
    try:
        return fetch_source(source).resolve()  # the steps some tests run start in other folders
    except StepError as error:
        reason = f"{defaults.SOURCE_ENV}={source}: {error}"
    pytest.fail(reason, pytrace=False)


@pytest.fixture(scope="session")
def mnist(mnist_path: Path) -> dict[str, np.ndarray]:
    with np.load(mnist_path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


@pytest.fixture(scope="session")
def small_mnist(mnist: dict[str, np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Keras-layout mnist.npz with 2000 training and 500 test digits: fast to split and train."""
    path = tmp_path_factory.mktemp("data") / "mnist-small.npz"
    sizes = {"train": 2000, "test": 500}
    np.savez_compressed(path, **{k: v[: sizes[k[2:]]] for k, v in mnist.items()})
    return path


@pytest.fixture(scope="session")
def gcs_emulator() -> str:
    """A real gcp-storage-emulator HTTP server on 127.0.0.1; yields its host for STORAGE_EMULATOR_HOST."""
    port = free_port()
    command = f"-m gcp_storage_emulator start --host 127.0.0.1 --port {port} --in-memory"
    server = subprocess.Popen(
        [sys.executable, *command.split()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def new_bucket(host: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Create an empty bucket at `host`; STORAGE_EMULATOR_HOST is set for this test and its children."""
    from google.cloud import storage

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    name = f"bucket-{time.monotonic_ns()}"
    storage.Client().create_bucket(name)
    return name


@pytest.fixture
def gcs_bucket(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh empty bucket on the emulator."""
    return new_bucket(gcs_emulator, monkeypatch)


@pytest.fixture(scope="session")
def gcs_with_preconditions(gcs_emulator: str) -> str:
    """The emulator behind a proxy that enforces ifGenerationMatch as real GCS does."""
    from tests.doubles.gcs_preconditions import start_proxy

    server = start_proxy(gcs_emulator)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def strict_gcs_bucket(gcs_with_preconditions: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Like gcs_bucket, reached through the precondition-enforcing proxy."""
    return new_bucket(gcs_with_preconditions, monkeypatch)


# The page's tests (test_ui_*.py) share one decent model and one store it is published in.
@pytest.fixture(scope="session")
def digit_model(mnist_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.page import train_digit_model

    return train_digit_model(mnist_path, tmp_path_factory.mktemp("ui") / "model.h5")


@pytest.fixture(scope="session")
def model_evaluation(
    mnist_path: Path, digit_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    from tests.support.page import evaluate_model

    return evaluate_model(mnist_path, digit_model, tmp_path_factory.mktemp("eval"))


@pytest.fixture(scope="session")
def published_store(
    digit_model: Path, model_evaluation: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A folder store whose models/mnist/LATEST names tests/support/page.py's FIRST_RUN. Copy it before changing it."""
    from tests.support.page import FIRST_RUN, publish_run

    store = tmp_path_factory.mktemp("store")
    publish_run(store, FIRST_RUN, digit_model, model_evaluation)
    return store


@pytest.fixture
def full_run_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store whose LATEST serves a complete run (FULL_RUN) scoring 0.9906, as after `make run`."""
    code, error, served, _ = steps_support.publish_as(
        tmp_path, steps_support.FULL_RUN, 0.9906, "--setting=limit=0", capsys=capsys
    )
    assert (code, served) == (0, "true"), error
    return tmp_path
