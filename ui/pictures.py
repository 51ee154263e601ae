"""The pictures a result shows: the visitor's own, as a browser shows it, beside the 28x28 image the
model sees, in one picture so the pair stays one narrow block on a phone's screen."""

from __future__ import annotations

import numpy as np
from PIL import Image

from ui.preprocess import to_gray

CAPTION = "Your picture · what the model sees (28x28)"  # the pair's, on the page
SIDE = 88  # screen pixels of each of the pair
GAP = 8
GROUND = (240, 242, 246)  # behind a picture that is not square: the page's own grey


def as_shown(image: Image.Image, side: int = SIDE) -> Image.Image:
    """The decoded picture as a browser shows it: 8-bit colour or gray, within `side` square."""
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        if image.mode in ("1", "P", "CMYK", "YCbCr"):
            image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        else:  # 16-bit and float modes
            image = Image.fromarray((to_gray(image) * 255).astype(np.uint8))
    shown = image.copy()
    shown.thumbnail((side, side))
    return shown


def side_by_side(image: Image.Image, pixels: np.ndarray, side: int = SIDE) -> Image.Image:
    """`image` fitted in a square of `side` beside the model's view of it (`pixels`, 28x28 in
    [0, 1]), enlarged without smoothing: shown at its own width, st.image passes it on unresized."""
    pair = Image.new("RGB", (2 * side + GAP, side), GROUND)
    yours = as_shown(image, side).convert("RGBA")
    pair.paste(yours, ((side - yours.width) // 2, (side - yours.height) // 2), yours)
    seen = Image.fromarray((pixels * 255).astype(np.uint8)).resize(
        (side, side), Image.Resampling.NEAREST
    )
    pair.paste(seen.convert("RGB"), (side + GAP, 0))
    return pair
