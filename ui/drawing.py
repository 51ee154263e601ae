"""The page's drawing canvas (streamlit-drawable-canvas) and the PNG it sends once something is drawn.

Its value comes in the rerun message, bounded by ui.widget_states before Streamlit keeps it: a value
over those bounds arrives as REFUSED_DRAWING, and the visitor is asked to draw again.
"""

from __future__ import annotations

import streamlit as st
from streamlit_drawable_canvas import st_canvas

from ui.widget_states import MAX_DRAWING_BYTES, REFUSED, TOO_LARGE

CANVAS_SIDE = 280  # ten screen pixels per model pixel
STROKE = 22  # about MNIST's stroke width once the drawing is scaled to 20 px
UNREADABLE = "The drawing could not be read: clear the canvas and draw again."
MAX_PNG_BYTES = MAX_DRAWING_BYTES  # the PNG comes inside the drawing's value


def drawn_image() -> bytes | None:
    """The canvas as PNG bytes once something is drawn on it; None (and a warning) for a drawing
    refused as too large, or a value that is no drawing."""
    result = st_canvas(
        stroke_width=STROKE,
        stroke_color="#FFFFFF",
        background_color="#000000",
        width=CANVAS_SIDE,
        height=CANVAS_SIDE,
        drawing_mode="freedraw",
        return_image_data=True,
        key="canvas",
    )
    drawing = result.json_data if isinstance(result.json_data, dict) else {}
    if drawing.get(REFUSED):
        st.warning(TOO_LARGE)
        return None
    if not drawing.get("objects"):
        return None
    try:
        return result.image_bytes  # base64 from a data: URL the browser sent
    except (ValueError, TypeError, AttributeError):
        st.warning(UNREADABLE)
        return None
