"""What the page's server accepts of a browser's widget states: each bounded to what its widget sends,
before Streamlit parses and keeps it.

A rerun message (BackMsg.rerun_script) carries the value of every widget, and Streamlit keeps each value of
the page's widgets for the whole session, and disconnectedSessionTTL (120 s) past its socket's end
(streamlit/runtime/state/session_state.py, SessionState.set_widgets_from_proto and WStates). Streamlit
bounds only the message (server.maxWidgetStateSize, set in .streamlit/config.toml), and the drawing
canvas's value is JSON text that Python holds at up to twenty times its size once parsed (a list of
empty lists: 3 bytes each of text, 64 of objects). So before Streamlit sees a message:
- a JSON value (the canvas's: its Fabric.js drawing and a PNG of it) over MAX_DRAWING_BYTES, or that
  parses to more than MAX_DRAWING_ITEMS values, is replaced by REFUSED_DRAWING, which the page reads as
  "too large" (ui/drawing.py); a transient JSON trigger value over them by `null`;
- the uploader's list of files is cut to MAX_SESSION_FILES, what the upload store keeps per session.
BoundedRuntime applies this to every message; ui.serve starts Streamlit with it.
"""

from __future__ import annotations

import json
import logging

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Common_pb2 import FileUploaderState
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime import Runtime
from streamlit.runtime.session_manager import SessionClient

from ui.uploads import MAX_SESSION_FILES

# Megabytes of one websocket message, and of the widget states one rerun brings: .streamlit/config.toml's
# server.maxMessageSize and server.maxWidgetStateSize (a test checks). The smallest both settings hold;
# what the page's widgets send is far less (a drawing of twenty long strokes is 0.2 MB).
MAX_MESSAGE_MB = 1
MAX_DRAWING_BYTES = 256 * 1024  # a stroke of 200 points is about 8 KB of JSON; its PNG some 20 KB
# JSON values: a stroke of 200 points has about 1,250, a digit a few strokes. Python holds the most that
# many can take (empty lists) in 1.3 MB: with 200 visitors each keeping one, 0.3 GB.
MAX_DRAWING_ITEMS = 20_000
REFUSED = "refused"
TOO_LARGE = "The drawing is too large to read: clear the canvas and draw one digit again."
# In the canvas's own shape (streamlit_drawable_canvas.st_canvas reads drawing.raw and drawing.data).
REFUSED_DRAWING = json.dumps({"drawing": {"raw": {"objects": [], REFUSED: True}, "data": None}})

log = logging.getLogger("mnist-page")


def json_items(text: str) -> int:
    """At least as many as the values `text` parses to: each but the first follows a `,` or a `:`, or
    opens its array; an object's keys follow `{` or `,`."""
    return sum(text.count(mark) for mark in ",:[{") + 1


def too_large(text: str) -> bool:
    return len(text) > MAX_DRAWING_BYTES or json_items(text) > MAX_DRAWING_ITEMS


def bound_rerun(message: BackMsg) -> BackMsg:
    """`message` with each widget state within the page's bounds. A new message when any is not:
    Streamlit keeps the last rerun's ClientState (AppSession._client_state), and a protobuf message
    keeps every string it ever held, replaced or not, until it goes."""
    if message.WhichOneof("type") != "rerun_script":
        return message
    states = message.rerun_script.widget_states.widgets
    bounded = [bound_state(state) for state in states]
    if all(new is old for new, old in zip(bounded, states, strict=True)):
        return message
    message.rerun_script.ClearField("widget_states")
    fresh = BackMsg()
    fresh.CopyFrom(message)  # what is left: the page and query, small
    fresh.rerun_script.widget_states.widgets.extend(bounded)
    return fresh


def bound_state(state: WidgetState) -> WidgetState:
    """`state` itself when it is within the bounds, else a new one that is."""
    kind = state.WhichOneof("value")
    if kind == "json_value" and too_large(state.json_value):
        log.warning("a drawing of %d bytes was refused", len(state.json_value))
        return WidgetState(id=state.id, json_value=REFUSED_DRAWING)
    if kind == "json_trigger_value" and too_large(state.json_trigger_value):
        return WidgetState(id=state.id, json_trigger_value="null")
    files = state.file_uploader_state_value.uploaded_file_info
    if kind == "file_uploader_state_value" and len(files) > MAX_SESSION_FILES:
        return WidgetState(
            id=state.id,
            file_uploader_state_value=FileUploaderState(
                uploaded_file_info=files[:MAX_SESSION_FILES]
            ),
        )
    return state


class BoundedRuntime(Runtime):
    """Streamlit's Runtime, handed each browser message once it is within the page's bounds."""

    def handle_backmsg(
        self, session_id: str, msg: BackMsg, *, client: SessionClient | None = None
    ) -> None:
        super().handle_backmsg(session_id, bound_rerun(msg), client=client)
