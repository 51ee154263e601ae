"""The project's documents as the tests read them: README.md and the pages under docs/, their sections, their
headings' anchors and their relative links."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support.project import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
ARGO = DOCS / "argo.md"  # the submit tests run its commands and read its metrics
GKE = DOCS / "gke.md"  # the infra tests run its commands
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]]|\][^(])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def documents() -> list[Path]:
    """README.md and every page under docs/."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `#` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file (a repeated heading gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match[2])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    """The targets of a file's links and images that point inside the project (no scheme)."""
    prose = "\n".join(prose_lines(path.read_text()))  # a link's text may wrap onto the next line
    return [target for target in LINK.findall(prose) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def section(path: Path, heading: str) -> str:
    """The text under a `## heading` of a markdown file, up to the next heading of that level."""
    text = path.read_text()
    marker = f"\n## {heading}\n"
    if marker not in text:
        raise LookupError(f"{path.relative_to(ROOT)} has no section '## {heading}'")
    return text.split(marker, 1)[1].split("\n## ", 1)[0]


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block of a markdown text, continuation lines joined, blank lines left out."""
    return [
        [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    ]


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Each ``` block of a markdown text: its language (empty for none) and its text."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S)


def expand(word: str, variables: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` in a word replaced by the variables known, others left as written."""
    return re.sub(r"\$\{?(\w+)\}?", lambda match: variables.get(match[1], match[0]), word)


def commands(text: str, variables: dict[str, str]) -> list[list[str]]:
    """The words of each command of a markdown text's bash blocks, `$NAME`s expanded by VARIABLES, which
    each `export` updates instead."""
    found = []
    for line in (line for block in bash_blocks(text) for line in block):
        words = [expand(word, variables) for word in shlex.split(line, comments=True)]
        if words[:1] == ["export"]:
            variables.update(word.split("=", 1) for word in words[1:])
        else:
            found.append(words)
    return found
