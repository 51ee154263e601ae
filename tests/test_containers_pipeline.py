"""The small pipeline end to end in the images: `submit.py --local --engine podman`, train in the TensorFlow
image and every other step in the light one, which has no TensorFlow; then the published model read back.
(A 0700 input folder is unreadable in a container: tests/test_containers_engine.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import containers
from tests.support.containers import Images, finds_tensorflow
from tests.support.project import SMALL_RUN, local_run, run_submit

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name


def test_the_small_pipeline_runs_in_containers(
    images: Images, mnist_path: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    engine = ("--engine", images.engine, "--image", images.steps, "--train-image", images.train)
    result = run_submit(
        *local_run(store, tmp_path / "logs", mnist_path, *engine), *SMALL_RUN, timeout=1800
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert not finds_tensorflow(images.engine, images.steps)
    run = (store / "models" / "mnist" / "LATEST").read_text().strip()
    assert (store / "models" / "mnist" / run / "model.h5").is_file()
    assert "accuracy" in result.stdout.lower()
