"""README.md and docs/: every relative link and anchor resolves, the README stays a few screens long, and its
two commands are the ones a newcomer and CI run, and its map of the repository names paths that exist and
every top-level folder; LICENSE is the standard text of the license declared."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support.docs import (
    DOCS,
    HEADING,
    README,
    anchors,
    documents,
    prose_lines,
    relative_links,
    section,
    slug,
)
from tests.support.project import ROOT

README_MAX_LINES = 250
# The sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the Apache License 2.0's own text
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(document: Path) -> None:
    broken = []
    for target in relative_links(document):
        name, _, anchor = target.partition("#")
        linked = (document.parent / name).resolve() if name else document
        if not linked.exists():
            broken.append(f"{target}: no file {name}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    assert len(documents()) > 5
    linked = {
        (README.parent / target.partition("#")[0]).resolve() for target in relative_links(README)
    }
    assert not {page for page in DOCS.rglob("*.md") if page.resolve() not in linked}


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda path: path.name)
def test_every_docs_page_opens_by_saying_what_it_covers(page: Path) -> None:
    """A page starts with its title, then a sentence or two of prose before its first section or table."""
    lines = [line for line in prose_lines(page.read_text()) if line.strip()]
    assert lines[0].startswith("# "), f"{page.name} does not start with its title"
    opening = lines[1] if len(lines) > 1 else ""
    straight = HEADING.match(opening) or re.match(r"[|>]|[-*] |\d+\. ", opening)
    assert not straight, f"{page.name} goes from its title straight to {opening!r}"


def test_anchors_are_githubs() -> None:
    assert slug("Where a run's files land") == "where-a-runs-files-land"
    assert slug("Submitting to Argo") == "submitting-to-argo"
    assert slug("`--rounds` and the CRD") == "--rounds-and-the-crd"


def test_the_license_file_is_the_declared_licenses_standard_text() -> None:
    """LICENSE is Apache-2.0's text unchanged, so tools that read a license by its text name it."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    license_file = ROOT / "LICENSE"
    assert license_file.is_file(), "no LICENSE at the project's root"
    assert hashlib.sha256(license_file.read_bytes()).hexdigest() == APACHE_2_0_SHA256


def repository_map() -> list[tuple[str, str]]:
    """README's "Where things are": each line's path (the first column) and what it says of it."""
    (block,) = re.findall(
        r"^```\n(.*?)^```$", section(README, "Where things are"), flags=re.M | re.S
    )
    mapped: list[tuple[str, str]] = []
    for line in block.splitlines():
        path, _, about = line.partition(" ")
        if path:
            mapped.append((path, about))
        elif mapped:  # a continuation line, indented
            mapped[-1] = (mapped[-1][0], f"{mapped[-1][1]} {about}")
    return mapped


def test_every_path_the_readme_maps_exists() -> None:
    """The first column, and each file it names in a folder's line (`spec.py` under workflows/local/)."""
    mapped = repository_map()
    assert len(mapped) > 10
    missing = [path for path, _ in mapped if not (ROOT / path).exists()]
    for folder, about in mapped:
        if folder.endswith("/"):
            named = re.findall(r"(?<![\w/.-])([\w-]+\.(?:py|yaml|toml|sh))\b", about)
            missing += [folder + name for name in named if not (ROOT / folder / name).exists()]
    assert missing == []


def test_the_readme_maps_every_top_level_folder_and_every_rule_module() -> None:
    """Each folder at a clone's root is on the map, and each module of workflows/local/ is named."""
    mapped = dict(repository_map())
    files = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    folders = {line.split("/", 1)[0] + "/" for line in files.stdout.splitlines() if "/" in line}
    # the hidden ones hold tools' settings (.streamlit/, ...); .ci/run is mapped by its path
    folders -= {name for name in folders if name.startswith(".")}
    unmapped = [name for name in sorted(folders) if not any(p.startswith(name) for p in mapped)]
    modules = sorted(
        p.name for p in (ROOT / "workflows/local").glob("*.py") if p.name != "__init__.py"
    )
    unnamed = [name for name in modules if name not in mapped["workflows/local/"]]
    assert (unmapped, unnamed) == ([], [])


def test_the_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_quick_start_commands_are_the_ones_run() -> None:
    """The README starts with `make run` and `make test`; .ci/run runs it and docs/tests.md's two, alone."""
    quick_start = section(README, "Quick start")
    commands = re.findall(r"^(make \w+)", quick_start, flags=re.M)
    assert commands[:2] == ["make run", "make test"]
    tests_page = (DOCS / "tests.md").read_text()
    assert "`make test-containers`" in tests_page and "`make test-cluster`" in tests_page
    ci = (ROOT / ".ci" / "run").read_text()
    made = ["make test", "make test-containers", "make test-cluster"]
    assert re.findall(r"^make .*$", ci, flags=re.M) == made
    targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M)
    assert {"run", "test", "test-containers", "test-cluster"} <= set(targets)
