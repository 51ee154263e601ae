"""ui.readings: an image read once per content for the whole server, a session's decodes one at a time and
within a budget of CPU. The same against the real server, message by message: tests/test_ui_server.py."""

from __future__ import annotations

import io
import os
import threading
import time
from dataclasses import dataclass

import pytest
from PIL import Image

from tests.support.project import ROOT
from ui import readings
from ui.images.decode import MB
from ui.readings import (
    MAX_SESSION_DECODE_SECONDS,
    OUT_OF_TIME,
    Kept,
    Ledger,
    Reading,
    distinct,
    read,
)

LIMIT = 10 * MB
SAMPLE = (ROOT / "samples" / "7-photo.jpg").read_bytes()


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readings, "KEPT", Kept())


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every file make_reading is asked to read; each takes 0.05 s of CPU and 0.05 s asleep."""
    calls: list[bytes] = []

    def counted(data: bytes, max_bytes: int) -> Reading:
        calls.append(data)
        started = time.thread_time()
        while time.thread_time() - started < 0.05:
            pass
        time.sleep(0.05)
        return Reading(refusal=f"read {len(data)} bytes")

    monkeypatch.setattr(readings, "make_reading", counted)
    return calls


def test_the_same_bytes_are_read_once_for_every_session(made: list[bytes]) -> None:
    first, second = Ledger(), Ledger()
    for ledger in (first, second, first):
        assert read(b"same bytes", ledger, LIMIT).refusal == "read 10 bytes"
    assert made == [b"same bytes"]
    assert second.spent == 0  # the second session found it read


def test_a_session_pays_the_cpu_its_decodes_take(made: list[bytes]) -> None:
    ledger = Ledger()
    for index in range(3):
        read(b"file %d" % index, ledger, LIMIT)
    assert 0.15 <= ledger.spent < 0.15 + 0.1  # 0.05 s of CPU each; the sleeps are not counted


def test_past_its_budget_a_session_reads_nothing_new_and_keeps_what_it_read(
    made: list[bytes],
) -> None:
    ledger = Ledger()
    before = read(b"read before", ledger, LIMIT)
    ledger.spent = MAX_SESSION_DECODE_SECONDS
    assert read(b"new", ledger, LIMIT).refusal == OUT_OF_TIME
    assert read(b"read before", ledger, LIMIT) is before
    assert made == [b"read before"]
    assert read(b"new", Ledger(), LIMIT).refusal == "read 3 bytes"  # another session may


def most_at_once(ledgers: list[Ledger], monkeypatch: pytest.MonkeyPatch, wait: float) -> int:
    """The most make_reading calls at once, each waiting up to `wait` s inside for another."""
    running, most = 0, 0
    changed = threading.Condition()

    def slow(data: bytes, max_bytes: int) -> Reading:
        nonlocal running, most
        with changed:
            running += 1
            most = max(most, running)
            changed.notify_all()
            changed.wait_for(lambda: most > 1, timeout=wait)
            running -= 1
        return Reading()

    monkeypatch.setattr(readings, "make_reading", slow)
    tag = os.urandom(8)  # files no earlier call read
    threads = [
        threading.Thread(target=read, args=(tag + bytes([index]), ledger, LIMIT))
        for index, ledger in enumerate(ledgers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return most


def test_a_session_decodes_one_image_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun that interrupts a run may start while the old one still decodes."""
    one = Ledger()
    assert most_at_once([one] * 4, monkeypatch, wait=0.1) == 1
    assert most_at_once([Ledger(), Ledger()], monkeypatch, wait=60) == 2  # apart, none waits


def test_readings_past_the_size_go_least_recently_used_first() -> None:
    kept = Kept(size=2)
    for key in (b"a", b"b"):
        kept.put(key, Reading(refusal=key.decode()))
    assert kept.get(b"a") is not None  # a is now the most recent
    kept.put(b"c", Reading())
    assert kept.get(b"b") is None and kept.get(b"a") is not None and kept.get(b"c") is not None


@dataclass
class File:
    name: str
    data: bytes

    def getvalue(self) -> bytes:
        return self.data


def test_files_of_the_same_bytes_are_given_once_whatever_their_names() -> None:
    files = [File("a.png", b"1"), File("b.png", b"2"), File("c.png", b"1"), File("a.png", b"1")]
    once, repeated = distinct(files)
    assert [file.name for file in once] == ["a.png", "b.png"]
    assert repeated == 2


def test_a_reading_holds_pictures_st_image_passes_on_as_they_are() -> None:
    reading = read(SAMPLE, Ledger(), LIMIT)
    assert reading.refusal is None and reading.pixels.shape == (28, 28)
    picture = Image.open(io.BytesIO(reading.pair))
    assert picture.format == "PNG"
    assert picture.width == reading.pair_width  # st.image at this width passes it on as it is


@pytest.mark.parametrize(
    ("share", "shown"),
    [(0.9997, "99.9%"), (0.99999, "99.9%"), (1.0, "100.0%"), (0.7, "70.0%"), (0.12345, "12.3%")],
)
def test_a_confidence_is_never_rounded_up_to_certainty(share: float, shown: str) -> None:
    assert readings.percent(share) == shown
