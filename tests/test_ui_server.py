"""What one visitor's messages may cost the real server (`python -m ui.serve`), through real websocket
clients (tests/support/page_client.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from steps.lib.registry import HISTORY_FILE, run_prefix
from tests.support.histories import compact, fullest_history
from tests.support.page import FIRST_RUN, progressive_jpeg
from tests.support.page_client import (
    Closed,
    PageClient,
    component_state,
    drawing_of,
    proc_kilobytes,
    reset_peak,
    text_of,
    uploader_state,
)
from tests.support.page_server import Server, serving
from tests.support.project import ROOT
from ui.images.decode import MAX_SCANS
from ui.uploads import MAX_FILES
from ui.widget_states import MAX_DRAWING_ITEMS, MAX_MESSAGE_MB, TOO_LARGE, json_items

MB = 1024 * 1024


@pytest.fixture(scope="module")
def server(published_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The page serving a run whose history.json holds 1 MiB of points (every point a chart row, the
    curves were over the page's message bound)."""
    store = Path(shutil.copytree(published_store, tmp_path_factory.mktemp("served") / "store"))
    (store / run_prefix(FIRST_RUN) / HISTORY_FILE).write_bytes(compact(fullest_history()))
    with serving(store, tmp_path_factory.mktemp("server") / "server.log") as page:
        yield page


def widget_id(visitor: PageClient, kind: str) -> str:
    """The id of the page's one widget of `kind`, from a first run as a browser's first visit."""
    (element,) = visitor.rerun().of(kind)
    return getattr(element, kind).id


def megabytes(pid: int, field: str) -> float:
    return proc_kilobytes(pid, field) / 1024


def test_a_file_named_many_times_is_decoded_once(server: Server) -> None:
    """Twenty names of three ids of one costly JPEG (40 megapixels, every scan): two reruns, one decode."""
    costly_jpeg = progressive_jpeg(7300, 5470, scans=MAX_SCANS)
    with PageClient(server.url) as visitor:
        uploader = widget_id(visitor, "file_uploader")
        copies = [visitor.upload(f"photo-{index}.jpg", costly_jpeg) for index in range(3)]
        state = uploader_state(uploader, (copies * MAX_FILES)[:MAX_FILES])
        before = len(server.pillow_calls())
        runs = [visitor.rerun([state]) for _ in range(2)]
        decoded = [call for call in server.pillow_calls()[before:] if call.startswith("decode")]
    for run in runs:  # one result, however many names
        assert sum(text.startswith("No digit found") for text in run.texts()) == 1, run.texts()
    assert decoded == ["decode 913x684"], decoded  # once, reduced 8 times by libjpeg


def test_what_the_page_sends_fits_the_message_bound_many_times(server: Server) -> None:
    """The page's own messages (pictures by URL, 1 MiB of curves thinned) are far under its bound."""
    with PageClient(server.url) as visitor:
        first = visitor.rerun()
        uploader = first.of("file_uploader")[0].file_uploader.id
        photo = visitor.upload("4.jpg", (ROOT / "samples" / "4-photo.jpg").read_bytes())
        run = visitor.rerun([uploader_state(uploader, [photo])])
    assert len(first.of("vega_lite_chart")) == 2 + 1  # the curves, and the report's chart
    assert not first.of("exception") and not run.of("exception")
    assert "Prediction: 4" in run.texts()
    assert visitor.largest < MAX_MESSAGE_MB * 1_000_000 / 4


VISITORS = 20
# The session, the most a drawing within the bounds can take (1.3 MB), and the allocator's share of the
# transient copies of each message; a drawing of 0.9 MB kept took 13 MB.
MAX_MB_PER_VISITOR = 2.5


def test_drawings_kept_for_many_visitors_stay_small(server: Server) -> None:
    """Streamlit keeps a canvas's value for the session: twenty visitors send 0.9 MB of small objects,
    twenty more the largest drawing the page accepts, and all stay."""
    over = drawing_of([[0, 0]] * 150_000)
    within = drawing_of([[] for _ in range(MAX_DRAWING_ITEMS // 2 - 10)])
    assert len(text_of(over)) < MAX_MESSAGE_MB * 1_000_000 < len(json.dumps(over)) * 2
    assert json_items(text_of(within)) <= MAX_DRAWING_ITEMS
    visitors = [PageClient(server.url) for _ in range(2 * VISITORS)]
    try:
        canvas = widget_id(visitors[0], "bidi_component")
        before = megabytes(server.pid, "VmRSS")
        runs = [
            visitor.rerun([component_state(canvas, value)])
            for visitor, value in zip(
                visitors, [over] * VISITORS + [within] * VISITORS, strict=True
            )
        ]
        grown = megabytes(server.pid, "VmRSS") - before
    finally:
        for visitor in visitors:
            visitor.close()
    print(f"\n{2 * VISITORS} visitors holding a drawing: the server grew {grown:.0f} MB")
    assert grown < 2 * VISITORS * MAX_MB_PER_VISITOR
    for run in runs[:VISITORS]:
        assert any(text == TOO_LARGE for text in run.texts()), run.texts()
    for run in runs[VISITORS:]:
        assert TOO_LARGE not in run.texts()


FRAME = 50 * MB


def test_a_frame_bigger_than_the_page_needs_is_refused_before_it_is_buffered(
    server: Server,
) -> None:
    """A websocket frame of 50 MB is refused from its header (close code 1009, or the connection
    closed while it was still coming), before the server holds it."""
    before = megabytes(server.pid, "VmRSS")
    reset_peak(server.pid)
    with PageClient(server.url) as visitor:
        try:
            visitor.send_bytes(bytes(FRAME))
            list(visitor.messages(timeout=10))
        except Closed as closed:
            code = closed.code
        except Exception:  # the server closed the connection while the frame was still going
            code = visitor.socket.close_code
    peak = megabytes(server.pid, "VmHWM") - before
    print(f"\na frame of {FRAME // MB} MB: the server's peak rose {peak:.0f} MB")
    assert code in (1009, 1006)  # message too big; or closed while it was sent
    assert peak < 20
