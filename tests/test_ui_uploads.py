"""The page's upload store: what one visitor and all of them may keep (ui.uploads); the served page uses
it (tests/test_ui_widget_states.py)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui.images.decode import MB
from ui.uploads import (
    MAX_SESSION_BYTES,
    MAX_SESSION_FILES,
    MAX_TOTAL_BYTES,
    BoundedUploadManager,
)

FILE = 10 * MB - 4096  # under server.maxUploadSize


def record(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name="x.png", type="image/png", data=bytes(size))


def held(manager: BoundedUploadManager) -> int:
    return sum(len(kept.data) for files in manager.file_storage.values() for kept in files.values())


def fill(manager: BoundedUploadManager, session: str, count: int, size: int) -> list[int]:
    """Try to add `count` files of `size` under new ids; the HTTP status each would get."""
    statuses = []
    for index in range(count):
        try:
            manager.add_file(session, record(f"{session}-{index}", size))
            statuses.append(204)
        except HTTPException as refusal:
            statuses.append(refusal.status_code)
    return statuses


def test_one_session_keeps_at_most_its_share_in_bytes_and_in_files() -> None:
    manager = BoundedUploadManager("/_stcore/upload_file")
    statuses = fill(manager, "visitor", 30, FILE)
    assert statuses.count(204) == MAX_SESSION_BYTES // FILE
    assert set(statuses[MAX_SESSION_BYTES // FILE :]) == {413}
    assert held(manager) <= MAX_SESSION_BYTES
    small = BoundedUploadManager("/_stcore/upload_file")  # and in files, however small
    assert fill(small, "visitor", 100, 1000).count(204) == MAX_SESSION_FILES


def test_all_sessions_together_keep_at_most_the_total() -> None:
    manager = BoundedUploadManager("/_stcore/upload_file")
    for visitor in range(2 * MAX_TOTAL_BYTES // MAX_SESSION_BYTES):
        fill(manager, f"visitor-{visitor}", MAX_SESSION_FILES, FILE)
    assert MAX_TOTAL_BYTES - FILE < held(manager) <= MAX_TOTAL_BYTES
    manager.remove_session_files("visitor-0")  # a visitor leaves: room for the next
    assert fill(manager, "newcomer", 1, FILE) == [204]


def test_a_file_sent_again_under_its_id_replaces_itself() -> None:
    manager = BoundedUploadManager("/_stcore/upload_file")
    for _ in range(3 * MAX_SESSION_FILES):
        manager.add_file("visitor", record("same", FILE))
    assert held(manager) == FILE
    manager.remove_file("visitor", "same")
    assert fill(manager, "visitor", MAX_SESSION_FILES, 1000).count(204) == MAX_SESSION_FILES
