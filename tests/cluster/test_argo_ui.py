"""The real Argo UI in headless Chromium, logged in with the submitter's token (ARGO_UI_SCREENSHOTS: a folder)."""

from __future__ import annotations

import io
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests
import urllib3  # noqa: F401  (its warning is filtered by name)
import yaml
from PIL import Image
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.support.browser import chromium
from tests.support.cluster import Cluster, submitted, tries
from workflows.pipeline import resources as names
from workflows.pipeline.workflow import compile_workflow

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]

# One round of two trainers: every kind of task, in a couple of minutes.
SMALL_RUN = [
    *("--limit", "3000", "--workers", "2", "--rounds", "1", "--epochs", "1"),
    *("--serve", "never"),
]
TASKS = {"split", "init", "aggregate-round-1", "evaluate", "publish"}
TASKS |= {"train-round-1(0:0)", "train-round-1(1:1)"}
TIMEOUT_MS = 60_000
MODAL_WAIT_MS = 5_000
DESKTOP = {"width": 1440, "height": 900}
NARROW = {"width": 390, "height": 844}  # a phone's viewport, in CSS pixels
# The button of the Argo UI's link to the page (infra/gke/lib.sh, render_argo_config).
PAGE_LINK = "Model page"
SCREENSHOTS = os.environ.get("ARGO_UI_SCREENSHOTS")
PLACEHOLDER_TITLE = "Argo Server: the Argo UI did not build"
# What the split step says of a file that is not an .npz (steps/lib/npz.py), its error line.
BAD_INPUT_LINE = "not a readable .npz file"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small_run(cluster: Cluster) -> str:
    name = submitted(cluster, *SMALL_RUN, "--watch").name
    assert cluster.phase(name) == "Succeeded", cluster.workflow(name)["status"].get("message")
    return name


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any, cluster: Cluster) -> Iterator[Any]:
    """A page of the Argo UI, logged in with the submitter's token in the login box."""
    context = browser.new_context(viewport=DESKTOP, ignore_https_errors=True)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    opened.goto(f"{cluster.env['ARGO_SERVER']}/login")
    assert opened.title() != PLACEHOLDER_TITLE, opened.inner_text("body")
    opened.locator("textarea#token").fill(cluster.env["ARGO_TOKEN"])
    opened.locator(".login__token-section a", has_text="Login").click()
    opened.wait_for_url(re.compile(r"/workflows"))
    # Argo's modals of a first visit, each closed as a user closes it.
    while True:
        try:
            opened.locator(".modal-close").first.click(timeout=MODAL_WAIT_MS)
        except PlaywrightTimeout:
            break
    try:
        yield opened
    finally:
        context.close()


def screenshot(page: Any, name: str) -> None:
    """Keep what the page shows as ARGO_UI_SCREENSHOTS/argo-ui-NAME.png, in 256 colours (small)."""
    if not SCREENSHOTS:
        return
    picture = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    target = Path(SCREENSHOTS) / f"argo-ui-{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    picture.quantize(256).save(target, optimize=True)


def open_run(page: Any, cluster: Cluster, name: str) -> None:
    page.goto(f"{cluster.env['ARGO_SERVER']}/workflows/{cluster.namespace}/{name}")
    page.locator(".graph svg").wait_for()


def graph_labels(page: Any) -> set[str]:
    """The display name of every node the graph draws (each node's title: `ID (DISPLAY NAME)`)."""
    titles = page.locator(".graph svg g > title").all_text_contents()
    return {title.split(" (", 1)[1].removesuffix(")") for title in titles if " (" in title}


def select_node(page: Any, display_name: str) -> None:
    """Click the graph's node of DISPLAY_NAME (a task's, or an artifact's file name); its panel opens."""
    title = page.locator(".graph svg g > title").filter(has_text=f"({display_name})")
    title.locator("xpath=..").locator("g.node").first.click()


def artifact_rows(page: Any) -> dict[str, str]:
    """The open node panel's output artifacts: name -> the link the UI downloads it by."""
    page.locator(".workflow-node-info").get_by_text("INPUTS/OUTPUTS").click()
    rows = page.locator(".artifact-row")
    rows.first.wait_for()
    return {
        row.locator(".artifact-name").inner_text().strip(): row.locator("a").first.get_attribute(
            "href"
        )
        for row in rows.all()
    }


def test_the_graph_shows_every_task_of_the_dag(page: Any, cluster: Cluster, small_run: str) -> None:
    open_run(page, cluster, small_run)
    assert graph_labels(page) >= TASKS, sorted(graph_labels(page))
    screenshot(page, "graph")
    # As a phone opens it: the UI lays the graph out for the width it loads at.
    page.set_viewport_size(NARROW)
    open_run(page, cluster, small_run)
    screenshot(page, "graph-narrow")


