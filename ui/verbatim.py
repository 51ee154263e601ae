"""Text from the store or an upload shown through Streamlit's Markdown elements as the text it is.

Streamlit renders Markdown in alerts, captions, toasts and metric values: store text there could put
an image every visitor's browser fetches, or a link, on the page. Such text goes out as a code span,
which Markdown shows verbatim (CommonMark 0.31, 6.1: no links, images, autolinks or emphasis inside),
or through st.text, which parses nothing.
"""

from __future__ import annotations

import re

BACKTICKS = re.compile(r"`+")


def verbatim(text: str) -> str:
    """Markdown that shows `text` as it is: a code span fenced by more backticks than any run in it."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in BACKTICKS.findall(text)), default=0) + 1)
    flat = " ".join(text.split("\n"))  # a code span shows a line break as a space anyway
    padding = " " if flat[:1] in ("`", " ") or flat[-1:] in ("`", " ") else ""
    return f"{fence}{padding}{flat}{padding}{fence}"
