"""Copy bench/results.md into docs/results.md, between its two markers.

python -m bench.results_page          (after `make bench`; tests/test_bench.py checks the two agree)
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.report import RESULTS_MD

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results.md"
BEGIN = "<!-- bench/results.md: begin (python -m bench.results_page copies it here) -->"
END = "<!-- bench/results.md: end -->"


def embedded(page: str) -> str:
    """The text between the markers."""
    _, found, rest = page.partition(BEGIN)
    inside, closed, _ = rest.partition(END)
    if not found or not closed:
        raise ValueError(f"{PAGE.name} lacks the bench/{RESULTS_MD} markers")
    return inside.strip("\n") + "\n"


def embed(page: str, results: str) -> str:
    """The page with `results` between its markers, everything else as it was."""
    before, _, rest = page.partition(BEGIN)
    _, _, after = rest.partition(END)
    embedded(page)  # both markers are there
    return f"{before}{BEGIN}\n{results.strip()}\n{END}{after}"


def main() -> int:
    updated = embed(PAGE.read_text(), (ROOT / "bench" / RESULTS_MD).read_text())
    temporary = PAGE.with_name(f".{PAGE.name}.tmp")
    temporary.write_text(updated)
    temporary.replace(PAGE)
    print(f"{PAGE.relative_to(ROOT)}: the report now holds bench/{RESULTS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
