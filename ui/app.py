"""The demo page: upload or draw a digit, see what the published averaged model says and why.

python -m ui.serve    (or `streamlit run ui/app.py`, without the bounds on uploads and drawings;
MODEL_URI picks the model, see ui/model_source.py)
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:  # `streamlit run ui/app.py` puts ui/ on the path, not the project
    sys.path.insert(0, ROOT)

import numpy as np
import pandas as pd
import streamlit as st

from steps.lib.confusion_plot import draw_confusion
from steps.lib.published import differing
from ui import compare, report, training
from ui.drawing import MAX_PNG_BYTES, drawn_image
from ui.guess import guess_text
from ui.images.decode import EXTENSIONS, MB
from ui.model_source import (
    LOADING,
    UNREACHABLE,
    LoadedModel,
    ModelUnavailable,
    Status,
    keeper_for,
    model_uri,
)
from ui.pictures import CAPTION
from ui.predict import NoAnswer, classify
from ui.readings import UNEXPECTED, Ledger, Upload, distinct, percent, read
from ui.uploads import MAX_FILES
from ui.verbatim import verbatim

PROBABILITIES_SIZE = (240, 130)  # a result's chart of the ten probabilities, in screen pixels
MISTAKES_SHOWN = 3
MODEL_PARTS_KEPT = 12  # the card, curves and report of the last four models served

log = logging.getLogger("mnist-page")

# The model card is in the sidebar: beside the page on a wide screen, folded behind its button on a
# phone's ("auto": Streamlit collapses the sidebar on narrow screens), so the upload comes first.
st.set_page_config(page_title="Handwritten digits", page_icon="✍️", initial_sidebar_state="auto")


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


def show_no_model_yet(status: Status) -> None:
    """No model in memory: the first is still loading, or the store did not answer."""
    if status.problem == LOADING:
        st.info(f"No model yet: {LOADING}. Reload this page in a moment.")
    else:
        warn(f"No model yet: {UNREACHABLE}. Reload this page in a moment.", status.problem)


def published_text(stamp: object) -> str | None:
    """'2026-11-29T18:48:58.897321+00:00' → '2026-11-29 18:48 UTC'; None for anything else (a date
    that is no ISO 8601 time, or one that is in none once moved to UTC)."""
    try:
        moment = dt.datetime.fromisoformat(stamp)  # type: ignore[arg-type]  # not a str: TypeError
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError):
        return None


def source_shown(source: object) -> str:
    """A card's --source as visitors see it: a URL, a gs:// URI or a file's sha256 as recorded; a path
    (in cards published before sources were recorded by content) never: the server's disk is its own."""
    text = str(source)
    return text if text.startswith(("http://", "https://", "gs://", "sha256:")) else "a local file"


def setting_text(value: object) -> str:
    """A setting as the card shows it: a number as written, anything else verbatim."""
    if value is None:
        return "—"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return verbatim(str(value))


def run_name(loaded: LoadedModel) -> str:
    """The model's run id (or file name) as the page shows store text: a code span."""
    return verbatim(str(loaded.card.get("run") or loaded.label))


def accuracy_of(loaded: LoadedModel) -> float | None:
    """The model's test accuracy, when its card or metrics say it."""
    accuracy = loaded.card.get("accuracy") or (loaded.metrics or {}).get("accuracy")
    return accuracy if isinstance(accuracy, float) else None


def accuracy_text(loaded: LoadedModel) -> str | None:
    """The model's test accuracy as a percentage, when its card or metrics say it."""
    accuracy = accuracy_of(loaded)
    return f"{accuracy:.2%}" if accuracy is not None else None


def show_card(loaded: LoadedModel) -> None:
    """Run id, test accuracy, the training settings and when it was published."""
    card, settings = loaded.card, loaded.card.get("settings") or {}
    st.subheader("The model")
    st.metric("Run", run_name(loaded))
    st.metric("Test accuracy", accuracy_text(loaded) or "—")
    with st.container(horizontal=True):  # as many a row as the sidebar holds
        for name in ("workers", "rounds", "epochs", "batch"):
            st.metric(name.capitalize(), setting_text(settings.get(name)), width="content")
    changed = differing(settings)
    if changed:
        changed |= {"source": source_shown(changed["source"])} if "source" in changed else {}
        flags = " ".join(verbatim(f"--{name} {value}") for name, value in changed.items())
        st.caption(f"Not the defaults: {flags}")
    published = published_text(card.get("published_at"))
    if published:
        st.caption(f"Trained and published {published}.")


def show_training(loaded: LoadedModel) -> None:
    """Under the card: the run's training curves from its history.json (none for a run without)."""
    if loaded.history_problem:
        log.warning("the training history of %s: %s", loaded.label, loaded.history_problem)
        st.caption("The training history cannot be shown: its file fails the page's checks.")
    history = loaded.history or {}
    if not history.get("rounds"):
        return
    st.markdown("**Training, round by round**")
    for metric in ("accuracy", "loss"):
        st.altair_chart(training.curve_chart(history, metric), width="stretch")
    st.caption(training.KEY)
    st.caption(training.rounds_line(history))


def serving_line(loaded: LoadedModel) -> str:
    """One line in the page itself naming the model, whose card may be folded away (a phone)."""
    accuracy = accuracy_text(loaded)
    scored = f", {accuracy} on the test set" if accuracy else ""
    return f"Serving {run_name(loaded)}{scored}: its card is in the sidebar."


@st.cache_resource(show_spinner=False, max_entries=MODEL_PARTS_KEPT)
def drawn_once(
    name: str, uri: str, version: str, _show: Callable[[LoadedModel], None], _loaded: LoadedModel
) -> None:
    """Draw one part for one model, once for the whole server: later runs, every visitor's, replay
    the elements it made (streamlit/runtime/caching/cached_message_replay.py,
    replay_cached_messages) instead of building its charts and pictures again."""
    _show(_loaded)


