"""workflows/local/console.py: progress read as Argo's executor reads it, shown on a terminal only."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.local.console import Console, read_progress


@pytest.mark.parametrize(
    ("text", "progress"),
    [
        ("1/3\n", "1/3"),
        ("1/3\n2/3\n\n", "2/3"),
        ("3/3", "3/3"),
        ("4/3", None),
        ("a/3", None),
        ("", None),
    ],
)
def test_progress_is_the_last_line_when_it_reads_n_of_m(
    tmp_path: Path, text: str, progress: str | None
) -> None:
    (tmp_path / "progress").write_text(text)
    assert read_progress(tmp_path / "progress") == progress
    assert read_progress(tmp_path / "none") is None and read_progress(None) is None


def test_without_a_terminal_progress_prints_nothing_and_lines_are_timed() -> None:
    lines: list[str] = []
    console = Console(lines.append, live=False)
    console.progress({"train(0:0)": "120/480"})
    console.say("done     train(0:0)")
    assert len(lines) == 1 and lines[0].endswith("s  done     train(0:0)")


def test_on_a_terminal_the_status_line_is_drawn_then_cleared_before_a_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines: list[str] = []
    console = Console(lines.append, live=True)
    console.progress({"train(0:0)": "120/480"})
    assert "running: train(0:0) 25%" in capsys.readouterr().out
    console.say("done     train(0:0)")
    assert capsys.readouterr().out == "\r\x1b[2K" and len(lines) == 1
