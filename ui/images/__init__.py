"""The page's readers of untrusted images, each bounded before Pillow does the work: decode (an upload or a
drawing → a small Pillow image), block_counts (the GIF sub-blocks and PNG chunks Pillow's readers walk one
by one), jpeg_layout (what a JPEG asks of its decoder, from its markers) and picture (the confusion picture
a published run carries, checked by publish and the page alike). Only Pillow: no Streamlit here."""
