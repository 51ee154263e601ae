"""MODEL_URI: a store's LATEST (folder or gs:// through the emulator), a store, or a model file."""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from steps.lib.model_file import MAX_MODEL_BYTES
from steps.lib.registry import CONFUSION_FILE, LATEST_KEY, MODEL_FILE, run_prefix
from steps.lib.storage import GCSStore
from tests.conftest import new_bucket
from tests.support.gcs_emulator import own_emulator
from tests.support.page import EPOCHS, EVAL_DIGITS, FIRST_RUN, png_of_empty_chunks, publish_run
from tests.support.project import ROOT
from ui import model_source
from ui.images.block_counts import png_chunks
from ui.images.decode import MAX_BLOCKS
from ui.images.picture import MAX_PICTURE_BYTES
from ui.model_source import (
    REFUSED_RETRY_SECONDS,
    STORE_SECONDS,
    ModelKeeper,
    ModelSource,
    ModelUnavailable,
    default_model_uri,
    model_uri,
    parse_model_uri,
)


@pytest.fixture
def store(published_store: Path, tmp_path: Path) -> Path:
    """A copy of the published store, for a test to change."""
    return Path(shutil.copytree(published_store, tmp_path / "store"))


def serving_the_first_run(uri: Path) -> ModelKeeper:
    """A keeper of `uri` that has loaded the first published run."""
    keeper = ModelKeeper(parse_model_uri(str(uri)))
    assert keeper.refresh().model.label == FIRST_RUN
    return keeper


@pytest.mark.parametrize(
    ("uri", "store"),
    [
        (".runs/models/mnist/LATEST", ".runs"),
        ("models/mnist/LATEST", "."),
        ("gs://bucket/models/mnist/LATEST", "gs://bucket"),
        ("gs://bucket/team/models/mnist/LATEST/", "gs://bucket/team"),
        ("gs://bucket/team", "gs://bucket/team"),
    ],
)
def test_store_uris_are_parsed(uri: str, store: str) -> None:
    assert parse_model_uri(uri) == ModelSource(uri, store=store)


def test_a_model_file_is_a_local_file_never_a_buckets() -> None:
    assert parse_model_uri("a/model.h5") == ModelSource("a/model.h5", file=Path("a/model.h5"))
    with pytest.raises(ModelUnavailable, match="gs://bucket/models/mnist/LATEST"):
        parse_model_uri("gs://bucket/models/mnist/run-1/model.h5")


def test_the_default_is_the_local_stores_latest() -> None:
    """The project's own .runs, wherever the page or ui.predict is started."""
    assert default_model_uri({}) == model_uri({}) == f"{ROOT / '.runs'}/{LATEST_KEY}"
    assert model_uri({"ARTIFACTS": "/data/store/"}) == f"/data/store/{LATEST_KEY}"
    assert model_uri({"ARTIFACTS": "gs://b/p", "MODEL_URI": "x.h5"}) == "x.h5"


def test_a_folder_store_gives_model_card_metrics_and_picture(published_store: Path) -> None:
    status = ModelKeeper(parse_model_uri(str(published_store / LATEST_KEY))).refresh()
    assert status.problem is None
    loaded = status.model
    assert loaded.version == loaded.label == FIRST_RUN
    assert loaded.card["settings"]["epochs"] == EPOCHS
    assert loaded.metrics["test_samples"] == EVAL_DIGITS
    assert loaded.confusion_png.startswith(b"\x89PNG")
    assert loaded.model.count_params() > 100_000
    written = json.loads((published_store / run_prefix(FIRST_RUN) / "metrics.json").read_text())
    for name in ("accuracy", "per_class_accuracy", "confusion_matrix", "test_samples", "loss"):
        assert loaded.metrics[name] == written[name]  # the checks keep what the page shows
    assert set(loaded.card) == {"run", "published_at", "accuracy", "settings"}


