"""Headless Chromium for the browser tests: Debian's, else Playwright's, else a one-line failure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
NO_CHROMIUM = (
    "no Chromium for the browser tests: install Debian's (apt-get install chromium) "
    "or Playwright's (python -m playwright install chromium)"
)
# No sandbox (tests run as root), no GPU, and nothing the browser would fetch on its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_program(playwrights: Path, debian: Path = DEBIAN_CHROMIUM) -> Path:
    """Debian's Chromium, else Playwright's build at `playwrights`; fails in one line if neither."""
    for program in (debian, playwrights):
        if program.is_file():
            return program
    pytest.fail(NO_CHROMIUM, pytrace=False)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright Browser), closed on leaving."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium_program(Path(playwright.chromium.executable_path))),
            args=CHROMIUM_ARGS,
            headless=True,
        )
        try:
            yield browser
        finally:
            browser.close()
