"""The demo page and its tools: ui.app is the Streamlit page (served by ui.serve, its uploads bounded by
ui.uploads, store text shown as text by ui.verbatim), ui.predict its command-line twin (the sample
images are written by tools/make_samples.py). An untrusted image is decoded within bounds (ui.images), made an MNIST digit
(preprocess), and classified in numpy by the published model (model_source)."""