def test_a_runs_page_opens_the_page_serving_its_model(
    page: Any, cluster: Cluster, small_run: str
) -> None:
    config = cluster.get("configmap", "workflow-controller-configmap", "-n", "argo")
    links = yaml.safe_load(config["data"].get("links", "[]"))
    [address] = [link["url"] for link in links if link["name"] == PAGE_LINK]
    if cluster.local:
        assert address == cluster.env["PAGE_URL"]
    open_run(page, cluster, small_run)
    with page.context.expect_page() as opened:
        page.get_by_role("button", name=PAGE_LINK).click()
    model_page = opened.value
    model_page.wait_for_load_state("domcontentloaded")
    assert model_page.url == address
    expect(model_page).to_have_title("Handwritten digits", timeout=TIMEOUT_MS)  # ui/app.py


def test_a_trainers_logs_show_its_epoch_lines(page: Any, cluster: Cluster, small_run: str) -> None:
    open_run(page, cluster, small_run)
    select_node(page, "train-round-1(1:1)(0)")
    page.locator(".workflow-node-info").get_by_role("button", name="LOGS").click()
    page.locator(".workflow-logs-viewer").filter(
        has_text=re.compile(r"epoch\s1/1:\saccuracy")
    ).wait_for()
    screenshot(page, "logs")


def test_evaluate_and_aggregate_list_their_pictures_and_the_server_returns_them(
    page: Any, cluster: Cluster, small_run: str
) -> None:
    served = {}
    for node, picture in (("aggregate-round-1(0)", "history-plot"), ("evaluate(0)", "confusion")):
        open_run(page, cluster, small_run)
        select_node(page, node)
        rows = artifact_rows(page)
        assert picture in rows, sorted(rows)
        answer = requests.get(
            urljoin(page.url, rows[picture]),
            headers={"Authorization": cluster.env["ARGO_TOKEN"]},
            verify=False,
            timeout=60,
        )
        served[picture] = (answer.status_code, answer.content[:8])
    assert served == {"history-plot": (200, PNG), "confusion": (200, PNG)}
    assert "metrics" in rows, sorted(rows)
    # The graph draws each file artifact as a node of its own; its panel shows the picture.
    open_run(page, cluster, small_run)
    assert graph_labels(page) >= {"confusion.png", "metrics.json", "history.png"}
    select_node(page, "confusion.png")
    page.get_by_text("Continue", exact=True).click()  # the panel's note for a first visit
    page.frame_locator("iframe").locator("img").wait_for()
    screenshot(page, "artifacts")


def test_the_templates_submit_form_describes_every_parameter(page: Any, cluster: Cluster) -> None:
    registered = cluster.submit("--register")
    assert registered.returncode == 0, registered.stderr
    template = cluster.get("workflowtemplate", names.TEMPLATE_NAME, "-n", cluster.namespace)
    parameters = template["spec"]["arguments"]["parameters"]
    page.goto(
        f"{cluster.env['ARGO_SERVER']}/workflow-templates/{cluster.namespace}/{names.TEMPLATE_NAME}"
    )
    page.get_by_role("button", name="SUBMIT").first.click()
    form = page.locator(".sliding-panel")
    form.locator("label", has_text=parameters[-1]["name"]).first.wait_for()
    labels = form.locator("label").all_text_contents()
    assert [parameter["name"] for parameter in parameters] == [
        label for label in labels if label in {parameter["name"] for parameter in parameters}
    ], labels
    # Each described parameter has its ? beside its name; pointing at one shows its description.
    described = [parameter for parameter in parameters if parameter.get("description")]
    assert form.locator(".fa-question-circle").count() == len(described)
    first = parameters[0]
    label = form.locator("label", has_text=re.compile(f"^{re.escape(first['name'])}$")).first
    label.locator("xpath=following-sibling::*[1]").hover()
    page.get_by_text(first["description"]).first.wait_for()
    screenshot(page, "submit")
    page.set_viewport_size(NARROW)  # the open form, as the browser draws it narrowed
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    screenshot(page, "submit-narrow")


def test_a_run_given_bad_input_shows_the_steps_error_line_on_its_node(
    page: Any, cluster: Cluster
) -> None:
    name = f"mnist-ui-bad-{secrets.token_hex(3)}"
    source = cluster.put(f"reference/{name}.npz", b"not a zip archive")
    settings = cluster.settings(
        workers=2, rounds=1, epochs=1, limit=3000, serve="never", source=source, retry_backoff="1s"
    )
    cluster.create(compile_workflow(settings), name)
    workflow = cluster.finished(name)
    [split] = tries(workflow, "split")
    assert BAD_INPUT_LINE in split["message"], split["message"]
    open_run(page, cluster, name)
    select_node(page, split["displayName"])
    page.locator(".workflow-node-info").get_by_text(BAD_INPUT_LINE).first.wait_for()
    screenshot(page, "failed")
