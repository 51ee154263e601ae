"""A client of the page's server speaking Streamlit's protocol as the browser's frontend does (BackMsg on
/_stcore/stream, ForwardMsg back, files PUT where the server says: streamlit/web/server/starlette/)."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import requests
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Common_pb2 import FileUploaderState, FileURLsRequest, UploadedFileInfo
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

XSRF_COOKIE = "_streamlit_xsrf"
RUN_TIMEOUT = 300.0  # the first run loads the model


class Closed(ConnectionError):
    """The server closed the websocket; `code` is its close code (1009: message too big)."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"closed by the server: {code} {reason}")
        self.code = code


@dataclass
class Run:
    """What one script run sent back: its elements in order, and how it finished."""

    elements: list[Element] = field(default_factory=list)
    finished: int | None = None

    def of(self, kind: str) -> list[Element]:
        """The elements of one type ("file_uploader", "bidi_component", "alert", "metric", ...)."""
        return [element for element in self.elements if element.WhichOneof("type") == kind]

    def texts(self) -> list[str]:
        """Every alert's and text element's words, and every metric as `label: value`."""
        found = []
        for element in self.elements:
            kind = element.WhichOneof("type")
            if kind == "alert":
                found.append(element.alert.body)
            elif kind == "text":
                found.append(element.text.body)
            elif kind == "metric":
                found.append(f"{element.metric.label}: {element.metric.body}")
        return found


class PageClient:
    """One visitor: a session on the page's server, driven message by message."""

    def __init__(self, url: str, max_size: int | None = 64 * 1024 * 1024) -> None:
        self.url = url
        self.http = requests.Session()
        # the health check sets the XSRF cookie
        self.http.get(f"{url}/_stcore/health", timeout=30).raise_for_status()
        self.xsrf = self.http.cookies.get(XSRF_COOKIE)
        self._open = contextlib.ExitStack()
        self.socket: ClientConnection = self._open.enter_context(
            connect(
                url.replace("http://", "ws://") + "/_stcore/stream",
                subprotocols=["streamlit", self.xsrf],
                max_size=max_size,
                compression=None,
                open_timeout=30,
            )
        )
        self.session_id: str | None = None
        self.largest = 0  # bytes of the largest message the server sent

    def __enter__(self) -> PageClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._open.close()
        self.http.close()

    def send_bytes(self, data: bytes) -> None:
        self.socket.send(data)

    def messages(self, timeout: float) -> Iterator[ForwardMsg]:
        """ForwardMsgs as they arrive, until `timeout` seconds pass without one."""
        while True:
            try:
                data = self.socket.recv(timeout=timeout)
            except TimeoutError:
                return
            except ConnectionClosed as closed:
                code, reason = (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else (None, "")
                raise Closed(code, reason) from None
            self.largest = max(self.largest, len(data))
            message = ForwardMsg()
            message.ParseFromString(data)
            if message.WhichOneof("type") == "new_session":
                self.session_id = message.new_session.initialize.session_id or self.session_id
            yield message

    def rerun(self, widgets: list[WidgetState] = (), timeout: float = RUN_TIMEOUT) -> Run:
        """Ask for a rerun with these widget states, as the frontend does; the run's elements."""
        state = ClientState(query_string="", page_script_hash="")
        state.widget_states.CopyFrom(WidgetStates(widgets=list(widgets)))
        self.send_bytes(BackMsg(rerun_script=state).SerializeToString())
        run = Run()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.messages(timeout=deadline - time.monotonic()):
                kind = message.WhichOneof("type")
                if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                    run.elements.append(message.delta.new_element)
                elif kind == "script_finished":
                    if message.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                        run = Run()  # a newer run replaces this one
                        continue
                    run.finished = message.script_finished
                    return run
        raise TimeoutError(f"no script_finished within {timeout} s")

    def upload(self, name: str, data: bytes) -> UploadedFileInfo:
        """Ask for an upload URL and PUT `data` there, as the file uploader does."""
        request_id = uuid.uuid4().hex
        request = FileURLsRequest(
            request_id=request_id, file_names=[name], session_id=self.session_id
        )
        self.send_bytes(BackMsg(file_urls_request=request).SerializeToString())
        for message in self.messages(timeout=60):
            if message.WhichOneof("type") == "file_urls_response":
                response = message.file_urls_response
                if response.response_id == request_id:
                    break
        else:
            raise TimeoutError("no file_urls_response")
        (urls,) = response.file_urls
        put = self.http.put(
            f"{self.url}{urls.upload_url}",
            files={"file": (name, data, "application/octet-stream")},
            headers={"X-Xsrftoken": self.xsrf},
            timeout=120,
        )
        put.raise_for_status()
        return UploadedFileInfo(name=name, size=len(data), file_id=urls.file_id, file_urls=urls)


def uploader_state(widget_id: str, files: list[UploadedFileInfo]) -> WidgetState:
    """The file uploader's state naming `files` (the same file may be named many times)."""
    return WidgetState(
        id=widget_id, file_uploader_state_value=FileUploaderState(uploaded_file_info=files)
    )


def drawing_of(objects: list) -> dict:
    """A canvas value in the shape the canvas sends (its Fabric.js objects, no PNG)."""
    return {"drawing": {"raw": {"objects": objects}, "data": None}}


def text_of(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))  # as the browser's JSON.stringify writes it


def component_state(widget_id: str, value: object) -> WidgetState:
    """A custom component's (the drawing canvas's) state: JSON text, as its frontend sends it."""
    return WidgetState(id=widget_id, json_value=text_of(value))


def proc_cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_kilobytes(pid: int, field: str) -> int:
    """A memory figure of process `pid` from /proc/PID/status: VmRSS now, VmHWM its peak."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def reset_peak(pid: int) -> None:
    """Start VmHWM of process `pid` again from its resident memory now (proc(5), clear_refs: 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
