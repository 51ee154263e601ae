"""A real browser on the running page: headless Chromium (Debian's package) driven by Playwright.

Required, not optional: without /usr/bin/chromium these tests fail (`.ci/run` installs it).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from bench.photos import photo
from steps.lib.mnist import load_mnist
from steps.lib.registry import LATEST_KEY, run_prefix
from tests.support.page import FIRST_RUN, progressive_jpeg
from tests.support.page_client import proc_kilobytes
from tests.support.page_server import Server, serving
from tests.support.project import ROOT
from ui.images.decode import MAX_CONCURRENT_DECODES, MAX_SCANS, MB
from ui.uploads import MAX_SESSION_BYTES

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
def server(published_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The page serving the test model."""
    with serving(published_store, tmp_path_factory.mktemp("streamlit") / "server.log") as page:
        yield page


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


def test_an_uploaded_sample_is_read_off_the_page(browser: object, server: Server) -> None:
    page = open_page(browser, server.url)
    page.locator('input[type="file"]').set_input_files(str(ROOT / "samples" / "4-photo.jpg"))
    page.get_by_text("What the model sees").wait_for()
    assert predicted_digit(page) == "4"
    assert page.get_by_text("ui-test-1").count() >= 1  # the model card names the run
    page.close()


def test_a_digit_drawn_with_the_mouse_is_predicted(browser: object, server: Server) -> None:
    page = open_page(browser, server.url)
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


def unevenness(data: bytes) -> float:
    """How much the brightest part of the sheet outshines the darkest (ratio of the 95th and 5th
    percentiles of the photo blurred far beyond its strokes)."""
    gray = Image.open(io.BytesIO(data)).convert("L").resize((16, 12), Image.Resampling.BOX)
    low, high = np.percentile(np.asarray(gray, dtype=np.float32), [5, 95])
    return float(high / max(low, 1.0))


def test_a_photo_under_uneven_light_is_read_off_the_page(
    browser: object, server: Server, mnist_path: Path, tmp_path: Path
) -> None:
    _, test = load_mnist(mnist_path)
    digit, label = test.x[3], int(test.y[3])  # a 0
    data = photo(digit, seed=6, size=(1600, 1200))  # a shadow over part of the sheet, a gradient
    assert unevenness(data) > 1.6, unevenness(data)
    path = tmp_path / "uneven.jpg"
    path.write_bytes(data)
    page = open_page(browser, server.url)
    page.locator('input[type="file"]').set_input_files(str(path))
    page.get_by_text("What the model sees").wait_for()
    assert page.get_by_text("Your picture").count() == 1
    assert predicted_digit(page) == str(label)
    page.close()


POD_MEMORY_MB = 2048  # infra/k8s/base/page.yaml: limits.memory 2Gi
MAX_MB_PER_DECODE = 300
VISITORS = 6


def test_concurrent_costly_uploads_stay_under_the_pods_memory(
    browser: object, server: Server, tmp_path: Path
) -> None:
    """Six visitors upload the most memory-hungry JPEG within the limits at once; the server's peak
    resident memory stays under the pod's limit, since only a few decode at a time."""
    path = tmp_path / "costly.jpg"
    path.write_bytes(progressive_jpeg(7300, 5470, scans=MAX_SCANS))
    pages = [open_page(browser, server.url) for _ in range(VISITORS)]
    before = proc_kilobytes(server.pid, "VmRSS") / 1024
    for page in pages:  # each upload starts in the browser and runs in its own script thread
        page.locator('input[type="file"]').set_input_files(str(path))
    for page in pages:
        page.get_by_text("No digit found").wait_for()  # decoded in full, then found blank
        page.close()
    peak = proc_kilobytes(server.pid, "VmHWM") / 1024
    print(f"\nserver RSS before the uploads {before:.0f} MB, peak {peak:.0f} MB")
    assert peak < POD_MEMORY_MB
    assert peak - before < MAX_CONCURRENT_DECODES * MAX_MB_PER_DECODE


def test_one_visitor_cannot_fill_the_servers_memory_with_uploads(
    browser: object, server: Server
) -> None:
    """Streamlit keeps every PUT to /_stcore/upload_file/<session>/<id> under the id the client
    sends: one visitor PUTs thirty files of 10 MB under ids of their own, as fast as they go."""
    page = open_page(browser, server.url)
    puts: list[str] = []
    page.on("request", lambda request: puts.append(request.url) if request.method == "PUT" else 0)
    page.locator('input[type="file"]').set_input_files(str(ROOT / "samples" / "4-photo.jpg"))
    page.get_by_text("What the model sees").wait_for()
    session = puts[0].split("/_stcore/upload_file/")[1].split("/")[0]
    xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_streamlit_xsrf")
    data = os.urandom(10 * MB - 4096)  # under server.maxUploadSize
    before = proc_kilobytes(server.pid, "VmRSS") / 1024
    statuses = []
    with requests.Session() as http:
        http.cookies.set("_streamlit_xsrf", xsrf)
        for _ in range(30):
            response = http.put(
                f"{server.url}/_stcore/upload_file/{session}/{uuid.uuid4()}",
                files={"file": ("x.png", data, "image/png")},
                headers={"X-Xsrftoken": xsrf},
                timeout=60,
            )
            statuses.append(response.status_code)
    grown = proc_kilobytes(server.pid, "VmRSS") / 1024 - before
    kept = statuses.count(204)
    print(f"\n{kept} of 30 PUTs of 10 MB kept; the server grew by {grown:.0f} MB")
    assert set(statuses) <= {204, 413}, statuses
    assert kept * len(data) <= MAX_SESSION_BYTES
    assert grown < MAX_SESSION_BYTES / MB + 50
    page.close()


BEACON = "http://127.0.0.1:9/beacon.png"
HOSTILE = f"![beacon]({BEACON}) [log in](https://evil.example/login) www.evil.example"


def test_store_text_reaches_the_browser_as_text(
    browser: object, published_store: Path, tmp_path: Path
) -> None:
    """A run.json whose text is Markdown: the browser fetches no image and shows no link from it."""
    store = Path(shutil.copytree(published_store, tmp_path / "store"))
    folder = store / run_prefix("ui-test-md")
    shutil.copytree(store / run_prefix(FIRST_RUN), folder)
    card = json.loads((folder / "run.json").read_text())
    # published_at must be a date (steps/lib/published.py refuses other text); run and settings are text
    card.update(run=HOSTILE, settings={"workers": HOSTILE})
    (folder / "run.json").write_text(json.dumps(card))
    (store / LATEST_KEY).write_text("ui-test-md")
    with serving(store, tmp_path / "server.log") as hostile:
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        fetched: list[str] = []
        page.on("request", lambda request: fetched.append(request.url))
        page.goto(hostile.url)
        page.get_by_text("Handwritten digit recognition").wait_for()
        page.get_by_role("tab", name="Upload images").wait_for()
        page.get_by_text(
            "www.evil.example"
        ).first.wait_for()  # shown, as text, once the card is drawn
        assert page.locator(f'img[src="{BEACON}"]').count() == 0
        assert page.locator('a[href*="evil.example"]').count() == 0
        assert not [url for url in fetched if url.startswith(BEACON)]
        page.close()
