"""Where the page's model comes from: MODEL_URI resolved to a version, fetched, and kept while it works.

MODEL_URI is one of
- a store's pointer: `<store>/models/mnist/LATEST`, the store being a folder or `gs://bucket[/prefix]`
  (default: the local store's pointer, `$ARTIFACTS/models/mnist/LATEST`, ARTIFACTS defaulting to .runs);
- a store itself (a folder, or gs://bucket[/prefix]): its LATEST;
- a model file (`.h5`) on this machine; metrics.json, run.json and confusion.png beside it are used if there.

Weights are only ever loaded into the project's own architecture (steps.model.load_model).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from steps.cli import StepError
from steps.registry import (
    LATEST_KEY,
    METRICS_FILE,
    MODEL_FILE,
    RUN_FILE,
    latest_run,
    run_prefix,
)
from steps.storage import ArtifactStore, open_store
from workflows.settings import DEFAULT_STORE

CONFUSION_FILE = "confusion.png"


class ModelUnavailable(Exception):
    """The model named by MODEL_URI (or its newest version) cannot be loaded; str() says why."""


@dataclass(frozen=True)
class ModelSource:
    """A parsed MODEL_URI: a store whose LATEST names the run, or one model file."""

    uri: str
    store: str | None = None  # a folder or gs:// URI whose models/mnist/LATEST is followed
    file: Path | None = None  # a local .h5 file


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to predict, with what the page shows about it."""

    version: str  # the run id, or the file's stamp: a new value means a new model
    label: str  # how the page names it: the run id or the file name
    model: object  # a keras.Model of steps.model.build_model's architecture
    card: dict = field(default_factory=dict)  # run.json: run, published_at, accuracy, settings
    metrics: dict | None = None  # metrics.json: accuracy, per_class_accuracy, confusion_matrix
    confusion_png: bytes | None = None


@dataclass(frozen=True)
class Status:
    """What the page serves now, and why it is not the newest model if it is not."""

    model: LoadedModel | None
    # Set when the newest version exists but is unusable, or the source cannot be read.
    problem: str | None = None


def default_model_uri(environ: Mapping[str, str] = os.environ) -> str:
    store = environ.get("ARTIFACTS") or DEFAULT_STORE
    return f"{store.rstrip('/')}/{LATEST_KEY}"


def model_uri(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("MODEL_URI") or default_model_uri(environ)


def parse_model_uri(uri: str) -> ModelSource:
    text = uri.strip()
    if text.rstrip("/").endswith(LATEST_KEY):
        store = text.rstrip("/").removesuffix(LATEST_KEY).rstrip("/")
        return ModelSource(uri=text, store=store or ".")
    if text.startswith("gs://"):
        if text.endswith(".h5"):
            raise ModelUnavailable(
                f"MODEL_URI {text}: a model in a bucket is named by its store's "
                f"{LATEST_KEY} (gs://bucket/{LATEST_KEY}), not by its file"
            )
        return ModelSource(uri=text, store=text)
    if Path(text).is_dir():
        return ModelSource(uri=text, store=text)
    return ModelSource(uri=text, file=Path(text))


def current_version(source: ModelSource, store: ArtifactStore | None) -> str | None:
    """The version MODEL_URI names right now (a run id or a file stamp), or None when there is none."""
    if store is not None:
        return latest_run(store)
    try:
        stat = source.file.stat()
    except OSError:
        return None
    return f"{source.file.name}@{stat.st_mtime_ns}-{stat.st_size}"


def read_json(text: str | None) -> dict | None:
    """A JSON object from `text`, or None when it is missing or not an object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def load_weights(path: Path) -> object:
    from steps.model import load_model  # TensorFlow loads only when a model is needed

    try:
        return load_model(path)
    except StepError as error:
        raise ModelUnavailable(str(error)) from None


def fetch_file(source: ModelSource, version: str) -> LoadedModel:
    path = source.file
    if path is None or not path.is_file():
        raise ModelUnavailable(f"model file not found: {source.uri}")
    beside = path.parent
    confusion = beside / CONFUSION_FILE
    return LoadedModel(
        version=version,
        label=path.name,
        model=load_weights(path),
        card=read_json(text_of(beside / RUN_FILE)) or {},
        metrics=read_json(text_of(beside / METRICS_FILE)),
        confusion_png=confusion.read_bytes() if confusion.is_file() else None,
    )


def text_of(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def fetch_run(store: ArtifactStore, run: str) -> LoadedModel:
    try:
        prefix = run_prefix(run)
    except ValueError:
        raise ModelUnavailable(f"{LATEST_KEY} names {run!r}, which is not a run id") from None
    with tempfile.TemporaryDirectory(prefix="mnist-model-") as folder:
        local = Path(folder) / MODEL_FILE
        try:
            store.download_file(f"{prefix}/{MODEL_FILE}", local)
        except StepError:
            raise ModelUnavailable(f"run {run} has no {MODEL_FILE} in {store.uri} (yet)") from None
        model = load_weights(local)
        confusion_png = None
        if f"{prefix}/{CONFUSION_FILE}" in store.list_keys(prefix):
            store.download_file(f"{prefix}/{CONFUSION_FILE}", Path(folder) / CONFUSION_FILE)
            confusion_png = (Path(folder) / CONFUSION_FILE).read_bytes()
    return LoadedModel(
        version=run,
        label=run,
        model=model,
        card=read_json(store.read_text(f"{prefix}/{RUN_FILE}")) or {"run": run},
        metrics=read_json(store.read_text(f"{prefix}/{METRICS_FILE}")),
        confusion_png=confusion_png,
    )


def fetch(source: ModelSource, store: ArtifactStore | None, version: str) -> LoadedModel:
    """Load `version` of the model `source` names; ModelUnavailable if it is missing or broken."""
    if store is not None:
        return fetch_run(store, version)
    return fetch_file(source, version)


class ModelKeeper:
    """Follows a source: loads each new version once, and keeps the last good model while a new one fails.

    One per MODEL_URI per process; every visitor's page asks it on every rerun (a cheap read of LATEST).
    """

    def __init__(self, source: ModelSource) -> None:
        self.source = source
        self.current: LoadedModel | None = None
        self._store: ArtifactStore | None = None
        self._lock = threading.Lock()

    def store(self) -> ArtifactStore | None:
        """The store behind the source, opened once (a GCS client is not free); None for a file."""
        if self.source.store is not None and self._store is None:
            self._store = open_store(self.source.store)
        return self._store

    def refresh(self) -> Status:
        with self._lock:
            try:
                store = self.store()
                version = current_version(self.source, store)
            except Exception as error:  # a store can fail in many ways (network, permissions)
                return Status(self.current, f"cannot read {self.source.uri}: {error}")
            if version is None:
                if self.current is None:
                    return Status(None)
                return Status(self.current, f"{self.source.uri} names no model any more")
            if self.current is not None and self.current.version == version:
                return Status(self.current)
            try:
                loaded = fetch(self.source, store, version)
            except ModelUnavailable as error:
                return Status(self.current, f"the newest model cannot be loaded: {error}")
            except Exception as error:  # the store failed while downloading (network, permissions)
                return Status(self.current, f"the newest model cannot be fetched: {error}")
            self.current = loaded
            return Status(loaded)
