"""Copy bench/results.md into the README's Results section, between its two markers.

python -m bench.readme          (after `make bench`; tests/test_bench.py checks the two agree)
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.report import RESULTS_MD

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- bench/results.md: begin (python -m bench.readme copies it here) -->"
END = "<!-- bench/results.md: end -->"


def embedded(readme: str) -> str:
    """The text between the markers."""
    _, found, rest = readme.partition(BEGIN)
    inside, closed, _ = rest.partition(END)
    if not found or not closed:
        raise ValueError("README.md lacks the bench/results.md markers")
    return inside.strip("\n") + "\n"


def embed(readme: str, results: str) -> str:
    before, _, rest = readme.partition(BEGIN)
    _, _, after = rest.partition(END)
    embedded(readme)  # both markers are there
    return f"{before}{BEGIN}\n{results.strip()}\n{END}{after}"


def main() -> int:
    readme = ROOT / "README.md"
    updated = embed(readme.read_text(), (ROOT / "bench" / RESULTS_MD).read_text())
    temporary = readme.with_name(".README.md.tmp")
    temporary.write_text(updated)
    temporary.replace(readme)
    print(f"{readme.name}: Results now hold bench/{RESULTS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
