"""The demo page: upload or draw a digit, see what the published averaged model says and why.

python -m ui.serve    (or `streamlit run ui/app.py`, without the bounds on uploads and drawings;
MODEL_URI picks the model, see ui/model_source.py)
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:  # `streamlit run ui/app.py` puts ui/ on the path, not the project
    sys.path.insert(0, ROOT)

import numpy as np
import pandas as pd
import streamlit as st

from steps.lib.confusion_plot import draw_confusion
from ui.drawing import MAX_PNG_BYTES, drawn_image
from ui.images.decode import EXTENSIONS, MB
from ui.model_source import LoadedModel, ModelKeeper, ModelUnavailable, model_uri, parse_model_uri
from ui.predict import LOW_CONFIDENCE, NoAnswer, classify
from ui.readings import SHOWN_SIDE, UNEXPECTED, Ledger, Upload, distinct, read
from ui.uploads import MAX_FILES
from ui.verbatim import verbatim

log = logging.getLogger("mnist-page")

st.set_page_config(page_title="Handwritten digits", page_icon="✍️")


@st.cache_resource(show_spinner=False)
def keeper_for(uri: str) -> ModelKeeper:
    """One keeper per MODEL_URI for the whole server: the model loads once, not per visitor."""
    return ModelKeeper(parse_model_uri(uri))


def warn(summary: str, detail: str | None) -> None:
    """A warning in the page's own words; `detail` may quote the store, so it is shown as plain text."""
    st.warning(summary)
    if detail:
        st.text(detail)


def show_how_to(uri: str, problem: str | None) -> None:
    st.info(
        f"No model is published at {verbatim(uri)} yet.\n\n"
        "Train and publish one on this machine, then reload this page:\n\n"
        "```bash\nmake pipeline    # or: python workflows/submit.py --local\n```\n\n"
        "Or point the page at a published model: `MODEL_URI=gs://BUCKET/models/mnist/LATEST`, "
        "a store's `models/mnist/LATEST`, or a `.h5` file."
    )
    if problem:
        warn("The model cannot be loaded:", problem)


def published_text(stamp: object) -> str | None:
    """'2026-11-29T18:48:58.897321+00:00' → '2026-11-29 18:48 UTC'; None for anything else (a date
    that is no ISO 8601 time, or one that is in none once moved to UTC)."""
    try:
        moment = dt.datetime.fromisoformat(stamp)
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError):
        return None


def setting_text(value: object) -> str:
    """A setting as the card shows it: a number as written, anything else verbatim."""
    if value is None:
        return "—"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return verbatim(str(value))


def show_card(loaded: LoadedModel) -> None:
    """Run id, test accuracy, the training settings and when it was published."""
    card, settings = loaded.card, loaded.card.get("settings") or {}
    accuracy = card.get("accuracy") or (loaded.metrics or {}).get("accuracy")
    st.subheader("The model")
    top = st.columns([3, 2])
    top[0].metric("Run", verbatim(str(card.get("run") or loaded.label)))
    top[1].metric("Test accuracy", f"{accuracy:.2%}" if isinstance(accuracy, float) else "—")
    knobs = st.columns(4)
    for column, name in zip(knobs, ("workers", "rounds", "epochs", "batch"), strict=True):
        column.metric(name.capitalize(), setting_text(settings.get(name)))
    published = published_text(card.get("published_at"))
    if published:
        st.caption(f"Trained and published {published}.")


def show_part(show: Callable[[LoadedModel], None], loaded: LoadedModel, name: str) -> None:
    """Show one part of what the page says about the model; what the store holds cannot stop the page."""
    try:
        show(loaded)
    except Exception:  # a file the checks let through in a shape the page did not expect
        log.exception("the model's %s cannot be shown", name)
        st.warning(f"The model's {name} cannot be shown.")


def show_report(loaded: LoadedModel) -> None:
    """The confusion matrix and per-class accuracy from the run's metrics.json."""
    metrics = loaded.metrics or {}
    with st.expander("Model report: where it goes wrong"):
        if loaded.confusion_png:
            st.image(loaded.confusion_png, caption="Confusion matrix on the test set")
        elif metrics.get("confusion_matrix"):
            st.image(
                draw_confusion(np.array(metrics["confusion_matrix"])), caption="Confusion matrix"
            )
        per_class = metrics.get("per_class_accuracy")
        if per_class:
            table = pd.DataFrame(
                {"accuracy": [float(value) for value in per_class.values()]},
                index=pd.Index(list(per_class), name="digit"),
            )
            st.bar_chart(table, y_label="accuracy on the test set", x_label="digit")
            worst = table["accuracy"].idxmin()
            st.caption(f"Weakest digit: {worst} ({table['accuracy'][worst]:.1%} right).")
        if not metrics:
            st.caption("This model came without a metrics.json.")