def test_a_model_file_with_its_run_files_beside_it(published_store: Path, tmp_path: Path) -> None:
    run_folder = shutil.copytree(published_store / run_prefix(FIRST_RUN), tmp_path / "run")
    model = Path(run_folder) / MODEL_FILE
    keeper = ModelKeeper(parse_model_uri(str(model)))
    first = keeper.refresh().model
    assert first.label == MODEL_FILE
    assert first.card["run"] == FIRST_RUN and first.metrics and first.confusion_png
    assert keeper.refresh().model is first  # unchanged file: not loaded again
    model.write_bytes(model.read_bytes())  # rewritten: a new stamp, loaded again
    (Path(run_folder) / "run.json").write_text(json.dumps({"run": "rewritten"}))
    second = keeper.refresh()
    assert second.model is not first and second.model.card["run"] == "rewritten"


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda latest: latest.write_text("../../etc"), "not a run id"),
        (lambda latest: latest.write_bytes(b"x" * 10_000_000), "not a run id"),  # read in part
        (lambda latest: latest.unlink(), "names no model"),
        (fifo, "not a regular file"),  # a blocking read would hang the keeper
    ],
    ids=["not a run", "huge", "gone", "fifo"],
)
def test_a_latest_that_names_no_run_keeps_the_old_model_and_says_why(
    store: Path, make: object, problem: str
) -> None:
    keeper = serving_the_first_run(store)
    make(store / LATEST_KEY)
    status = keeper.refresh()
    assert status.model.label == FIRST_RUN
    assert problem in status.problem and "x" * 100 not in status.problem  # not echoed


# The page and publish check run files with the same functions (steps.lib.published): each rule is
# tested with publish (tests/test_publish.py); here, that the page keeps the last good model.
def test_a_malformed_run_file_makes_the_new_model_unavailable_and_keeps_the_last_good_one(
    store: Path,
) -> None:
    name, content = "metrics.json", b"{not json"
    keeper = serving_the_first_run(store / LATEST_KEY)
    new_run = store / run_prefix("ui-test-bad")
    shutil.copytree(store / run_prefix(FIRST_RUN), new_run)
    (new_run / name).write_bytes(content)
    (store / LATEST_KEY).write_text("ui-test-bad")
    status = keeper.refresh()
    assert status.model.label == FIRST_RUN  # still the last good model
    assert status.problem.startswith("the newest model cannot be loaded: run ui-test-bad:")
    assert name in status.problem and len(status.problem) < 300
    # alone, the same run is not served at all
    alone = ModelKeeper(parse_model_uri(str(store / LATEST_KEY))).refresh()
    assert alone.model is None and name in alone.problem


@pytest.mark.parametrize(
    "make",
    [
        lambda png: b"\x89PNG broken",
        lambda png: png_of_empty_chunks(MAX_PICTURE_BYTES - len(png), png),
    ],
    ids=["broken", "2 MB of empty chunks"],  # Pillow walks them one by one, each time it opens it
)
def test_a_confusion_picture_that_is_not_a_sane_png_is_left_out(store: Path, make: object) -> None:
    picture = store / run_prefix(FIRST_RUN) / CONFUSION_FILE
    picture.write_bytes(make(picture.read_bytes()))
    assert picture.stat().st_size <= MAX_PICTURE_BYTES
    loaded = ModelKeeper(parse_model_uri(str(store))).refresh().model
    assert loaded.confusion_png is None and loaded.metrics["confusion_matrix"]


def test_the_page_keeps_the_picture_as_a_plain_png_of_the_same_pixels(
    published_store: Path,
) -> None:
    """Read once per model: what st.image opens on every rerun holds only the chunks Pillow writes."""
    stored = (published_store / run_prefix(FIRST_RUN) / CONFUSION_FILE).read_bytes()
    loaded = ModelKeeper(parse_model_uri(str(published_store))).refresh().model
    assert png_chunks(loaded.confusion_png, MAX_BLOCKS) == 3  # IHDR, IDAT, IEND
    with (
        Image.open(io.BytesIO(stored)) as before,
        Image.open(io.BytesIO(loaded.confusion_png)) as now,
    ):
        assert now.size == before.size
        assert np.array_equal(np.asarray(now), np.asarray(before.convert(now.mode)))


