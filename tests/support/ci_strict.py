"""On CI (CI=true) a skipped test fails: the tests that need a real tool (gcloud, kubectl, shellcheck, podman,
chromium) skip on a machine without it, but CI's machine must have every one, and a skip there would hide
that a check never ran. tests/conftest.py installs the hook."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if on_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (
            f"skipped on CI, where every tool the tests use must be installed: {reason}"
        )
