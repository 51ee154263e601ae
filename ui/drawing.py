"""The page's drawing canvas (streamlit-drawable-canvas) and the PNG it sends once something is drawn.

Its value comes in the rerun message, bounded by ui.widget_states before Streamlit keeps it: a value
over those bounds arrives as REFUSED_DRAWING, and the visitor is asked to draw again.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import streamlit_drawable_canvas
from streamlit.components.v2.get_bidi_component_manager import get_bidi_component_manager
from streamlit_drawable_canvas import st_canvas

from ui.widget_states import MAX_DRAWING_BYTES, REFUSED, TOO_LARGE

CANVAS_SIDE = 280  # ten screen pixels per model pixel
STROKE = 22  # about MNIST's stroke width once the drawing is scaled to 20 px
UNREADABLE = "The drawing could not be read: clear the canvas and draw again."
MAX_PNG_BYTES = MAX_DRAWING_BYTES  # the PNG comes inside the drawing's value

# The component as streamlit_drawable_canvas/__init__.py declares it, with its style sheet and one rule
# more. Its toolbar (.dc-toolbar in frontend/build/index-style.css: "opacity:0; z-index:20; top:-1rem",
# over the canvas's z-index 10) lies unseen over the canvas's top 30 px until the pointer has hovered
# it for 0.1 s, then still 4 px over it ("top:-2.65rem" and its padding): a stroke pressed there fell
# on the toolbar and was lost. Here it always sits above the canvas, and only its buttons take the pointer.
CANVAS_COMPONENT = "streamlit-drawable-canvas.streamlit_drawable_canvas"
CANVAS_ASSETS = Path(streamlit_drawable_canvas.__file__).parent / "frontend" / "build"
TOOLBAR_OFF_THE_CANVAS = (
    ".dc-toolbar{top:-2.65rem;pointer-events:none}.dc-toolbar-card{pointer-events:auto}"
)
CANVAS_CSS = "\n".join(
    [
        *(path.read_text() for path in sorted(CANVAS_ASSETS.glob("index-*.css"))),
        TOOLBAR_OFF_THE_CANVAS,
    ]
)


def declare_canvas() -> None:
    """Register the canvas component with CANVAS_CSS in the running server, once, in place of the
    package's own style sheet (a component of that name is looked up when it is drawn)."""
    declared = get_bidi_component_manager().get(CANVAS_COMPONENT)
    if declared is not None and declared.css == CANVAS_CSS:
        return
    st.components.v2.component(
        CANVAS_COMPONENT,
        html='<div class="canvas-root"></div>',
        css=CANVAS_CSS,
        js="index-*.js",
        isolate_styles=True,
    )


def drawn_image() -> bytes | None:
    """The canvas as PNG bytes once something is drawn on it; None (and a warning) for a drawing
    refused as too large, or a value that is no drawing."""
    declare_canvas()
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
