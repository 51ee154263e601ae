"""Text from the store or an upload shown through Streamlit's Markdown elements as the text it is.

Streamlit renders Markdown in alerts, captions, toasts and metric values: store text there could put
an image every visitor's browser fetches, or a link, on the page. Such text goes out as a code span,
which Markdown shows verbatim (CommonMark 0.31, 6.1: no links, images, autolinks or emphasis inside),
or through st.text, which parses nothing.

A code span lives inside one paragraph, and the block structure is parsed first: a line end in the
text could close the paragraph (a blank line) or open a block (a heading, a quote), leaving the rest
as Markdown. So every character any parser ends a line at becomes a space (CommonMark's \\n and \\r,
spec 2.1, and the rest of str.splitlines' and JavaScript's line terminators), as a code span would
show a line end anyway.
"""

from __future__ import annotations

import re

BACKTICKS = re.compile(r"`+")
LINE_ENDS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def verbatim(text: str) -> str:
    """Markdown that shows `text` as it is, on one line: a code span fenced by more backticks than any
    run in it."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in BACKTICKS.findall(text)), default=0) + 1)
    flat = LINE_ENDS.sub(" ", text)
    padding = " " if flat[:1] in ("`", " ") or flat[-1:] in ("`", " ") else ""
    return f"{fence}{padding}{flat}{padding}{fence}"