def io_bytes(field: str) -> int:
    """This process's bytes read (rchar) or written (wchar) through system calls so far."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith(field + ":"))


def test_a_huge_model_file_is_refused_before_it_is_copied_and_not_read_again(store: Path) -> None:
    """A 256 MiB model.h5 (the pod's /tmp is a 512Mi emptyDir): not copied, not read again."""
    keeper = serving_the_first_run(store)
    new_run = store / run_prefix("ui-test-huge")
    shutil.copytree(store / run_prefix(FIRST_RUN), new_run)
    with (new_run / MODEL_FILE).open("r+b") as model:
        model.truncate(256 << 20)
    (store / LATEST_KEY).write_text("ui-test-huge")
    written, read = io_bytes("wchar"), io_bytes("rchar")
    status = keeper.refresh()
    assert io_bytes("wchar") - written < 1 << 20  # nothing copied
    assert io_bytes("rchar") - read < MAX_MODEL_BYTES + (1 << 20)  # read up to the limit only
    assert status.model.label == FIRST_RUN
    assert f"over {MAX_MODEL_BYTES} bytes" in status.problem
    read = io_bytes("rchar")
    again = keeper.refresh()  # every rerun asks: the refused version is remembered
    assert again.problem == status.problem
    assert io_bytes("rchar") - read < 1 << 20


def test_a_refused_version_is_tried_again_after_a_while(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = serving_the_first_run(store)
    new_run = store / run_prefix("ui-test-later")
    shutil.copytree(store / run_prefix(FIRST_RUN), new_run)
    model = (new_run / MODEL_FILE).read_bytes()
    (new_run / MODEL_FILE).write_bytes(b"not hdf5")
    (store / LATEST_KEY).write_text("ui-test-later")
    now = [1000.0]
    monkeypatch.setattr(model_source, "monotonic", lambda: now[0])
    assert "not a model" in keeper.refresh().problem
    (new_run / MODEL_FILE).write_bytes(model)  # fixed in place
    assert "not a model" in keeper.refresh().problem  # remembered
    now[0] += REFUSED_RETRY_SECONDS
    assert keeper.refresh().model.label == "ui-test-later"


def test_a_visitors_run_never_reads_the_store_and_the_stores_reads_give_up_within_their_deadline(
    monkeypatch: pytest.MonkeyPatch, digit_model: Path, model_evaluation: Path
) -> None:
    """A visitor waits only for the first model; the keeper's thread alone reads the store, within
    STORE_SECONDS retries included (120 s before); a silent store ends a look, the model kept."""
    readers: list[str] = []
    reading = model_source.current_version

    def recorded(*args: object) -> object:
        readers.append(threading.current_thread().name)
        return reading(*args)

    monkeypatch.setattr(model_source, "current_version", recorded)
    monkeypatch.setattr(model_source, "CHECK_SECONDS", 0)
    with own_emulator() as emulator:
        team = f"gs://{new_bucket(emulator.host, monkeypatch)}/team"  # a store in a bucket's folder
        keeper = ModelKeeper(parse_model_uri(f"{team}/{LATEST_KEY}"))
        assert keeper.serving() == model_source.Status(None)  # nothing published yet
        publish_run(team, "gcs-run-1", digit_model, model_evaluation)
        first = keeper.serving()  # the first model: this visitor waits for it
        assert first.model.label == "gcs-run-1" and first.problem is None
        assert first.model.metrics["accuracy"] == first.model.card["accuracy"]
        assert first.model.confusion_png.startswith(b"\x89PNG")
        store = keeper.store()
        assert isinstance(store, GCSStore) and store.deadline == STORE_SECONDS
        bounds = store.read_bounds()
        assert bounds["timeout"] == bounds["retry"].timeout == STORE_SECONDS
        emulator.stop()
        store.deadline = 0.5  # the same rule, sooner
        for _ in range(3):  # each starts a look if none is under way, and answers at once
            assert keeper.serving().model is first.model
            keeper.wait()
    status = keeper.serving()
    assert status.model is first.model and status.unreachable
    assert readers and set(readers) == {"model-check"}  # never the visitor's thread
