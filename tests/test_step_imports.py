"""No module of steps/ or ui/ imports one of workflows/, directly or not (their images have no Hera)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.project import ROOT

FIRST_PARTY = ("steps", "ui", "workflows", "bench", "tests")


def module_file(module: str) -> Path | None:
    """The project file defining `module` (a package's __init__.py), or None for a third-party one."""
    if module.split(".")[0] not in FIRST_PARTY:
        return None
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function; `from a import b` also counts a.b."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}
    return modules


def reached_from(start: Path) -> dict[str, str]:
    """The first-party modules `start` imports, directly or not, each with the file that imports it."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        path = todo.pop()
        for module in sorted(imported(path)):
            found = module_file(module)
            if found is not None and module not in seen:
                seen[module] = path.relative_to(ROOT).as_posix()
                todo.append(found)
    return seen


def test_neither_the_steps_nor_the_page_import_workflows() -> None:
    files = sorted([*(ROOT / "steps").rglob("*.py"), *(ROOT / "ui").rglob("*.py")])
    assert len(files) > 20
    reaching = {
        path.relative_to(ROOT).as_posix(): sorted(
            f"{module} (imported by {by})"
            for module, by in reached_from(path).items()
            if module.startswith("workflows")
        )
        for path in files
    }
    assert {path: chain for path, chain in reaching.items() if chain} == {}


def test_the_steps_reach_only_the_pages_image_readers() -> None:
    """Of ui/, a step reaches only ui.images (Pillow only): the steps' images have no Streamlit. The walk
    finds the one it must: it is not blind."""
    reaching = {
        module
        for path in (ROOT / "steps").rglob("*.py")
        for module in reached_from(path)
        if module.split(".")[0] == "ui"
    }
    assert "ui.images.picture" in reaching
    assert {module for module in reaching if not module.startswith("ui.images")} <= {"ui"}
    images = [path for path in (ROOT / "ui" / "images").glob("*.py")]
    assert not [path for path in images if "streamlit" in " ".join(imported(path))]
