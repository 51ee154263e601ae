"""The small pipeline end to end with every step in the steps image: `submit.py --local --engine podman`
(2 workers, 3000 digits, 1 epoch, 1 round), then the published model read back as the page would read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import containers_support
from tests.containers_support import ROOT, Images

pytestmark = pytest.mark.containers
images = containers_support.images


def test_the_small_pipeline_runs_in_containers(
    images: Images, mnist_path: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = subprocess.run(
        [
            sys.executable,
            "workflows/submit.py",
            "--local",
            "--engine",
            images.engine,
            "--image",
            images.steps,
            "--workers",
            "2",
            "--limit",
            "3000",
            "--epochs",
            "1",
            "--rounds",
            "1",
            "--source",
            str(mnist_path),
            "--artifacts",
            str(store),
            "--logs-dir",
            str(tmp_path / "logs"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    latest = store / "models" / "mnist" / "LATEST"
    run = latest.read_text().strip()
    assert (store / "models" / "mnist" / run / "model.h5").is_file()
    assert "accuracy" in result.stdout.lower()
