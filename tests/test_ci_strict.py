"""A test that skips for want of a tool fails on CI (CI=true) and skips elsewhere (tests/support/ci_strict.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import ROOT

NEEDS_A_TOOL = """
import shutil
import pytest

@pytest.mark.skipif(shutil.which("no-such-tool") is None, reason="no-such-tool is not installed")
def test_with_the_tool():
    pass

def test_skipping_itself():
    pytest.skip("cannot run here")

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False

def test_plain():
    pass
"""


def run_pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_tool.py").write_text(NEEDS_A_TOOL)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    if ci is not None:
        env["CI"] = ci
    plugins = ["-p", "tests.support.ci_strict", "-p", "no:cacheprovider"]
    options = ["-q", "-rfs", "-c", os.devnull, "--rootdir", str(tmp_path)]
    command = [sys.executable, "-m", "pytest", *plugins, *options, str(tmp_path / "test_tool.py")]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow  # pytest in a fresh process
@pytest.mark.parametrize(
    "ci, code, summary",
    [
        # the skipif mark skips in setup, so that one fails as an error
        ("true", 1, "1 failed, 1 passed, 1 xfailed, 1 error"),
        (None, 0, "1 passed, 2 skipped, 1 xfailed"),
    ],
)
def test_a_skip_fails_on_ci_alone(tmp_path: Path, ci: str | None, code: int, summary: str) -> None:
    result = run_pytest(tmp_path, ci)
    assert (result.returncode, summary in result.stdout) == (code, True), result.stdout
    failed = "where every tool the tests use must be installed: no-such-tool is not installed"
    assert (failed in result.stdout) == (ci == "true")
