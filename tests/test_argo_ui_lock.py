"""The lock file the local cluster's Argo UI is installed from (infra/local-cluster/argo/ui/yarn.lock,
frozen, by infra/local-cluster/build-ui.sh): every package comes from the npm registry, checked by its
integrity, and argo-ui is npm's 1.0.0, not the git commit on GitHub that Argo's ui/package.json names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.project import ROOT

LOCK = ROOT / "infra" / "local-cluster" / "argo" / "ui" / "yarn.lock"
REGISTRY = re.compile(r"^https://registry\.(yarnpkg\.com|npmjs\.org)/")
# npm's argo-ui 1.0.0, its only version (`npm view argo-ui@1.0.0 dist.integrity`).
ARGO_UI_INTEGRITY = "sha512-NvV47SAcVdTZeTm59EVw09u8ZdbXUo2kPdLCveJ8kbBAsFZ3pbYgDGcB9xE61iWCgM1l82sdczUp4NAfGOdCAQ=="


def entries(lock: Path) -> dict[str, dict[str, str]]:
    """A yarn 1 lock file's entries: their key line -> the fields of their first level."""
    found: dict[str, dict[str, str]] = {}
    for block in lock.read_text().split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith("#")]
        if not lines:
            continue
        fields = dict(
            line.strip().split(" ", 1) for line in lines[1:] if re.match(r"^  [^ ]+ ", line)
        )
        found[lines[0].rstrip(":")] = {name: value.strip('"') for name, value in fields.items()}
    return found


@pytest.fixture(scope="module")
def locked() -> dict[str, dict[str, str]]:
    return entries(LOCK)


def test_every_package_is_npms_with_its_integrity(locked: dict[str, dict[str, str]]) -> None:
    assert len(locked) > 1000, len(locked)
    elsewhere = {
        key: fields.get("resolved")
        for key, fields in locked.items()
        if not REGISTRY.match(fields.get("resolved", ""))
    }
    unchecked = sorted(key for key, fields in locked.items() if "integrity" not in fields)
    assert not elsewhere, elsewhere
    assert not unchecked, unchecked


def test_argo_ui_is_npms_one_version(locked: dict[str, dict[str, str]]) -> None:
    argo_ui = {
        key: fields for key, fields in locked.items() if key.lstrip('"').startswith("argo-ui@")
    }
    assert list(argo_ui) == ["argo-ui@1.0.0"], argo_ui
    assert argo_ui["argo-ui@1.0.0"]["integrity"] == ARGO_UI_INTEGRITY
