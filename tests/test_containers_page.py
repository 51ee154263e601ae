"""The page image as the Deployment runs it (read-only root, a tmpfs at /tmp, uid 10001): it serves the page,
and `ui.predict` inside it classifies the samples as this machine does."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import containers
from tests.support.containers import ROOT, Images
from tests.support.project import free_port

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name


@pytest.fixture
def model_folder(digit_model: Path, tmp_path: Path) -> Path:
    """The trained model where the image's user can read it (the steps write their files 0600)."""
    folder = tmp_path / "models"
    folder.mkdir(mode=0o755)
    shutil.copy(digit_model, folder / "model.h5")
    (folder / "model.h5").chmod(0o644)
    folder.chmod(0o755)
    return folder


def page_run(images: Images, *arguments: str) -> list[str]:
    """`podman run` as the Deployment runs the page (infra/k8s/base/page.yaml: readOnlyRootFilesystem)."""
    return [images.engine, "run", "--read-only", "--tmpfs", "/tmp:rw,mode=1777", *arguments]


def sealed_page_run(images: Images, model_folder: Path, *arguments: str) -> list[str]:
    """`page_run` with no network, the model and the samples mounted read-only, removed when it ends."""
    return page_run(
        images,
        *("--rm", "--network", "none"),
        *("--volume", f"{model_folder}:/models:ro"),
        *("--volume", f"{ROOT / 'samples'}:/samples:ro"),
        *arguments,
    )


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def test_the_page_answers_its_health_check_on_a_read_only_root(
    images: Images, model_folder: Path
) -> None:
    port = free_port()
    name = f"mnist-page-test-{secrets.token_hex(3)}"
    started = subprocess.run(
        page_run(
            images,
            *("--detach", "--name", name),
            *("--publish", f"127.0.0.1:{port}:8501"),  # the image's own port, as the Service's
            *("--volume", f"{model_folder}:/models:ro", "--env", "MODEL_URI=/models/model.h5"),
            images.page,
        ),
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0, started.stderr
    try:
        deadline, health = time.monotonic() + 180, None
        while time.monotonic() < deadline and health is None:
            try:
                health = get(f"http://127.0.0.1:{port}/_stcore/health")
            except OSError:
                time.sleep(1)
        logs = subprocess.run([images.engine, "logs", name], capture_output=True, text=True)
        assert health == (200, "ok"), logs.stdout + logs.stderr
        status, page = get(f"http://127.0.0.1:{port}/")
        assert status == 200 and "<html" in page.lower()
        running = subprocess.run(
            [images.engine, "inspect", "--format", "{{.State.Running}} {{.Config.User}}", name],
            capture_output=True,
            text=True,
        )
        assert running.stdout.split() == ["true", "10001:10001"]
        if images.engine == "podman":  # the image's own HEALTHCHECK, run on demand
            checked = subprocess.run(
                ["podman", "healthcheck", "run", name], capture_output=True, text=True
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        subprocess.run([images.engine, "rm", "--force", name], capture_output=True)


def predictions(output: str) -> dict[str, dict]:
    """ui.predict's JSON lines by file name."""
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return {Path(record["file"]).name: record for record in records}


PAGE_AND_PREDICT = """
import subprocess
import sys
from pathlib import Path
from streamlit.testing.v1 import AppTest
subprocess.run([sys.executable, "-m", "ui.predict", *sys.argv[1:]], check=True)
page = AppTest.from_file(str(Path.cwd() / "ui" / "app.py"), default_timeout=120)
page.run()
assert not page.exception, page.exception
sample = Path("/samples/3-mnist.png")
page.file_uploader[0].set_value((sample.name, sample.read_bytes(), "image/png"))
page.run()
assert not page.exception, page.exception
charts = [e for e in page.main if getattr(e, "type", "") == "vega_lite_chart"]
print("charts", len(charts))
"""


def test_the_page_and_ui_predict_run_in_the_trimmed_image_as_on_this_machine(
    images: Images, model_folder: Path
) -> None:
    """In the trimmed image the page draws a chart (sent as Arrow); ui.predict reads as here."""
    samples = sorted(path.name for path in (ROOT / "samples").glob("*-mnist.png"))
    ran = subprocess.run(
        sealed_page_run(
            images,
            model_folder,
            "--env",
            "MODEL_URI=/models/model.h5",
            images.page,
            *("python", "-c", PAGE_AND_PREDICT),
            *[f"/samples/{name}" for name in samples],
            *("--model-uri", "/models/model.h5"),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "charts 1" in ran.stdout, ran.stdout
    in_image = predictions(ran.stdout)
    files, model = [str(ROOT / "samples" / name) for name in samples], model_folder / "model.h5"
    here = subprocess.run(
        [sys.executable, "-m", "ui.predict", *files, "--model-uri", str(model)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    on_host = predictions(here.stdout)
    assert sorted(in_image) == samples == sorted(on_host)
    right = [name for name in samples if in_image[name]["digit"] == int(name[0])]
    assert len(right) >= 9, in_image  # the test model is ~96% accurate; MNIST's own 3 fools it
    for name in samples:
        assert in_image[name]["digit"] == on_host[name]["digit"], name
        assert in_image[name]["probabilities"] == pytest.approx(
            on_host[name]["probabilities"], abs=1e-5
        )
