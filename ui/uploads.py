"""Streamlit's in-memory upload store, with a bound on what one visitor and all of them may keep.

Streamlit (1.67) keeps every PUT to /_stcore/upload_file/<session>/<id> in memory under the id the
client sends, until the session ends: the route checks only that the session is active and the
file's size (streamlit/web/server/starlette/starlette_routes.py, create_upload_routes._upload_put),
and the store has no cap on count or total (streamlit/runtime/memory_uploaded_file_manager.py,
MemoryUploadedFileManager.add_file). One anonymous visitor could fill the server's memory with ids
of their own. BoundedUploadManager refuses a file (HTTP 413) that would take a session past
MAX_SESSION_FILES or MAX_SESSION_BYTES, or all sessions past MAX_TOTAL_BYTES; ui.serve starts
Streamlit with it.
"""

from __future__ import annotations

import threading

from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui.images.decode import MB

MAX_FILES = 20  # files the page reads per upload; the rest are named, not read
MAX_SESSION_FILES = MAX_FILES + 1  # the uploader's files and the camera's photo
MAX_SESSION_BYTES = 100 * MB  # twenty phone photos
# All visitors together: with the server itself (about 0.25 GB, the model loaded) and two decodes at
# once (under 0.3 GB each), this keeps the page's pod (2 GiB) well clear of its limit.
MAX_TOTAL_BYTES = 400 * MB


class BoundedUploadManager(MemoryUploadedFileManager):
    """MemoryUploadedFileManager that refuses files past a session's and the server's bounds."""

    def __init__(self, upload_endpoint: str) -> None:
        super().__init__(upload_endpoint)
        self._admission = threading.Lock()  # one file admitted at a time: the check holds

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        with self._admission:
            refusal = self.refusal(session_id, file)
            if refusal is not None:
                raise HTTPException(status_code=413, detail=refusal)
            super().add_file(session_id, file)

    def refusal(self, session_id: str, file: UploadedFileRec) -> str | None:
        """Why `file` may not be kept, or None."""
        with self._lock:  # the store's own lock: sessions end and files go on other threads
            held = {
                name: len(kept.data) for name, kept in self.file_storage.get(session_id, {}).items()
            }
            total = sum(
                len(kept.data) for files in self.file_storage.values() for kept in files.values()
            )
        replaced = held.pop(file.file_id, 0)
        size = len(file.data)
        if len(held) + 1 > MAX_SESSION_FILES:
            return f"up to {MAX_SESSION_FILES} files are kept per visitor"
        if sum(held.values()) + size > MAX_SESSION_BYTES:
            return f"up to {MAX_SESSION_BYTES // MB} MB of files are kept per visitor"
        if total - replaced + size > MAX_TOTAL_BYTES:
            return "the page holds as many uploads as it can; try again in a minute"
        return None
