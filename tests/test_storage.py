"""The artifact store: the same behaviour from a folder and from GCS (emulator), kept inside its root."""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.lib.errors import StepError
from steps.lib.storage import ArtifactStore, LocalStore, download_dir, open_store, upload_dir
from tests.support.steps import files_in


@pytest.fixture(params=["folder", pytest.param("gcs", marks=pytest.mark.slow)])  # gcs: the emulator
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "folder":
        return open_store(tmp_path / "store")
    bucket = request.getfixturevalue("strict_gcs_bucket")
    return open_store(f"gs://{bucket}/some/prefix")


def test_files_and_folders_round_trip(store: ArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "deep").mkdir(parents=True)
    (source / "a.bin").write_bytes(b"\x00\x01")
    (source / "deep" / "b.txt").write_text("bee")
    upload_dir(store, source, "run-1/things")
    assert store.list_keys("run-1/things") == ["run-1/things/a.bin", "run-1/things/deep/b.txt"]
    assert download_dir(store, "run-1/things", tmp_path / "back") == 2
    assert (tmp_path / "back" / "deep" / "b.txt").read_text() == "bee"
    assert store.list_keys("run-1/thing") == []  # a prefix is a folder, not a string prefix


def test_missing_keys_and_bad_keys_are_clear_errors(store: ArtifactStore, tmp_path: Path) -> None:
    with pytest.raises(StepError, match="artifact not found: nope"):
        store.download_file("nope", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert store.read_text("nope") is None
    for key in ("../escape", "/absolute", ""):
        with pytest.raises(StepError, match="invalid artifact key"):
            store.write_text(key, "x")


def test_pointer_compare_and_swap(store: ArtifactStore) -> None:
    assert store.read_versioned("models/LATEST") == (None, 0)
    assert store.write_if_generation("models/LATEST", "run-a", 0)
    assert not store.write_if_generation("models/LATEST", "run-b", 0), "must exist now"
    text, generation = store.read_versioned("models/LATEST")
    assert text == "run-a"
    assert store.write_if_generation("models/LATEST", "run-b", generation)
    assert not store.write_if_generation("models/LATEST", "run-c", generation), "stale generation"
    assert store.read_text("models/LATEST") == "run-b"


def test_a_folder_read_as_a_file_is_refused_with_nothing_left_open(tmp_path: Path) -> None:
    """The type is checked on the bare descriptor, before os.fdopen's IsADirectoryError."""
    import os

    from steps.lib.input_files import open_regular, read_small_file

    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(StepError, match="metrics is not a regular file"):
        open_regular(tmp_path, "metrics")
    with pytest.raises(StepError, match="metrics is not a regular file"):
        read_small_file(tmp_path, "metrics", 1024)
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_the_folders_right_under_a_prefix(store: ArtifactStore, tmp_path: Path) -> None:
    for key in ("run-b/shards/0.npz", "run-a/init/model.h5", "run-a/test.npz", "top.txt"):
        store.write_text(key, "x")
    assert store.list_folders("", 10) == ["run-a", "run-b"]
    assert store.list_folders("run-a", 10) == ["init"]
    assert store.list_folders("", 1) == ["run-a"] and store.list_folders("none", 10) == []
    if isinstance(store, LocalStore):  # a folder store lists no symlinked folder
        (tmp_path / "elsewhere").mkdir()
        (store.root / "run-c").symlink_to(tmp_path / "elsewhere")
        assert store.list_folders("", 10) == ["run-a", "run-b"]


def test_the_folder_store_refuses_and_lists_no_path_through_symlinks_out_of_its_root(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "store", tmp_path / "outside"
    (root / "models").mkdir(parents=True)
    (root / "run").mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "models" / "mnist").symlink_to(outside)
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "run" / "own.txt").write_text("own")
    (root / "run" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "run" / "folder").symlink_to(outside)
    store = open_store(root)
    for action in (
        lambda: store.write_text("models/mnist/LATEST", "x"),
        lambda: store.upload_file(outside / "secret.txt", "models/mnist/run/model.h5"),
        lambda: store.read_text("leak.txt"),
        lambda: store.download_file("leak.txt", tmp_path / "copy.txt"),
        lambda: store.list_keys(".."),
        lambda: store.list_keys("models/mnist"),
        lambda: store.write_if_generation("models/mnist/LATEST", "x", 0),
    ):
        with pytest.raises(StepError, match=r"invalid artifact key|leads outside the store"):
            action()
    assert store.list_keys("") == store.list_keys("run") == ["run/own.txt"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (tmp_path / "copy.txt").exists()


def test_download_dir_keeps_stored_names_inside_the_target(tmp_path: Path) -> None:
    """GCS stores 'run/x/../../escape.txt' (a stand-in listing: the emulator drops such names)."""

    class Listing:
        uri = "gs://bucket"

        def list_keys(self, prefix: str) -> list[str]:
            return [f"{prefix}../../escape.txt"]

        def download_file(self, key: str, local: Path) -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text("escaped")

    with pytest.raises(StepError, match="invalid artifact key"):
        download_dir(Listing(), "run/x", tmp_path / "in" / "models")
    assert files_in(tmp_path) == set()
