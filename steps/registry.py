"""Where published models live in a store: models/mnist/<run>/…, and the pointer models/mnist/LATEST."""

from __future__ import annotations

import re

from steps.storage import ArtifactStore

PUBLISHED = "models/mnist"
LATEST_KEY = f"{PUBLISHED}/LATEST"
MODEL_FILE = "model.h5"
METRICS_FILE = "metrics.json"
RUN_FILE = "run.json"
RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def run_prefix(run: str) -> str:
    if not RUN_ID.match(run):
        raise ValueError(f"not a run id: {run!r}")
    return f"{PUBLISHED}/{run}"


def latest_run(store: ArtifactStore) -> str | None:
    """The run LATEST names, or None when nothing has been published."""
    text = store.read_text(LATEST_KEY)
    return text.strip() if text and text.strip() else None
