"""MODEL_URI: a store's LATEST (folder or gs:// through the emulator), a store, or a model file."""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from steps.lib.model_file import MAX_MODEL_BYTES
from steps.lib.registry import CONFUSION_FILE, LATEST_KEY, MODEL_FILE, run_prefix
from steps.lib.storage import GCSStore
from tests.conftest import new_bucket
from tests.support.gcs_emulator import Emulator, own_emulator
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
    ("uri", "expected"),
    [
        (".runs/models/mnist/LATEST", ModelSource(".runs/models/mnist/LATEST", store=".runs")),
        ("models/mnist/LATEST", ModelSource("models/mnist/LATEST", store=".")),
        (
            "gs://bucket/models/mnist/LATEST",
            ModelSource("gs://bucket/models/mnist/LATEST", store="gs://bucket"),
        ),
        (
            "gs://bucket/team/models/mnist/LATEST/",
            ModelSource("gs://bucket/team/models/mnist/LATEST/", store="gs://bucket/team"),
        ),
        ("gs://bucket/team", ModelSource("gs://bucket/team", store="gs://bucket/team")),
        ("some/model.h5", ModelSource("some/model.h5", file=Path("some/model.h5"))),
    ],
)
def test_model_uris_are_parsed(uri: str, expected: ModelSource) -> None:
    assert parse_model_uri(uri) == expected


def test_a_bucket_model_file_is_refused_with_the_uri_to_use() -> None:
    with pytest.raises(ModelUnavailable, match="gs://bucket/models/mnist/LATEST"):
        parse_model_uri("gs://bucket/models/mnist/run-1/model.h5")


def test_the_default_is_the_local_stores_latest() -> None:
    """The project's own .runs, wherever the page or ui.predict is started."""
    assert default_model_uri({}) == f"{ROOT / '.runs'}/{LATEST_KEY}"
    assert model_uri({}) == f"{ROOT / '.runs'}/{LATEST_KEY}"
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


def test_a_gcs_store_is_followed_through_latest(
    gcs_bucket: str, digit_model: Path, model_evaluation: Path
) -> None:
    store = f"gs://{gcs_bucket}/team"
    keeper = ModelKeeper(parse_model_uri(f"{store}/{LATEST_KEY}"))
    assert keeper.refresh().model is None  # nothing published yet
    publish_run(store, "gcs-run-1", digit_model, model_evaluation)
    loaded = keeper.refresh().model
    assert loaded.label == "gcs-run-1"
    assert loaded.metrics["accuracy"] == loaded.card["accuracy"]
    assert loaded.confusion_png.startswith(b"\x89PNG")
    publish_run(store, "gcs-run-2", digit_model, model_evaluation)
    assert keeper.refresh().model.label == "gcs-run-2"


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


def test_a_broken_model_file_is_not_served(tmp_path: Path) -> None:
    model = tmp_path / "model.h5"
    model.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))  # an HDF5 signature and nothing else
    status = ModelKeeper(parse_model_uri(str(model))).refresh()
    assert status.model is None
    assert "not a model of this project's architecture" in status.problem


def test_latest_naming_something_that_is_not_a_run_keeps_the_old_model(store: Path) -> None:
    keeper = serving_the_first_run(store)
    (store / LATEST_KEY).write_text("../../etc")
    status = keeper.refresh()
    assert status.model.label == FIRST_RUN
    assert "not a run id" in status.problem
    (store / LATEST_KEY).unlink()
    status = keeper.refresh()
    assert status.model.label == FIRST_RUN and "names no model" in status.problem


