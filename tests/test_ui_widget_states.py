"""ui.widget_states: a browser's widget states bounded before Streamlit keeps them, message by message (the
settings that bound the message itself: tests/test_ui_app.py; the real server: tests/test_ui_server.py)."""

from __future__ import annotations

import json

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Common_pb2 import FileUploaderState, UploadedFileInfo
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from tests.support.page_client import drawing_of, text_of
from ui.uploads import MAX_SESSION_FILES
from ui.widget_states import (
    MAX_DRAWING_BYTES,
    MAX_DRAWING_ITEMS,
    REFUSED,
    REFUSED_DRAWING,
    bound_rerun,
    json_items,
)


def rerun(*states: WidgetState) -> BackMsg:
    message = BackMsg(rerun_script=ClientState(query_string="a=1", page_script_hash="page"))
    message.rerun_script.widget_states.CopyFrom(WidgetStates(widgets=list(states)))
    return message


def values_in(value: object) -> int:
    """The values JSON parses to, keys included: what Python holds."""
    if isinstance(value, dict):
        return 1 + sum(1 + values_in(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    return 1


@pytest.mark.parametrize(
    "text",
    ["0", "[]", "[[],[],[]]", '{"a":[1,2,{"b":null}],"c":"x"}', '[{},{},""]', '"a,b:[{"'],
)
def test_json_items_counts_at_least_every_value_the_text_parses_to(text: str) -> None:
    assert json_items(text) >= values_in(json.loads(text))


def test_a_drawing_within_the_bounds_goes_through_as_sent() -> None:
    within = text_of(drawing_of([{"path": [["M", 1.5, 2.5], ["Q", 3, 4, 5, 6]]}] * 100))
    message = rerun(WidgetState(id="canvas", json_value=within))
    assert bound_rerun(message) is message
    assert message.rerun_script.widget_states.widgets[0].json_value == within


@pytest.mark.parametrize(
    "objects",
    [
        ["x" * (MAX_DRAWING_BYTES // 10)] * 11,  # bytes: long strings
        [[] for _ in range(MAX_DRAWING_ITEMS // 2 + 1)],  # values: few bytes each
    ],
    ids=["too many bytes", "too many values"],
)
def test_a_drawing_past_the_bounds_is_replaced_and_nothing_of_it_is_kept(objects: list) -> None:
    over = text_of(drawing_of(objects))
    message = rerun(
        WidgetState(id="uploader", file_uploader_state_value=FileUploaderState()),
        WidgetState(id="canvas", json_value=over),
    )
    bounded = bound_rerun(message)
    states = {state.id: state for state in bounded.rerun_script.widget_states.widgets}
    assert states["canvas"].json_value == REFUSED_DRAWING
    assert json.loads(REFUSED_DRAWING)["drawing"]["raw"][REFUSED] is True
    assert states["uploader"].HasField("file_uploader_state_value")
    assert bounded.rerun_script.query_string == "a=1"
    assert bounded.rerun_script.page_script_hash == "page"
    # Streamlit keeps the last ClientState: the new message holds none of the refused text
    assert bounded.ByteSize() < 1000 < len(over)


def test_a_trigger_value_past_the_bounds_becomes_null() -> None:
    message = rerun(WidgetState(id="t", json_trigger_value="[" + "[]," * MAX_DRAWING_ITEMS + "[]]"))
    assert bound_rerun(message).rerun_script.widget_states.widgets[0].json_trigger_value == "null"


def test_the_uploaders_list_is_cut_to_what_the_upload_store_keeps() -> None:
    info = UploadedFileInfo(file_id="same", name="x.jpg", size=10)
    state = WidgetState(
        id="uploader",
        file_uploader_state_value=FileUploaderState(uploaded_file_info=[info] * 5000),
    )
    (kept,) = bound_rerun(rerun(state)).rerun_script.widget_states.widgets
    assert len(kept.file_uploader_state_value.uploaded_file_info) == MAX_SESSION_FILES


def test_the_served_page_runs_with_the_bounded_runtime() -> None:
    from streamlit.web.server import server

    from ui.serve import use_bounded_server
    from ui.uploads import BoundedUploadManager
    from ui.widget_states import BoundedRuntime

    runtime, uploads = server.Runtime, server.MemoryUploadedFileManager
    try:
        use_bounded_server()
        assert server.Runtime is BoundedRuntime
        assert server.MemoryUploadedFileManager is BoundedUploadManager
    finally:
        server.Runtime, server.MemoryUploadedFileManager = runtime, uploads
