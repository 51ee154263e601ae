"""A real browser on the running page: headless Chromium (Debian's package) driven by Playwright.

Required, not optional: without /usr/bin/chromium these tests fail (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from steps.registry import LATEST_KEY
from tests.conftest import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGE_TIMEOUT_MS = 120_000  # the server imports TensorFlow and loads the model on the first visit


@pytest.fixture(scope="module")
def page_url(published_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`streamlit run ui/app.py` on 127.0.0.1, serving the test model."""
    port = free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    env = {
        **os.environ,
        "MODEL_URI": str(published_store / LATEST_KEY),
        "PYTHONPATH": str(ROOT),
    }
    with log.open("wb") as output:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "ui/app.py",
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            try:
                wait_for_port(port, timeout=60)
            except TimeoutError:
                pytest.fail(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            url = f"http://127.0.0.1:{port}"
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=30) as response:
                assert response.read() == b"ok"
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser: object, url: str) -> object:
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(url)
    page.get_by_text("Handwritten digit recognition").wait_for()
    return page


def predicted_digit(page: object) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Prediction")
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def test_an_uploaded_sample_is_read_off_the_page(browser: object, page_url: str) -> None:
    page = open_page(browser, page_url)
    page.locator('input[type="file"]').set_input_files(str(ROOT / "samples" / "4-photo.jpg"))
    page.get_by_text("What the model sees").wait_for()
    assert predicted_digit(page) == "4"
    assert page.get_by_text("ui-test-1").count() >= 1  # the model card names the run
    page.close()


def test_a_digit_drawn_with_the_mouse_is_predicted(browser: object, page_url: str) -> None:
    page = open_page(browser, page_url)
    page.get_by_role("tab", name="Draw a digit").click()
    canvas = page.locator("canvas").last  # Fabric.js draws on the upper of its two canvases
    canvas.wait_for()
    box = canvas.bounding_box()
    left, top = box["x"], box["y"]
    page.mouse.move(left + 140, top + 40)
    page.mouse.down()
    for step in range(1, 21):  # a straight stroke down the middle: a one
        page.mouse.move(left + 140, top + 40 + step * 10)
    page.mouse.up()
    page.get_by_text("What the model sees").wait_for()
    assert predicted_digit(page) == "1"
    page.close()
