"""The Makefile, read as make reads it (`make -n`, which prints the commands without running them): on a
fresh machine `make run` installs what running needs and `make test` adds the test tools; the page's
port is PORT."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support.project import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
# Packages only the tests, the linters and the benchmark use: a venv that only runs holds none.
TEST_TOOLS = {
    "pytest",
    "ruff",
    "playwright",
    "mutmut",
    "kubernetes-validate",
    "gcp-storage-emulator",
}


def make(*arguments: str) -> str:
    """What `make ARGUMENTS` prints."""
    command = ["make", "--no-print-directory", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def dry_run(tmp_path: Path, *arguments: str) -> str:
    """What `make ARGUMENTS` would run on a machine with no venv yet."""
    return make("-n", f"VENV={tmp_path / 'fresh-venv'}", *arguments)


def installed_extras(commands: str) -> list[str]:
    """The extras each `uv sync` installs from the lock, in order: ['run', 'dev']."""
    return re.findall(r"uv sync --locked .*--extra (\w+)", commands)


def extra_closure(extras: list[str]) -> set[str]:
    """The distributions an install of these extras of the project pulls in directly."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    names: set[str] = set()
    pending = list(extras)
    while pending:
        for requirement in optional[pending.pop()]:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
            inner = re.match(r"mnist-argo\[([\w,]+)\]", requirement)
            if inner:
                pending += inner.group(1).split(",")
            else:
                names.add(name.lower())
    return names


def test_make_run_installs_the_runtime_only(tmp_path: Path) -> None:
    """`make run` installed `.[dev]`: Playwright, mutmut, ruff and the rest, a 2.5 GB venv."""
    commands = dry_run(tmp_path, "run")
    assert installed_extras(commands) == ["run"]
    assert not TEST_TOOLS & extra_closure(["run"])
    assert {"tensorflow-cpu", "streamlit", "hera"} <= extra_closure(["run"])
    assert "workflows/submit.py --local" in commands and "-m ui.serve" in commands
    # What make echoes while setting up is one line a command: no shell `if` spread over lines.
    assert not re.search(r"^\s*(if|then|fi)\b", commands, flags=re.M), commands


def test_make_test_adds_the_test_tools_in_one_command(tmp_path: Path) -> None:
    commands = dry_run(tmp_path, "test")
    assert installed_extras(commands) == ["run", "dev"]
    assert extra_closure(["dev"]) >= TEST_TOOLS
    assert "-m pytest" in commands


def test_the_page_takes_its_port(tmp_path: Path) -> None:
    assert "-m ui.serve --server.port 8501" in dry_run(tmp_path, "page")
    for target in ("page", "run"):
        assert "-m ui.serve --server.port 8600" in dry_run(tmp_path, target, "PORT=8600")


def test_the_readme_says_how_to_serve_the_page_alone_and_on_another_port() -> None:
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^make page\b", readme, flags=re.M)
    assert "PORT=" in readme


def phony_targets() -> list[str]:
    """The targets the Makefile declares .PHONY: the ones a user runs (the others are stamp files)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    (declared,) = re.findall(r"^\.PHONY:(.*)$", text, flags=re.M)
    return declared.split()


def commented_targets() -> dict[str, str]:
    """Each rule whose line ends in a `## what it does` comment, with that comment."""
    text = (ROOT / "Makefile").read_text()
    return dict(re.findall(r"^([A-Za-z][\w-]*):[^=\n]*?##\s*(.+)$", text, flags=re.M))


def test_every_target_a_user_runs_says_what_it_does() -> None:
    assert len(phony_targets()) > 10
    assert [name for name in phony_targets() if name not in commented_targets()] == []


def test_make_help_lists_each_target_with_its_comment() -> None:
    shown = make("help")
    rows = [line.split(maxsplit=1) for line in shown.splitlines() if line.startswith("  ")]
    assert {name: comment.strip() for name, comment in rows} == commented_targets()
    assert make() == shown, "make alone prints the same list"


def test_make_lint_and_make_test_check_formatting_and_types(tmp_path: Path) -> None:
    for target in ("lint", "test"):
        commands = dry_run(tmp_path, target)
        assert "ruff check ." in commands, target
        assert "ruff format --check ." in commands, target
        assert re.search(r"/mypy\b", commands), target
