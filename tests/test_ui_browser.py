"""The running page in a real browser: headless Chromium driven by Playwright (tests/support/browser.py)."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from steps.lib.registry import LATEST_KEY, run_prefix
from tests.support.browser import NO_CHROMIUM, chromium, chromium_program
from tests.support.page import FIRST_RUN, SURE, progressive_jpeg
from tests.support.page_client import proc_kilobytes
from tests.support.page_server import Server, serving
from tests.support.project import ROOT
from tests.support.runs import OLD, beside_the_page_run
from ui.compare import PICKER
from ui.images.decode import MAX_CONCURRENT_DECODES, MAX_SCANS, MB
from ui.uploads import MAX_SESSION_BYTES

PAGE_TIMEOUT_MS = 120_000  # the server imports TensorFlow and loads the model on the first visit
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
CARD = '[data-testid="stSidebar"]'
COMPACT_RESULT = (
    400  # screen pixels of one result, its name to the next one's, on a phone (820 before)
)


@pytest.fixture(scope="module")
def server(published_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The page serving the test model, with another run in its store to compare it with."""
    folder = tmp_path_factory.mktemp("streamlit")
    with serving(beside_the_page_run(published_store, folder / "store"), folder / "log") as page:
        yield page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def open_at(browser: object, url: str, viewport: dict = DESKTOP, settled: bool = True) -> object:
    """The page at `viewport`'s size once its title shows; `settled`: once its script has run and its
    last part is drawn (what comes earlier is laid out then: the tabs first appeared 216 px higher)."""
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(url)
    page.get_by_text("Handwritten digit recognition").wait_for()
    if settled:
        page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
        page.get_by_text("goes wrong").first.wait_for()
    return page


def shown(page: object, label: str) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label)
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def predicted_digit(page: object, what: str) -> str:
    """The digit the page shows for `what`, once its confidence ("97.3% confident") shows the test
    model is sure of it (tests/support/page.py: SURE); under that the fixture is too weak to tell."""
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


def test_on_a_desktop_screen_an_upload_is_read_beside_the_card_and_its_curves(
    browser: object, server: Server
) -> None:
    page = open_at(browser, server.url)
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
    """The pointer comes from above and presses on the canvas's top row, under the corner where its
    toolbar shows on hover; a straight stroke down from there is read as a one."""
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
    pages = [open_at(browser, server.url, settled=False) for _ in range(VISITORS)]
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
    page = open_at(browser, server.url, settled=False)
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


def pick(page: object, label: str, option: str) -> None:
    """Choose `option` in the card's selectbox `label`: its list is opened again until it shows, as a
    rerun of the page's script (a component's first value) may close it as it opens."""
    box = page.locator(CARD).get_by_role("combobox", name=label)
    choice = page.get_by_role("option", name=option)
    for _ in range(PAGE_TIMEOUT_MS // 500):
        if choice.is_visible():
            choice.click()
            return
        if box.get_attribute("aria-expanded") != "true":
            box.click()
        page.wait_for_timeout(500)
    pytest.fail(f"the list of {label!r} never showed {option!r}", pytrace=False)


def test_the_served_model_is_compared_with_another_run(browser: object, server: Server) -> None:
    page = open_at(browser, server.url)
    pick(page, PICKER, OLD)
    page.get_by_text(f"Served beside {OLD}").wait_for()
    assert shown(page, OLD) == "96.12%"
    for run in (FIRST_RUN, OLD):
        page.get_by_text(f"Confusion matrix of {run}").wait_for()
    table = page.locator('[data-testid="stDataFrame"]')  # the settings that differ
    table.first.wait_for()  # the grid's code loads when a page first shows one
    assert table.count() == 1
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
    # run and settings are text (published_at must be a date); \r\r, a blank line, must not end a code span
    card.update(run=HOSTILE, settings={"workers": HOSTILE, "note": f"x\r\r{HOSTILE} **bold**"})
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
        page.get_by_text("www.evil.example").first.wait_for()  # shown, as text, with the card
        page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
        assert page.locator(f'img[src="{BEACON}"]').count() == 0
        assert page.locator('a[href*="evil.example"]').count() == 0
        assert page.locator("strong", has_text="bold").count() == 0
        assert page.get_by_text("**bold**").count() == 1  # the setting's Markdown, shown as text
        assert not [url for url in fetched if url.startswith(BEACON)]
        page.close()


def test_chromium_is_debians_else_playwrights_else_one_line_says_what_to_install(
    tmp_path: Path,
) -> None:
    debian, own = tmp_path / "chromium", tmp_path / "ms-playwright" / "chrome"
    own.parent.mkdir()
    own.write_text("")
    assert chromium_program(own, debian) == own
    debian.write_text("")
    assert chromium_program(own, debian) == debian
    with pytest.raises(pytest.fail.Exception) as failed:
        chromium_program(tmp_path / "no-playwright-chrome", tmp_path / "no-chromium")
    assert str(failed.value) == NO_CHROMIUM
