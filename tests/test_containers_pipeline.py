"""The small pipeline end to end in the images: `submit.py --local --engine podman` (2 workers, 3000
digits, 1 epoch, 1 round), train in the TensorFlow image and every other step in the light one, which has no
TensorFlow (a step that imported it would fail there); then the published model read back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from tests.support import containers
from tests.support.containers import Images, finds_tensorflow
from tests.support.project import SMALL_RUN, local_run, run_submit
from workflows.local.containers import ContainerEngine
from workflows.local.engines import Invocation

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name


@dataclass
class ImageRecordingEngine(ContainerEngine):
    """The container engine, noting the image each node's container ran in."""

    images: dict[str, str] = field(default_factory=dict)

    def execute(
        self, invocation: Invocation, log: IO[str], timeout: float | None = None
    ) -> int | None:
        self.images[invocation.name] = self.image or invocation.image
        return super().execute(invocation, log, timeout)


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
    latest = store / "models" / "mnist" / "LATEST"
    run = latest.read_text().strip()
    assert (store / "models" / "mnist" / run / "model.h5").is_file()
    assert "accuracy" in result.stdout.lower()


def test_without_the_folder_mode_aggregate_cannot_read_its_models(
    images: Images, mnist_path: Path, tmp_path: Path
) -> None:
    """The spec as it was (no `mode` on aggregate's models folder): argoexec's 0700 root-owned folder
    (gcs.go:downloadObject) is unreadable to the steps' user, so every run failed at aggregate."""
    from steps.lib.storage import open_store
    from workflows.local.runner import LocalRunner
    from workflows.local.spec import templates_by_name
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_workflow

    small = dict(workers=2, limit=1000, epochs=1, rounds=1, retries=0, source=str(mnist_path))
    images_ = dict(image=images.steps, train_image=images.train)
    settings = PipelineSettings(**small, **images_, store=str(tmp_path / "store"))
    workflow = compile_workflow(settings)
    models = templates_by_name(workflow)["aggregate"]["inputs"]["artifacts"][0]
    assert models["mode"] == 0o755
    del models["mode"], models["recurseMode"]
    lines: list[str] = []
    engine = ImageRecordingEngine(program=images.engine)
    runner = LocalRunner(
        open_store(tmp_path / "store"), tmp_path / "logs", engine=engine, echo=lines.append
    )
    result = runner.run(workflow)
    assert result.phase == "Failed", "\n".join(lines)
    # each container ran in its template's image: the TensorFlow one for the trainers only
    assert engine.images == {
        "split": images.steps,
        "init": images.steps,
        "train-round-1(0:0)": images.train,
        "train-round-1(1:1)": images.train,
        "aggregate-round-1": images.steps,
    }
    aggregate = next(node for node in result.nodes if node.name == "aggregate-round-1")
    assert aggregate.phase == "Failed" and aggregate.tries[-1].exit_code == 2
    assert "in/models" in aggregate.message
    assert all(n.phase == "Succeeded" for n in result.nodes if n.task.startswith("train"))