def ledger() -> Ledger:
    """This visitor's decoding: one image at a time, within a budget of CPU (ui/readings.py)."""
    return st.session_state.setdefault("decoding", Ledger())


def show_prediction(loaded: LoadedModel, data: bytes, limit: int | None = None) -> None:
    """Read `data` (once per content: ui/readings.py), show it beside what the model sees and what it
    says; a clear message for bad input, and never a traceback (that goes to the server's log)."""
    reading = read(data, ledger(), limit or st.get_option("server.maxUploadSize") * MB)
    if reading.refusal:
        st.error(reading.refusal)
        return
    try:
        prediction = classify(loaded.model, reading.pixels)
    except NoAnswer as error:
        st.error(str(error))
        return
    except Exception:  # a bug must not show a visitor the source; the log keeps it
        log.exception("an upload could not be classified")
        st.error(UNEXPECTED)
        return
    pictures, verdict = st.columns([2, 3])
    sent, seen = pictures.columns(2)
    sent.image(
        reading.shown,
        caption="Your picture",
        width=SHOWN_SIDE,
        output_format=reading.shown_format,
    )
    seen.image(reading.seen, caption="What the model sees (28x28)", output_format="PNG")
    digit, confidence = verdict.columns(2)
    digit.metric("Prediction", prediction.digit)
    confidence.metric("Confidence", f"{prediction.confidence:.1%}")
    if prediction.is_low_confidence:
        verdict.warning(
            f"Low confidence (under {LOW_CONFIDENCE:.0%}): this is a guess. "
            "Try a clearer image, one digit filling most of it."
        )
    probabilities = pd.DataFrame(
        {"probability": prediction.probabilities},
        index=pd.Index([str(digit) for digit in range(10)], name="digit"),
    )
    st.bar_chart(probabilities, x_label="digit", y_label="probability", height=200)


def show_uploads(loaded: LoadedModel, uploads: list[Upload]) -> None:
    """One result per uploaded file, in the order they were given, the same bytes once (in memory
    only, never on disk)."""
    files, repeated = distinct(uploads)
    for upload in files[:MAX_FILES]:
        if len(files) > 1:
            st.text(upload.name)  # plain text: a file name is not markdown
        show_prediction(loaded, upload.getvalue())
    if repeated:
        st.caption(f"{repeated} of the files repeat one above: each is shown once.")
    if len(files) > MAX_FILES:
        st.warning(f"Only the first {MAX_FILES} files are read; {len(files) - MAX_FILES} were not.")


st.title("Handwritten digit recognition")
st.write(
    "A CNN trained by several workers on separate shards of MNIST, their weights averaged "
    "(FedAvg). Upload photos of digits, take one with your camera, or draw one."
)
uri = model_uri()
try:
    status = keeper_for(uri).refresh()
except ModelUnavailable as error:  # MODEL_URI itself is unusable
    show_how_to(uri, str(error))
    st.stop()
loaded = status.model
if loaded is None:
    show_how_to(uri, status.problem)
    st.stop()
if status.problem:
    warn(
        f"Still serving {verbatim(loaded.label)}. The newest model cannot be used:", status.problem
    )
if st.session_state.get("serving") not in (None, loaded.version):
    st.toast(f"Now serving {verbatim(loaded.label)}.")
st.session_state["serving"] = loaded.version

show_part(show_card, loaded, "card")
upload_tab, camera_tab, draw_tab = st.tabs(["Upload images", "Take a photo", "Draw a digit"])
with upload_tab:
    uploads = st.file_uploader(
        "Images of one digit each (several at once: one result per file)",
        type=list(EXTENSIONS),
        accept_multiple_files=True,
    )
    show_uploads(loaded, uploads or [])
with camera_tab:
    st.caption("One digit, dark on light paper, filling a good part of the picture.")
    photo = st.camera_input("Take a photo of one digit")
    if photo is not None:
        show_prediction(loaded, photo.getvalue())
with draw_tab:
    st.caption("Draw one digit, large, with the mouse.")
    drawing = drawn_image()
    if drawing:
        show_prediction(loaded, drawing, MAX_PNG_BYTES)
show_part(show_report, loaded, "report")