# The page and publish check run files with the same functions (steps.lib.published): each rule is
# tested with publish (tests/test_publish.py); here, that the page keeps the last good model.
MALFORMED = {
    "metrics: not JSON": ("metrics.json", b"{not json"),
    "metrics: 3000x3000 matrix": (
        "metrics.json",
        b'{"accuracy": 0.9, "confusion_matrix": ['
        + b",".join([b"[" + b"0," * 2999 + b"0]"] * 3000)
        + b"]}",
    ),
    "card: settings a list": ("run.json", json.dumps({"run": "x", "settings": [1]}).encode()),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_run_file_makes_the_new_model_unavailable_and_keeps_the_last_good_one(
    store: Path, case: str
) -> None:
    name, content = MALFORMED[case]
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


def test_a_huge_latest_is_read_only_in_part_and_not_echoed(store: Path) -> None:
    keeper = serving_the_first_run(store)
    (store / LATEST_KEY).write_bytes(b"x" * 10_000_000)
    status = keeper.refresh()
    assert status.model.label == FIRST_RUN
    assert "not a run id" in status.problem and len(status.problem) < 200


def test_a_latest_that_is_a_fifo_does_not_block(store: Path) -> None:
    keeper = serving_the_first_run(store)
    (store / LATEST_KEY).unlink()
    os.mkfifo(store / LATEST_KEY)
    status = keeper.refresh()  # a blocking read would hang here (the test has a timeout below)
    assert status.model.label == FIRST_RUN and "not a regular file" in status.problem


def test_a_confusion_picture_that_is_not_a_sane_png_is_left_out(store: Path) -> None:
    (store / run_prefix(FIRST_RUN) / "confusion.png").write_bytes(b"\x89PNG broken")
    loaded = ModelKeeper(parse_model_uri(str(store))).refresh().model
    assert loaded.confusion_png is None and loaded.metrics["confusion_matrix"]


def test_a_confusion_picture_of_many_chunks_is_left_out(store: Path) -> None:
    """Anyone who can write the store: 2 MB of 174,000 empty chunks, walked by Pillow one by one."""
    picture = store / run_prefix(FIRST_RUN) / CONFUSION_FILE
    data = picture.read_bytes()
    picture.write_bytes(png_of_empty_chunks(MAX_PICTURE_BYTES - len(data), data))
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


def test_the_checked_files_keep_what_the_page_shows(published_store: Path) -> None:
    loaded = ModelKeeper(parse_model_uri(str(published_store))).refresh().model
    written = json.loads((published_store / run_prefix(FIRST_RUN) / "metrics.json").read_text())
    for name in ("accuracy", "per_class_accuracy", "confusion_matrix", "test_samples", "loss"):
        assert loaded.metrics[name] == written[name]
    assert set(loaded.card) == {"run", "published_at", "accuracy", "settings"}


def test_run_files_are_read_through_the_store_and_its_root_check(tmp_path: Path) -> None:
    """A LATEST that is a symlink out of the store is refused like any other key leading outside."""
    from steps.lib.errors import StepError
    from steps.lib.registry import latest_run
    from steps.lib.storage import open_store

    outside = tmp_path / "secret.txt"
    outside.write_text("not for the page")
    store_root = tmp_path / "store"
    (store_root / "models" / "mnist").mkdir(parents=True)
    (store_root / "models" / "mnist" / "LATEST").symlink_to(outside)
    with pytest.raises(StepError, match="outside the store"):
        latest_run(open_store(store_root))


def io_bytes(field: str) -> int:
    """This process's bytes read (rchar) or written (wchar) through system calls so far."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith(field + ":"))


def test_a_huge_model_file_is_refused_before_it_is_copied_and_not_read_again(store: Path) -> None:
    """A 256 MiB (sparse) model.h5 in the store: the pod's /tmp is a 512Mi emptyDir, and every
    visitor's rerun waits on the keeper's lock while it is fetched."""
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


@pytest.fixture
def stopped_gcs_store(
    monkeypatch: pytest.MonkeyPatch, digit_model: Path, model_evaluation: Path
) -> Iterator[tuple[str, Emulator]]:
    """A gs:// store on an emulator of its own, with one run published, and that emulator."""
    with own_emulator() as emulator:
        bucket = new_bucket(emulator.host, monkeypatch)
        publish_run(f"gs://{bucket}", "gcs-run-1", digit_model, model_evaluation)
        yield f"gs://{bucket}/{LATEST_KEY}", emulator


def test_a_visitors_run_never_reads_the_store(
    monkeypatch: pytest.MonkeyPatch, stopped_gcs_store: tuple[str, Emulator]
) -> None:
    """Every visitor's run asked the store for LATEST inside one lock shared by all: a store that
    did not answer held every visitor for the client's 120 s of retries. Now a run is served what
    is in memory, the store is read in the keeper's thread alone, within STORE_SECONDS a look."""
    uri, emulator = stopped_gcs_store
    readers: list[str] = []
    reading = model_source.current_version

    def recorded(*args: object) -> object:
        readers.append(threading.current_thread().name)
        return reading(*args)

    monkeypatch.setattr(model_source, "current_version", recorded)
    monkeypatch.setattr(model_source, "CHECK_SECONDS", 0)
    keeper = ModelKeeper(parse_model_uri(uri))
    first = keeper.serving()  # the first model: this visitor waits for it
    assert first.model.label == "gcs-run-1" and first.problem is None
    emulator.stop()
    for _ in range(3):  # each starts a look if none is under way, and answers at once
        status = keeper.serving()
        assert status.model is first.model
        keeper.wait()
    status = keeper.serving()
    assert status.model is first.model and status.unreachable
    assert readers and set(readers) == {"model-check"}  # never the visitor's thread
    assert isinstance(keeper.store(), GCSStore) and keeper.store().deadline == STORE_SECONDS


def test_the_stores_reads_give_up_within_their_deadline(
    stopped_gcs_store: tuple[str, Emulator],
) -> None:
    """The page's reads of a gs:// store, retries included, end within STORE_SECONDS (the client's
    default retried for 120 s), and a closed port ends a look with the model kept."""
    uri, emulator = stopped_gcs_store
    keeper = ModelKeeper(parse_model_uri(uri))
    assert keeper.refresh().model.label == "gcs-run-1"
    bounds = keeper.store().read_bounds()
    assert bounds["timeout"] == bounds["retry"].timeout == STORE_SECONDS
    emulator.stop()
    status = keeper.refresh()
    assert status.unreachable and status.model.label == "gcs-run-1"


def test_with_nothing_to_serve_a_visitor_waits_for_the_look(
    monkeypatch: pytest.MonkeyPatch, published_store: Path, tmp_path: Path
) -> None:
    """With no model in memory there is nothing to serve meanwhile: a run waits for the look it
    started, and a model published since the last one is shown at once."""
    monkeypatch.setattr(model_source, "CHECK_SECONDS", 0)
    store = tmp_path / "store"
    keeper = ModelKeeper(parse_model_uri(str(store / LATEST_KEY)))
    assert keeper.serving() == model_source.Status(None)
    shutil.copytree(published_store, store)
    assert keeper.serving().model.label == FIRST_RUN
