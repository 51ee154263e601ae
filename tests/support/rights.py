"""What an account may do, as `kubectl auth can-i --list` prints it and docs/gke.md's table of rights writes
it: {"<resource>[<names>]": {verbs}}, a resource named without its API group (`workflows`)."""

from __future__ import annotations

import re
from pathlib import Path

Rights = dict[str, frozenset[str]]
COLUMNS = re.compile(r"\s{2,}")
# A row of the rights table: | `account` | namespaces | rights |
TABLE_ROW = re.compile(
    r"^\| `(?P<account>[a-z0-9-]+/[a-z0-9-]+)` \| (?P<where>[^|]+) \| (?P<may>[^|]+) \|$"
)


def parse_can_i(listing: str) -> Rights:
    """The rows of `kubectl auth can-i --list` (Resources, Non-Resource URLs, Resource Names, Verbs)."""
    rights: dict[str, set[str]] = {}
    for line in listing.splitlines()[1:]:
        cells = COLUMNS.split(line.strip())
        if line.startswith(" "):  # a non-resource URL: no resource in the first column
            cells.insert(0, "")
        resource, urls, names, verbs = cells
        key = urls if urls != "[]" else resource.split(".", 1)[0] + (names if names != "[]" else "")
        rights.setdefault(key, set()).update(verbs.strip("[]").split())
    return {key: frozenset(verbs) for key, verbs in rights.items()}


def beyond(rights: Rights, baseline: Rights) -> Rights:
    """RIGHTS less what BASELINE (an account with no role) holds too."""
    left = {key: verbs - baseline.get(key, frozenset()) for key, verbs in rights.items()}
    return {key: verbs for key, verbs in left.items() if verbs}


def parse_cell(cell: str) -> Rights:
    """`workflows, pods: get list; secrets: get` → {"workflows": {get, list}, ...}; `none` → {}."""
    rights: dict[str, set[str]] = {}
    cell = cell.strip()
    if cell == "none":
        return {}
    for group in cell.split(";"):
        resources, verbs = group.split(":")
        for resource in resources.split(","):
            rights.setdefault(resource.strip().strip("`"), set()).update(verbs.split())
    return {key: frozenset(verbs) for key, verbs in rights.items()}


def documented(page: Path) -> dict[tuple[str, str], Rights]:
    """docs/gke.md's table of rights: {(namespace/account, namespace it holds them in): rights}."""
    table: dict[tuple[str, str], Rights] = {}
    for line in page.read_text().splitlines():
        row = TABLE_ROW.match(line.strip())
        if not row:
            continue
        for where in row["where"].split(","):
            table[(row["account"], where.strip().strip("`"))] = parse_cell(row["may"])
    return table
