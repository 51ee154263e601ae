"""Store text as Markdown that shows it verbatim: one code span, whatever the text holds, judged by a
CommonMark parser (markdown-it-py; Streamlit's frontend parses with micromark: tests/test_ui_browser.py)."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from ui.verbatim import verbatim

PARSER = MarkdownIt("commonmark")
HOSTILE = "![beacon](http://127.0.0.1:9/b.png) [sign in again](https://evil.example/login)"
# Every character some parser ends a line at: CommonMark's \n and \r (spec 0.31, 2.1), and the rest
# of Python's str.splitlines and of JavaScript's line terminators.
LINE_ENDS = ["\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
BLOCK_STARTS = [
    "",
    "# ",
    "> ",
    "- ",
    "1. ",
    "    ",
    "```\n",
    "<div>",
    "---",
    "| a | b |\n|---|---|\n",
]


def one_code_span(markdown: str) -> str:
    """The text of the one code span `markdown` renders to; fails if it renders anything else."""
    rendered = PARSER.render(markdown).strip()
    assert rendered.startswith("<p><code>") and rendered.endswith("</code></p>"), rendered
    inner = rendered.removeprefix("<p><code>").removesuffix("</code></p>")
    assert "<" not in inner, rendered
    return html.unescape(inner)


@pytest.mark.parametrize("end", LINE_ENDS, ids=[repr(end) for end in LINE_ENDS])
@pytest.mark.parametrize("start", BLOCK_STARTS, ids=[repr(start) for start in BLOCK_STARTS])
def test_no_line_end_or_block_ends_the_code_span(end: str, start: str) -> None:
    text = f"note{end}{end}{start}{HOSTILE}{end}`x`{end}<img src=x>"
    shown = one_code_span(verbatim(text))
    assert HOSTILE in shown and "<img src=x>" in shown


@pytest.mark.parametrize(
    "text", ["``", "a ` b", " lead", "trail ", "`", "```` fence", "\t", "x\x00y", "$x$ :red[y]"]
)
def test_backticks_spaces_and_controls_stay_inside(text: str) -> None:
    shown = one_code_span(verbatim(text))
    assert shown.strip() == text.replace("\x00", "\ufffd").strip()


@pytest.mark.parametrize(
    ("text", "markdown"),
    [
        ("ui-test-1", "`ui-test-1`"),
        ("a `b` c", "``a `b` c``"),
        ("``x", "``` ``x ```"),  # padded: a fence must not touch a backtick of the text
        ("two\nlines", "`two lines`"),
        ("two\r\rlines", "`two  lines`"),
        ("", ""),
    ],
)
def test_verbatim_fences_text_with_more_backticks_than_it_holds(text: str, markdown: str) -> None:
    assert verbatim(text) == markdown
