"""Where the page's model comes from: MODEL_URI resolved to a version, fetched, and kept while it works.

MODEL_URI is one of
- a store's pointer: `<store>/models/mnist/LATEST`, the store being a folder or `gs://bucket[/prefix]`
  (default: the local store's pointer, `$ARTIFACTS/models/mnist/LATEST`, ARTIFACTS defaulting to .runs, as in steps.lib.defaults);
- a store itself (a folder, or gs://bucket[/prefix]): its LATEST;
- a model file (`.h5`) on this machine; metrics.json, run.json, history.json and confusion.png beside it are
  used if there.

Weights are only ever read into the project's own architecture (steps.lib.model_file checks the file against it),
and the page runs that network in numpy (steps.lib.inference): no TensorFlow on the page.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic

from steps.lib import defaults
from steps.lib.errors import ProjectError, StepError
from steps.lib.inference import Network
from steps.lib.model_file import read_weights
from steps.lib.registry import (
    CONFUSION_FILE,
    LATEST_KEY,
    MODEL_FILE,
    latest_run,
    read_published,
    read_run_card,
    read_run_history,
    read_run_metrics,
    run_prefix,
)
from steps.lib.registry import read_model as read_run_model
from steps.lib.storage import ArtifactStore, LocalStore, open_store
from ui.images.picture import MAX_PICTURE_BYTES, page_picture

# A version refused (too big, malformed) is not fetched again on every rerun; after this long it is
# tried again, in case its files were fixed in place.
REFUSED_RETRY_SECONDS = 60.0
# A visitor's run never reads the store: it starts a look for a new model in the background when
# the last began this long ago, and is served what is in memory meanwhile.
CHECK_SECONDS = 5.0
# A gs:// store's reads give up after this long, retries included (the client's default is 120 s).
STORE_SECONDS = 10.0
# How long a visitor waits for the first model to load before the page says it is still loading.
FIRST_LOAD_SECONDS = 60.0
UNREACHABLE = "the store cannot be reached"
LOADING = "the model is still loading"

log = logging.getLogger("mnist-page")


class ModelUnavailable(ProjectError):
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
    model: Network  # the project's network with this model's weights
    card: dict = field(default_factory=dict)  # run.json: run, published_at, accuracy, settings
    metrics: dict | None = None  # metrics.json: accuracy, per_class_accuracy, confusion_matrix
    confusion_png: bytes | None = None
    history: dict | None = None  # history.json: the training, round by round (steps.lib.history)
    history_problem: str | None = None  # why a history.json there cannot be shown


@dataclass(frozen=True)
class Status:
    """What the page serves now, and why it is not the newest model if it is not."""

    model: LoadedModel | None
    # Set when the newest version exists but is unusable, or the source cannot be read.
    problem: str | None = None
    unreachable: bool = False  # the store did not answer: a newer model may be there


def default_model_uri(environ: Mapping[str, str] = os.environ) -> str:
    store = environ.get(defaults.STORE_ENV) or defaults.STORE
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
        try:
            return latest_run(store)
        except StepError as error:
            raise ModelUnavailable(str(error)) from None
    if source.file is None:  # a source is a store or a file
        return None
    try:
        stat = source.file.stat()
    except OSError:
        return None
    return f"{source.file.name}@{stat.st_mtime_ns}-{stat.st_size}"


def read_history(store: ArtifactStore, folder: str) -> tuple[dict | None, str | None]:
    """The run's checked training history, or why it cannot be shown; it never makes a run unavailable
    (publish carries it as it is, and the model is served without its curves)."""
    try:
        return read_run_history(store, folder), None
    except StepError as error:
        return None, str(error)


def load_weights(path: Path) -> Network:
    """The model file's weights, checked against the project's architecture before any is used."""
    try:
        return Network(read_weights(path))
    except StepError as error:
        raise ModelUnavailable(str(error)) from None


def fetch_file(source: ModelSource, version: str) -> LoadedModel:
    path = source.file
    if path is None or not path.is_file():
        raise ModelUnavailable(f"model file not found: {source.uri}")
    beside = LocalStore(path.parent)  # the files a run publishes beside its model, if there
    try:
        card = read_run_card(beside, "", path.name)
        metrics = read_run_metrics(beside, "")
        picture = page_picture(beside.read_head(CONFUSION_FILE, MAX_PICTURE_BYTES))
    except (StepError, OSError) as error:
        raise ModelUnavailable(str(error)) from None
    history, problem = read_history(beside, "")
    return LoadedModel(
        version=version,
        label=path.name,
        model=load_weights(path),
        card=card,
        metrics=metrics,
        confusion_png=picture,
        history=history,
        history_problem=problem,
    )


def fetch_run(store: ArtifactStore, run: str) -> LoadedModel:
    prefix = run_prefix(run)  # `run` came from latest_run: a run id
    try:
        shown = read_published(store, run)  # what publish's --serve policy judges the run by
    except StepError as error:
        raise ModelUnavailable(f"run {run}: {error}") from None
    card, metrics = shown.card, shown.metrics
    picture = page_picture(store.read_head(f"{prefix}/{CONFUSION_FILE}", MAX_PICTURE_BYTES))
    history, problem = read_history(store, prefix)
    data = read_model(store, run)
    with tempfile.TemporaryDirectory(prefix="mnist-model-") as folder:
        local = Path(folder) / MODEL_FILE
        local.write_bytes(data)
        del data
        try:
            model = load_weights(local)
        except ModelUnavailable as error:  # said of the store's file, not of the copy in /tmp
            raise ModelUnavailable(
                f"run {run}: {MODEL_FILE}: {str(error).removeprefix(f'{local}: ')}"
            ) from None
    return LoadedModel(
        version=run,
        label=run,
        model=model,
        card=card,
        metrics=metrics,
        confusion_png=picture,
        history=history,
        history_problem=problem,
    )


def read_model(store: ArtifactStore, run: str) -> bytes:
    """A run's model file, bounded as steps.lib.registry.read_model reads it."""
    try:
        return read_run_model(store, run)
    except StepError as error:
        raise ModelUnavailable(str(error)) from None