def show_part(show: Callable[[LoadedModel], None], loaded: LoadedModel, name: str) -> None:
    """Show one part of what the page says about the model, built once per model (drawn_once); what
    the store holds cannot stop the page."""
    try:
        drawn_once(name, uri, loaded.version, show, loaded)
    except Exception:  # a file the checks let through in a shape the page did not expect
        log.exception("the model's %s cannot be shown", name)
        st.warning(f"The model's {name} cannot be shown.")


def show_report(loaded: LoadedModel) -> None:
    """Where the model goes wrong, open: the confusion matrix with its errors coloured, the errors of
    each digit and the commonest mistakes, from the run's metrics.json."""
    metrics = loaded.metrics or {}
    st.subheader("Where the model goes wrong")
    if not metrics:
        st.caption("This model came without a metrics.json.")
        return
    matrix = metrics.get("confusion_matrix")
    picture = draw_confusion(np.array(matrix)) if matrix else loaded.confusion_png
    drawn, counted = st.columns([5, 4])
    if picture is not None:
        drawn.image(picture, caption="Confusion matrix on the test set", width="stretch")
    with counted:
        if matrix:
            show_errors(np.array(matrix))
        elif metrics.get("per_class_accuracy"):
            show_accuracies(metrics["per_class_accuracy"])


def show_errors(matrix: np.ndarray) -> None:
    """How many test digits of each digit were misread, and the commonest mistakes."""
    errors = report.errors_per_digit(matrix)
    st.altair_chart(
        training.bar_chart(errors[["misread"]], "test digits misread", 260), width="stretch"
    )
    worst = str(errors["share"].idxmax())  # the index is the digits as text
    st.caption(
        f"Weakest digit: {worst} ({1 - errors['share'][worst]:.1%} right, "
        f"{errors['misread'][worst]} of {errors['of'][worst]} misread)."
    )
    mistakes = report.commonest_mistakes(matrix, MISTAKES_SHOWN)
    if mistakes:
        named = ", ".join(f"{true} read as {read} ({count})" for true, read, count in mistakes)
        st.caption(f"Commonest mistakes: {named}.")


def show_accuracies(per_class: dict) -> None:
    """Without a confusion matrix: each digit's share misread, from its accuracy."""
    table = pd.DataFrame(
        {"misread (%)": [100 * (1 - float(value)) for value in per_class.values()]},
        index=pd.Index(list(per_class), name="digit"),
    )
    st.altair_chart(training.bar_chart(table, "test digits misread (%)", 260), width="stretch")


def ledger() -> Ledger:
    """This visitor's decoding: one image at a time, within a budget of CPU (ui/readings.py)."""
    return st.session_state.setdefault("decoding", Ledger())


def show_prediction(loaded: LoadedModel, data: bytes, limit: int | None = None) -> None:
    """Read `data` (once per content: ui/readings.py), show it beside what the model sees and what it
    says; a clear message for bad input, and never a traceback (that goes to the server's log)."""
    reading = read(data, ledger(), limit or st.get_option("server.maxUploadSize") * MB)
    if reading.refusal or reading.pixels is None or reading.pair is None:
        st.error(reading.refusal or UNEXPECTED)  # a Reading without a refusal holds both
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
    probabilities = pd.DataFrame(
        {"probability": prediction.probabilities},
        index=pd.Index([str(digit) for digit in range(10)], name="digit"),
    )
    width, height = PROBABILITIES_SIZE
    # One row where it fits, wrapping on a phone (the chart under the rest): columns would stack
    # every part under the last.
    with st.container(horizontal=True, vertical_alignment="top"):
        st.image(reading.pair, caption=CAPTION, width=reading.pair_width, output_format="PNG")
        st.metric(
            "Prediction",
            prediction.digit,
            delta=f"{percent(prediction.confidence)} confident",
            delta_color="off",
            delta_arrow="off",
            width="content",
        )
        st.altair_chart(training.bar_chart(probabilities, "", height, width), width="content")
    if prediction.is_low_confidence:
        settings = loaded.card.get("settings") or {}
        st.warning(guess_text(accuracy_of(loaded), settings, loaded.metrics or {}))


def show_uploads(loaded: LoadedModel, uploads: Sequence[Upload]) -> None:
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
    status = keeper_for(uri).serving()  # what is in memory; a new model is looked for elsewhere
except ModelUnavailable as error:  # MODEL_URI itself is unusable
    show_how_to(uri, str(error))
    st.stop()
loaded = status.model
if loaded is None and (status.unreachable or status.problem == LOADING):
    show_no_model_yet(status)
    st.stop()
if loaded is None:
    show_how_to(uri, status.problem)
    st.stop()
if status.unreachable:
    warn(
        f"Still serving {verbatim(loaded.label)}: {UNREACHABLE}, a newer model may be there.",
        status.problem,
    )
elif status.problem:
    warn(
        f"Still serving {verbatim(loaded.label)}. The newest model cannot be used:", status.problem
    )
if st.session_state.get("serving") not in (None, loaded.version):
    st.toast(f"Now serving {verbatim(loaded.label)}.")
st.session_state["serving"] = loaded.version

with st.sidebar:
    show_part(show_card, loaded, "card")
    show_part(show_training, loaded, "training history")
st.caption(serving_line(loaded))
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
try:  # a picker, so never drawn once for every visitor (drawn_once replays elements, not widgets)
    compare.show(loaded, keeper_for(uri).source.store)
except Exception:  # a run the checks let through in a shape the page did not expect
    log.exception("the comparison cannot be shown")
    st.warning("The comparison cannot be shown.")
