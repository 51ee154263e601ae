"""The served model beside another run of its store: the card's "Compare with…" picker lists the
store's runs (steps.lib.run_index, each file read up to its bound and checked), and the page shows the
chosen run's test accuracy, the settings in which the two differ, their training curves and confusion
matrices side by side. Read-only: which run is served stays the operator's command (docs/steps.md,
"Which run is served")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from steps.lib.confusion_plot import draw_confusion
from steps.lib.run_index import RunRecord, read_run, run_names
from steps.lib.storage import ArtifactStore, open_store
from ui import training
from ui.model_source import LoadedModel
from ui.verbatim import verbatim

REFRESH_SECONDS = (
    30  # how long the list of runs, and a run read, is kept before the store is read again
)
PICKER = "Compare with…"


@st.cache_resource(show_spinner=False)
def store_at(uri: str) -> ArtifactStore:
    """One client per store for the whole server (a GCS client is not free)."""
    return open_store(uri)


@st.cache_data(ttl=REFRESH_SECONDS, show_spinner=False)
def runs_in(uri: str) -> list[str]:
    """The names of the store's runs: two listings, no file read."""
    return run_names(store_at(uri))


@st.cache_data(ttl=REFRESH_SECONDS, show_spinner=False)
def run_in(uri: str, run: str) -> RunRecord | None:
    return read_run(store_at(uri), run)


def differences(served: dict, other: dict) -> pd.DataFrame:
    """The settings both runs state and give different values, in the served card's order (a run
    that was not published states only what its files show)."""
    rows = [
        (name, str(value), str(other[name]))
        for name, value in served.items()
        if name in other and other[name] != value
    ]
    return pd.DataFrame(rows, columns=["setting", "served", "other"]).set_index("setting")


def accuracy_of(accuracy: object) -> str:
    return f"{accuracy:.2%}" if isinstance(accuracy, float) else "—"


def show(loaded: LoadedModel, store: str | None) -> None:
    """The picker under the card (for a model served from a store) and, once a run is picked, the
    two runs side by side."""
    if store is None:
        return
    others = [run for run in runs_in(store) if run != loaded.version]
    if not others:
        return
    with st.sidebar:
        chosen = st.selectbox(PICKER, others, index=None, placeholder="another run of the store")
        if chosen is not None:
            st.caption("Side by side with the served model at the foot of the page.")
    if chosen is None:
        return
    other = run_in(store, chosen)
    if other is None:
        st.warning(f"The store holds no run {verbatim(chosen)} any more.")
        return
    show_beside(loaded, other)


def show_beside(loaded: LoadedModel, other: RunRecord) -> None:
    served_accuracy = loaded.card.get("accuracy") or (loaded.metrics or {}).get("accuracy")
    st.subheader(f"Served beside {verbatim(other.run)}")
    served_column, other_column = st.columns(2)
    served_column.metric(f"{loaded.label} (served)", accuracy_of(served_accuracy))
    delta = None
    if isinstance(other.accuracy, float) and isinstance(served_accuracy, float):
        delta = f"{100 * (other.accuracy - served_accuracy):+.2f} points"
    other_column.metric(other.run, accuracy_of(other.accuracy), delta=delta)
    if other.problem:
        st.caption(f"Some of its files fail the page's checks: {verbatim(other.problem)}")
    elif not other.published:
        st.caption(f"{verbatim(other.run)} was not published: {other.phase}.")
    changed = differences(loaded.card.get("settings") or {}, other.settings)
    if len(changed):
        st.caption("The settings in which they differ:")
        st.dataframe(changed)
    for metric in ("accuracy", "loss"):
        left, right = st.columns(2)
        for column, history in ((left, loaded.history), (right, other.history)):
            if history and history.get("rounds"):
                column.altair_chart(training.curve_chart(history, metric), width="stretch")
    left, right = st.columns(2)
    for column, metrics, name in (
        (left, loaded.metrics, loaded.label),
        (right, other.metrics, other.run),
    ):
        matrix = (metrics or {}).get("confusion_matrix")
        if matrix:
            caption = f"Confusion matrix of {name}"
            column.image(draw_confusion(np.array(matrix)), caption=caption, width="stretch")