def fetch(source: ModelSource, store: ArtifactStore | None, version: str) -> LoadedModel:
    """Load `version` of the model `source` names; ModelUnavailable if it is missing or broken."""
    if store is not None:
        return fetch_run(store, version)
    return fetch_file(source, version)


class ModelKeeper:
    """Follows a source: loads each new version once, and keeps the last good model while a new one fails.

    One per MODEL_URI per process (keeper_for); every visitor's page asks it on every rerun
    (serving: no store read), and it looks for a new version in a thread of its own.
    """

    def __init__(self, source: ModelSource) -> None:
        self.source = source
        self.current: LoadedModel | None = None
        self._store: ArtifactStore | None = None
        self._lock = threading.Lock()
        self._refused: tuple[str, str, float] | None = None  # version, why, when
        self._state = threading.Lock()
        self._status: Status | None = None  # what the last look found
        self._checking = False
        self._checked_at = -math.inf
        self._checked = threading.Event()  # set while no look is under way
        self._checked.set()

    def store(self) -> ArtifactStore | None:
        """The store behind the source, opened once (a GCS client is not free); None for a file."""
        if self.source.store is not None and self._store is None:
            self._store = open_store(self.source.store, deadline=STORE_SECONDS)
        return self._store

    def serving(self) -> Status:
        """What a visitor's run shows, at once: the model in memory and why it may not be the newest.
        A look for a new one starts in the background when one is due (CHECK_SECONDS); only while
        no model is in memory does a visitor wait for a look under way, up to FIRST_LOAD_SECONDS."""
        with self._state:  # held to read and set these fields, never across a store read
            if not self._checking and monotonic() - self._checked_at >= CHECK_SECONDS:
                self._checking, self._checked_at = True, monotonic()
                self._checked.clear()
                threading.Thread(target=self._check, name="model-check", daemon=True).start()
            status = self._status
        if status is None or status.model is None:  # nothing to serve meanwhile
            self._checked.wait(FIRST_LOAD_SECONDS)
            with self._state:
                status = self._status
        return status or Status(None, LOADING)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no look for a new model is under way; False if one still is after `timeout`."""
        return self._checked.wait(timeout)

    def _check(self) -> None:
        try:
            status = self.refresh()
        except Exception:  # refresh answers for the store; a bug must not leave visitors waiting
            log.exception("looking for a new model failed")
            status = Status(self.current, "the newest model cannot be loaded")
        with self._state:
            self._status, self._checking = status, False
        self._checked.set()

    def refresh(self) -> Status:
        """Look for a new version now, and load it: the store is read here (the page's background
        look, ui.predict, the benchmarks)."""
        with self._lock:  # one look at a time; visitors never wait on it
            try:
                store = self.store()
                version = current_version(self.source, store)
            except ModelUnavailable as error:
                return Status(self.current, f"the newest model cannot be loaded: {error}")
            except Exception as error:  # a store can fail in many ways (network, permissions)
                said = " ".join(str(error).split())[:300]
                return Status(self.current, f"{self.source.uri}: {said}", unreachable=True)
            if version is None:
                if self.current is None:
                    return Status(None)
                return Status(self.current, f"{self.source.uri} names no model any more")
            if self.current is not None and self.current.version == version:
                return Status(self.current)
            if self._refused is not None:
                refused, problem, when = self._refused
                if refused == version and monotonic() - when < REFUSED_RETRY_SECONDS:
                    return Status(self.current, problem)
            try:
                loaded = fetch(self.source, store, version)
            except ModelUnavailable as error:
                problem = f"the newest model cannot be loaded: {error}"
                self._refused = (version, problem, monotonic())
                return Status(self.current, problem)
            except Exception as error:  # the store failed while downloading (network, permissions)
                return Status(self.current, f"the newest model cannot be fetched: {error}")
            self.current = loaded
            return Status(loaded)


KEEPERS: dict[str, ModelKeeper] = {}
KEEPERS_LOCK = threading.Lock()


def keeper_for(uri: str) -> ModelKeeper:
    """One keeper per MODEL_URI for the whole server: the model loads once, not per visitor."""
    with KEEPERS_LOCK:
        if uri not in KEEPERS:
            KEEPERS[uri] = ModelKeeper(parse_model_uri(uri))
        return KEEPERS[uri]
