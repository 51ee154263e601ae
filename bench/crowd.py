"""A crowd on the page: many visitors at once, each opening the page and uploading one photo.

python -m bench.crowd [--model-uri URI] [--visitors 30] [--photo samples/4-photo.jpg] [--rounds 1]
                      [--distinct]

Starts the page as it is served (`python -m ui.serve`, on 127.0.0.1, stopped by its PID), lets one
visitor load the model, then starts VISITORS clients of Streamlit's own protocol at once
(tests/support/page_client.py: a websocket each, the photo PUT as the file uploader does). Each one
opens the page (the first run), uploads the photo and waits for its prediction; with --distinct each
visitor's copy differs by a few bytes after its end, so the page decodes every one (a photo's reading
is otherwise made once, by its digest). Printed: how long the visitors waited (first message sent to
their prediction shown: min, p50, p95, max), how many failed, the
server's CPU seconds from /proc (in all, and per visitor) and its resident memory (before, peak,
after). Target: 30 visitors, no error, p95 within 10 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_P95_SECONDS = 10.0
START_SECONDS = 120  # the server imports its libraries before it listens


@contextlib.contextmanager
def page_server(model_uri: str, port: int, log: Path) -> Iterator[tuple[str, int]]:
    """`python -m ui.serve` on 127.0.0.1:`port` serving `model_uri`; its URL and PID."""
    from tests.support.project import wait_for_port

    env = {**os.environ, "MODEL_URI": model_uri, "PYTHONPATH": str(ROOT)}
    options = ["--server.headless", "true", "--server.address", "127.0.0.1"]
    options += ["--server.port", str(port), "--browser.gatherUsageStats", "false"]
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "ui.serve", *options],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, timeout=START_SECONDS)
            yield f"http://127.0.0.1:{port}", server.pid
        finally:
            server.terminate()
            server.wait(timeout=30)


def visit(url: str, photo: bytes, start: threading.Barrier) -> float:
    """One visitor: open the page, upload `photo`, wait for its prediction; the seconds it took."""
    from tests.support.page_client import PageClient, uploader_state

    with PageClient(url) as visitor:
        start.wait()
        began = time.monotonic()
        first = visitor.rerun()
        (uploader,) = first.of("file_uploader")
        sent = visitor.upload("photo.jpg", photo)
        run = visitor.rerun([uploader_state(uploader.file_uploader.id, [sent])])
        if not any(text.startswith("Prediction: ") for text in run.texts()):
            raise RuntimeError(f"no prediction: {run.texts()[:3]}")
        return time.monotonic() - began


def crowd(url: str, photos: list[bytes]) -> tuple[list[float], list[str]]:
    """A visitor for each of `photos`, at once (their websockets opened first, then all started
    together)."""
    waits: list[float] = []
    errors: list[str] = []
    start = threading.Barrier(len(photos))

    def one(photo: bytes) -> None:
        try:
            waits.append(visit(url, photo, start))
        except Exception as error:  # counted and printed: the benchmark's verdict
            errors.append(f"{type(error).__name__}: {error}"[:200])
            start.abort()

    threads = [threading.Thread(target=one, args=(photo,)) for photo in photos]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return waits, errors


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def make_parser() -> argparse.ArgumentParser:
    from ui.model_source import model_uri

    parser = argparse.ArgumentParser(prog="python -m bench.crowd", description=__doc__)
    parser.add_argument("--model-uri", default=model_uri(), help="the model the page serves")
    parser.add_argument("--visitors", type=int, default=30)
    parser.add_argument("--photo", type=Path, default=ROOT / "samples" / "4-photo.jpg")
    parser.add_argument("--rounds", type=int, default=1, help="crowds, one after the other")
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument(
        "--distinct", action="store_true", help="a copy of the photo of its own for each visitor"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    from tests.support.page_client import PageClient, proc_cpu_seconds, proc_kilobytes, reset_peak
    from tests.support.project import free_port

    args = make_parser().parse_args(argv)
    if args.visitors < 1 or not args.photo.is_file():
        print("python -m bench.crowd: error: --visitors >= 1 and a --photo file", file=sys.stderr)
        return 2
    photo = args.photo.read_bytes()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-crowd-{os.getpid()}.log"
    with page_server(args.model_uri, args.port or free_port(), log) as (url, pid):
        with PageClient(url) as first:  # the model loads once, before the crowd
            if not first.rerun().of("file_uploader"):
                print(
                    f"python -m bench.crowd: error: no model served from {args.model_uri}",
                    file=sys.stderr,
                )
                return 2
        visit(url, photo, threading.Barrier(1))  # and the photo's reading is made once
        for number in range(1, args.rounds + 1):
            rss = proc_kilobytes(pid, "VmRSS") / 1024
            reset_peak(pid)
            cpu = proc_cpu_seconds(pid)
            copies = [
                photo + (f"{number} {index}".encode() if args.distinct else b"")
                for index in range(args.visitors)
            ]  # bytes after a JPEG's end are not read by its decoder
            waits, errors = crowd(url, copies)
            spent = proc_cpu_seconds(pid) - cpu
            peak = proc_kilobytes(pid, "VmHWM") / 1024
            time.sleep(2)
            after = proc_kilobytes(pid, "VmRSS") / 1024
            kind = "a photo of their own" if args.distinct else "the same photo"
            print(f"crowd {number}: {args.visitors} visitors at once, each uploading {kind}")
            if waits:
                print(
                    f"  waited: min {min(waits):.1f} s, p50 {statistics.median(waits):.1f} s, "
                    f"p95 {percentile(waits, 0.95):.1f} s, max {max(waits):.1f} s"
                )
            print(f"  errors: {len(errors)}" + "".join(f"\n    {e}" for e in errors[:5]))
            print(f"  server CPU: {spent:.1f} s in all, {spent / args.visitors:.2f} s a visitor")
            print(f"  server RSS: {rss:.0f} MB before, peak {peak:.0f} MB, {after:.0f} MB after")
            met = not errors and waits and percentile(waits, 0.95) <= MAX_P95_SECONDS
            print(
                f"  target (no error, p95 within {MAX_P95_SECONDS:.0f} s): {'met' if met else 'NOT met'}"
            )
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; server log: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
