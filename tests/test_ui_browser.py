"""The running page in a real browser: headless Chromium driven by Playwright (tests/support/browser.py)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from steps.lib.registry import run_prefix
from tests.support.browser import chromium
from tests.support.page import FIRST_RUN, SURE
from tests.support.page_server import Server, serving
from tests.support.project import ROOT

PAGE_TIMEOUT_MS = 120_000  # the server imports its modules and loads the model on the first visit
# Chromium fails the requests under way when the host's interfaces change (a container or a pod
# starting beside the tests), loopback's too; a page whose scripts failed so never starts.
NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
CARD = '[data-testid="stSidebar"]'
COMPACT_RESULT = (
    400  # screen pixels of a result, its name to the next one's, on a phone (820 before)
)
BEACON = "http://127.0.0.1:9/beacon.png"
HOSTILE = f"![beacon]({BEACON}) [log in](https://evil.example/login) www.evil.example"


@pytest.fixture(scope="module")
def server(published_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The page serving the test model, its run's settings Markdown (two carriage returns too)."""
    folder = tmp_path_factory.mktemp("streamlit")
    store = Path(shutil.copytree(published_store, folder / "store"))
    card_file = store / run_prefix(FIRST_RUN) / "run.json"
    card = json.loads(card_file.read_text())
    card["settings"].update(workers=HOSTILE, note=f"x\r\r{HOSTILE} **bold**")
    card_file.write_text(json.dumps(card))
    with serving(store, folder / "log") as page:
        yield page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def open_at(
    browser: object, url: str, viewport: dict = DESKTOP, fetched: list | None = None
) -> object:
    """The page at `viewport`'s size once its last part is drawn; URLs it fetched in `fetched`."""
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    fetched = [] if fetched is None else fetched
    page.on("request", lambda request: fetched.append(request.url))
    failures: list[str | None] = []
    page.on("requestfailed", lambda request: failures.append(request.failure))
    deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
    while True:  # loaded again only while the host's network changes under it
        failures.clear()
        page.goto(url)
        if NETWORK_CHANGED not in failures:
            break
        assert time.monotonic() < deadline, "the host's network kept changing under the page"
    page.get_by_text("Handwritten digit recognition").wait_for()
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
    page.get_by_text("goes wrong").first.wait_for()
    return page


def shown(page: object, label: str) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label)
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def predicted_digit(page: object, what: str) -> str:
    """The digit the page shows for `what`; a weak fixture under SURE confidence fails."""
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Prediction")
    delta = metric.locator('[data-testid="stMetricDelta"]').inner_text().strip()
    confidence = float(delta.removesuffix("confident").strip().rstrip("%")) / 100
    if confidence < SURE:
        pytest.fail(
            f"fixture too weak: the page's test model reads {what} as {shown(page, 'Prediction')} "
            f"at {confidence:.0%}, under the {SURE:.0%} the tests rely on",
            pytrace=False,
        )
    return shown(page, "Prediction")


def on_first_screen(locator: object, viewport: dict) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"]


def test_on_a_desktop_screen_an_upload_is_read_beside_the_card_and_store_text_is_text(
    browser: object, server: Server
) -> None:
    """The card's settings are Markdown: the browser fetches no image and shows no link from them."""
    fetched: list[str] = []
    page = open_at(browser, server.url, fetched=fetched)
    page.get_by_text("www.evil.example").first.wait_for()  # shown, as text, with the card
    assert page.locator(f'img[src="{BEACON}"]').count() == 0
    assert page.locator('a[href*="evil.example"]').count() == 0
    assert page.locator("strong", has_text="bold").count() == 0
    assert page.get_by_text("**bold**").count() == 1  # the setting's Markdown, shown as text
    assert not [url for url in fetched if url.startswith(BEACON)]
    card = page.locator(CARD)
    card.get_by_text(FIRST_RUN).wait_for()
    card.get_by_text("Training, round by round").wait_for()
    charts = card.locator('[data-testid="stVegaLiteChart"]')
    charts.nth(1).wait_for()  # drawn after the heading above them
    assert charts.count() == 2
    assert on_first_screen(page.get_by_role("tab", name="Upload images"), DESKTOP)
    page.locator('input[type="file"]').set_input_files(str(ROOT / "samples" / "4-photo.jpg"))
    page.get_by_text("What the model sees").wait_for()
    assert predicted_digit(page, "4-photo.jpg") == "4"
    page.close()


def test_on_a_phone_the_card_is_folded_the_upload_comes_first_and_results_are_compact(
    browser: object, server: Server
) -> None:
    page = open_at(browser, server.url, PHONE)
    upload_tab = page.get_by_role("tab", name="Upload images")
    assert on_first_screen(upload_tab, PHONE)
    assert not page.locator(CARD).is_visible()
    names = ["4-photo.jpg", "7-mnist.png"]
    page.locator('input[type="file"]').set_input_files([str(ROOT / "samples" / n) for n in names])
    page.locator('[data-testid="stMetric"]').filter(has_text="Prediction").nth(1).wait_for()
    labels = page.locator('[data-testid="stText"]')
    tops = [labels.filter(has_text=name).bounding_box()["y"] for name in names]
    assert 0 < tops[1] - tops[0] < COMPACT_RESULT, tops
    page.locator('[data-testid="stExpandSidebarButton"]').click()  # the card unfolds
    page.locator(CARD).get_by_text(FIRST_RUN).wait_for()
    page.close()


def test_a_stroke_pressed_on_the_canvas_top_edge_as_the_pointer_enters_is_drawn(
    browser: object, server: Server
) -> None:
    """A stroke down from the canvas's top row, under its toolbar's corner, reads as a one."""
    page = open_at(browser, server.url)
    page.get_by_role("tab", name="Draw a digit").click()
    canvas = page.locator("canvas").last  # Fabric.js draws on the upper of its two canvases
    canvas.wait_for()
    box = canvas.bounding_box()
    x, top = box["x"] + box["width"] - 20, box["y"]
    page.mouse.move(x, top - 60)
    page.mouse.move(x, top + 1)
    page.mouse.down()
    for step in range(1, 26):
        page.mouse.move(x, top + 1 + step * 10)
    page.mouse.up()
    page.get_by_text("What the model sees").wait_for()
    assert predicted_digit(page, "a stroke drawn down from the canvas's top edge") == "1"
    page.close()
