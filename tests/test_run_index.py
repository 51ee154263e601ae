"""The runs a store holds (steps.lib.run_index), published or cut short, from a folder and from GCS
(the emulator), the store's files untrusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.lib.published import MAX_FILE_BYTES
from steps.lib.run_index import read_run, run_index
from steps.lib.storage import ArtifactStore, open_store
from tests.support.runs import CUT, OLD, SERVED, fill


@pytest.fixture(params=["folder", pytest.param("gcs", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "folder":
        (tmp_path / "store").mkdir()
        return fill(open_store(tmp_path / "store"))
    bucket = request.getfixturevalue("gcs_bucket")
    return fill(open_store(f"gs://{bucket}/a/prefix"))


def test_published_and_cut_short_runs_newest_first(store: ArtifactStore) -> None:
    cut, served, old = run_index(store)
    assert [cut.run, served.run, old.run] == [CUT, SERVED, OLD]
    assert (served.phase, served.accuracy, served.settings["workers"]) == ("published", 0.9871, 2)
    assert served.started == "2026-12-01T10:00:00.000000+00:00"  # its history's start
    assert [score for _, score, _ in old.round_scores()] == [0.9, 0.95]
    # cut short in round 2: what its folder shows
    assert (cut.phase, cut.accuracy) == ("unfinished: round 2 training", None)
    assert cut.settings == {"workers": 2, "epochs": 1}
    assert cut.round_scores() == [(1, 0.93, 30.0)]
    assert read_run(store, "mnist-nope1") is None


def test_what_is_no_run_is_left_out_and_a_bad_file_is_said(tmp_path: Path) -> None:
    store = fill(open_store(tmp_path))
    store.write_text("logs/mnist-xyz12/split.log", "a log, not a run")
    store.write_text("notes/readme.txt", "not a run")
    store.write_text("Not_A_Run/shards/0.npz", "")
    store.write_text(f"models/mnist/{OLD}/metrics.json", "x" * (MAX_FILE_BYTES + 1))
    records = {record.run: record for record in run_index(store)}
    assert sorted(records) == sorted([CUT, SERVED, OLD])
    assert records[OLD].problem == f"metrics.json is over {MAX_FILE_BYTES} bytes"
