"""uv.lock matches pyproject.toml, running installs no test tool, this venv holds the lock (offline)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.prefix) / "uv" / "bin" / "uv"


def uv(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """uv offline on the project in `cwd`, with this venv as its environment."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": sys.prefix, "UV_PYTHON_DOWNLOADS": "never"}
    return subprocess.run(
        [str(UV), *args, "--offline"], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_the_lock_matches_the_declared_requirements(tmp_path: Path) -> None:
    assert uv("lock", "--check").returncode == 0, uv("lock", "--check").stderr
    # The same check refuses a lock left behind by a changed requirement.
    shutil.copy(ROOT / "uv.lock", tmp_path)
    declared = (ROOT / "pyproject.toml").read_text()
    assert '"pooch>=1.8"' in declared
    (tmp_path / "pyproject.toml").write_text(
        declared.replace('"pooch>=1.8"', '"pooch>=1.8,!=1.8.2"')
    )
    stale = uv("lock", "--check", cwd=tmp_path)
    # "needs to be updated" where uv's cache holds what it resolves with; offline without it, unresolvable
    assert stale.returncode == 1 and "error:" in stale.stderr, stale.stderr


def locked(extra: str) -> set[str]:
    """The names of the packages the lock installs for one extra."""
    exported = uv("export", "--frozen", "--no-hashes", "--no-emit-project", "--extra", extra)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    return {line.split("==")[0] for line in lines if "==" in line and not line.startswith("#")}


def test_running_installs_the_runtime_and_testing_adds_the_tools() -> None:
    run, dev = locked("run"), locked("dev")
    assert {"tensorflow-cpu", "streamlit", "hera"} <= run < dev
    assert {"pytest", "ruff", "mypy", "playwright", "mutmut"} <= dev - run


def test_this_environment_holds_exactly_the_locked_versions() -> None:
    synced = uv("sync", "--locked", "--check", "--extra", "dev")
    assert synced.returncode == 0, synced.stderr
