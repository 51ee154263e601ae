"""tests/reference through a real HTTP server as REFERENCE_MIRROR: a good download lands in the cache,
a bad sum or a cut-short download is refused in one line and leaves nothing."""

from __future__ import annotations

import hashlib
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.reference as reference
from tests.reference import Pin, ReferenceUnavailable, mirrored, reference_file
from tests.support.project import free_port

# The pinned host: a port of this machine that nothing listens on, so only a mirror can answer.
PINNED_HOST = f"http://127.0.0.1:{free_port()}"
PINNED_URL = f"{PINNED_HOST}/files/v1/data.bin"
CONTENT = b"reference bytes\n" * 1000


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the server's folder; a path under /cut/ gets its Content-Length but half its body."""

    def do_GET(self) -> None:
        if self.path.startswith("/cut/"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(CONTENT)))
            self.end_headers()
            self.wfile.write(CONTENT[: len(CONTENT) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving a folder laid out as the pinned URLs' paths: (its URL, the folder)."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: Handler(*a, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def nothing_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ../shared copy, an empty cache (REFERENCE_CACHE): a stranger's clone. Returns the cache."""
    monkeypatch.setattr(reference, "SHARED", tmp_path / "no-shared")
    monkeypatch.setenv(reference.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def pin_served(
    monkeypatch: pytest.MonkeyPatch,
    mirror: tuple[str, Path],
    url: str = PINNED_URL,
    data: bytes = CONTENT,
    sha: str | None = None,
) -> str:
    """Pin `test-file` at `url` (sha256 `sha`), serve `data` at its path on the mirror: its URL."""
    address, folder = mirror
    path = folder / urllib.parse.urlsplit(url).path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    pin = Pin("test-file", "a test file", "test/data.bin", sha or sha256(data), url=url)
    monkeypatch.setattr(reference, "pins", lambda: {pin.name: pin})
    monkeypatch.setenv(reference.MIRROR_ENV, address)
    return address


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_good_download_replaces_a_stale_copy_in_the_cache_from_the_mirror(
    mirror: tuple[str, Path], nothing_shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_served(monkeypatch, mirror)
    nothing_shared.mkdir()
    (nothing_shared / "test-file.bin").write_bytes(b"an older or damaged copy")
    path = reference_file("test-file")
    assert path == nothing_shared / "test-file.bin" and path.read_bytes() == CONTENT
    (mirror[1] / "files").rename(mirror[1] / "gone")  # the next call reads the cache
    assert reference_file("test-file").read_bytes() == CONTENT


def test_without_a_mirror_the_pinned_host_itself_is_asked(
    nothing_shared: Path, monkeypatch: pytest.MonkeyPatch, mirror: tuple[str, Path]
) -> None:
    pin_served(monkeypatch, mirror)
    monkeypatch.delenv(reference.MIRROR_ENV)
    with pytest.raises(ReferenceUnavailable) as refused:
        reference_file("test-file")
    assert str(refused.value).startswith(f"test-file (a test file): cannot download {PINNED_URL}: ")
    assert files_in(nothing_shared) == []


def test_a_bad_sum_is_refused_in_one_line_and_leaves_nothing(
    mirror: tuple[str, Path], nothing_shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = sha256(b"the bytes that were pinned")
    url = pin_served(monkeypatch, mirror, sha=pinned)
    with pytest.raises(ReferenceUnavailable) as refused:
        reference_file("test-file")
    assert str(refused.value) == (
        f"test-file (a test file): {url}/files/v1/data.bin: sha256 does not match the pinned {pinned}"
    )
    assert files_in(nothing_shared) == []


def test_a_cut_short_download_leaves_nothing(
    mirror: tuple[str, Path], nothing_shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pin_served(monkeypatch, mirror, f"{PINNED_HOST}/cut/data.bin", b"", sha256(CONTENT))
    with pytest.raises(ReferenceUnavailable) as refused:
        reference_file("test-file")
    line = str(refused.value)
    assert line.startswith(f"test-file (a test file): cannot download {url}/cut/data.bin: ")
    assert "\n" not in line
    assert files_in(nothing_shared) == []


def test_the_ci_copy_is_used_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror: tuple[str, Path]
) -> None:
    pin_served(monkeypatch, mirror)
    monkeypatch.setattr(reference, "SHARED", tmp_path / "shared")
    (tmp_path / "shared" / "test").mkdir(parents=True)
    (tmp_path / "shared" / "test" / "data.bin").write_bytes(b"CI's copy")
    assert reference_file("test-file") == tmp_path / "shared" / "test" / "data.bin"


def test_the_mirror_replaces_scheme_and_host_and_keeps_the_path() -> None:
    url = "https://raw.githubusercontent.com/argoproj/argo-workflows/abc/api/x.json?raw=1"
    assert (
        mirrored(url, "http://127.0.0.1:8080")
        == "http://127.0.0.1:8080/argoproj/argo-workflows/abc/api/x.json"
    )
    assert mirrored(url, "https://mirror.example/pinned/") == (
        "https://mirror.example/pinned/argoproj/argo-workflows/abc/api/x.json"
    )
    assert mirrored(url, "") == url
    with pytest.raises(ReferenceUnavailable, match="REFERENCE_MIRROR=ftp://x: not an http"):
        mirrored(url, "ftp://x")
