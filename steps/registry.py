"""Where published models live in a store: models/mnist/<run>/…, and the pointer models/mnist/LATEST."""

from __future__ import annotations

import json
import re

from steps.cli import StepError
from steps.storage import ArtifactStore

PUBLISHED = "models/mnist"
LATEST_KEY = f"{PUBLISHED}/LATEST"
MODEL_FILE = "model.h5"
METRICS_FILE = "metrics.json"
RUN_FILE = "run.json"
MAX_CARD_BYTES = 1 << 20
# A run id is an Argo workflow name: a DNS-1123 subdomain of at most 63 characters
# (workflow/validate/validate.go: maxCharsInObjectName)
RUN_ID = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def run_prefix(run: str) -> str:
    if not RUN_ID.match(run):
        raise ValueError(f"not a run id: {run!r}")
    return f"{PUBLISHED}/{run}"


def latest_run(store: ArtifactStore) -> str | None:
    """The run LATEST names, or None when nothing has been published."""
    text = store.read_text(LATEST_KEY)
    return text.strip() if text and text.strip() else None


def published_at(store: ArtifactStore, run: str) -> str:
    """When `run` was published (ISO 8601 from its run.json), or '' if unknown or unreadable."""
    try:
        text = store.read_text(f"{run_prefix(run)}/{RUN_FILE}")
        card = json.loads(text or "{}") if len(text or "") <= MAX_CARD_BYTES else None
    except (ValueError, RecursionError, StepError):  # not a run id, not JSON, not text
        return ""
    stamp = card.get("published_at") if isinstance(card, dict) else None
    return stamp if isinstance(stamp, str) else ""


def move_latest(store: ArtifactStore, run: str, attempts: int = 10) -> str:
    """Point LATEST at `run` unless a run published later already holds it; return what LATEST names.

    A compare-and-swap on the pointer's generation: of two runs publishing at once, the one that finished
    later wins, and neither can overwrite the other's pointer unseen.
    """
    ours = published_at(store, run)
    for _ in range(attempts):
        current, generation = store.read_versioned(LATEST_KEY)
        current = (current or "").strip()
        if current and current != run and published_at(store, current) > ours:
            return current
        if store.write_if_generation(LATEST_KEY, run, generation):
            return run
    raise RuntimeError(f"{LATEST_KEY} changed {attempts} times while {run} tried to move it")
