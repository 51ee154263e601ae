"""The demo page: upload a digit, see what the published averaged model predicts."""

from __future__ import annotations

import io
import os

import numpy as np
import streamlit as st
from PIL import Image

from steps.registry import MODEL_FILE, latest_run, run_prefix
from steps.storage import open_store

STORE = os.environ.get("ARTIFACTS", ".runs")

st.set_page_config(page_title="MNIST on Argo", page_icon="✍️")
st.title("Handwritten digit recognition")


@st.cache_resource
def load(run: str):
    import tempfile
    from pathlib import Path

    from steps.model import load_model

    target = Path(tempfile.mkdtemp()) / MODEL_FILE
    open_store(STORE).download_file(f"{run_prefix(run)}/{MODEL_FILE}", target)
    return load_model(target)


run = latest_run(open_store(STORE))
if run is None:
    st.info("No model is published yet. Train one with `python workflows/submit.py --local`.")
    st.stop()
model = load(run)
st.caption(f"Model: run {run}")
upload = st.file_uploader("A digit image", type=["png", "jpg", "jpeg"])
if upload is not None:
    image = Image.open(io.BytesIO(upload.getvalue())).convert("L").resize((28, 28))
    pixels = np.asarray(image, dtype="float32") / 255.0
    probabilities = model.predict(pixels[np.newaxis, ..., np.newaxis], verbose=0)[0]
    st.image(image, width=112)
    st.metric("Prediction", int(probabilities.argmax()), f"{probabilities.max():.1%} confident")
