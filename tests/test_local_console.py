"""workflows/local/console.py: progress read as Argo's executor reads it, shown on a terminal only."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.local.console import Console, read_progress


@pytest.mark.parametrize(
    ("text", "progress"),
    [("1/3\n2/3\n\n", "2/3"), ("3/3", "3/3"), ("4/3", None), ("a/3", None), ("", None)],
)
def test_progress_is_the_last_line_when_it_reads_n_of_m(
    tmp_path: Path, text: str, progress: str | None
) -> None:
    (tmp_path / "progress").write_text(text)
    assert read_progress(tmp_path / "progress") == progress
    assert read_progress(tmp_path / "none") is None and read_progress(None) is None


@pytest.mark.parametrize("live", [True, False])
def test_the_status_line_is_drawn_on_a_terminal_only_and_cleared_before_a_line(
    capsys: pytest.CaptureFixture[str], live: bool
) -> None:
    lines: list[str] = []
    console = Console(lines.append, live=live)
    console.progress({"train(0:0)": "120/480"})
    assert ("running: train(0:0) 25%" in capsys.readouterr().out) is live
    console.say("done     train(0:0)")
    assert capsys.readouterr().out == ("\r\x1b[2K" if live else "")
    assert len(lines) == 1 and lines[0].endswith("s  done     train(0:0)")
