"""split: shards disjoint, complete, balanced, reproducible; Dirichlet shards skewed as asked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from steps import split
from steps.lib import mnist
from steps.lib.entry_point import run
from steps.lib.mnist import Digits
from steps.lib.shards import read_shard
from tests.support.steps import split_argv


@pytest.fixture(scope="module")
def train(mnist: dict[str, np.ndarray]) -> Digits:
    return Digits(mnist["x_train"][:6001], mnist["y_train"][:6001])


def fingerprints(shard: Digits) -> set[bytes]:
    return {image.tobytes() for image in shard.x}


@pytest.mark.parametrize("workers", [1, 3, 7])
def test_iid_shards_are_disjoint_complete_and_balanced(train: Digits, workers: int) -> None:
    shards = split.split(train, workers, seed=1, limit=0, partition="iid", alpha=0.5)
    assert len(shards) == workers
    sizes = [len(shard) for shard in shards]
    assert sum(sizes) == len(train)
    assert max(sizes) - min(sizes) <= 1
    seen: set[bytes] = set()
    for shard in shards:
        assert not seen & fingerprints(shard)
        seen |= fingerprints(shard)
    assert seen == fingerprints(train)


def test_same_seed_same_shards_other_seed_other_shards_limit_that_many(train: Digits) -> None:
    first = split.split(train, 3, seed=7, limit=0, partition="iid", alpha=0.5)
    again = split.split(train, 3, seed=7, limit=0, partition="iid", alpha=0.5)
    other = split.split(train, 3, seed=8, limit=0, partition="iid", alpha=0.5)
    assert all(np.array_equal(a.x, b.x) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0].y, other[0].y)
    limited = split.split(train, 4, seed=0, limit=1000, partition="iid", alpha=0.5)
    assert sum(len(shard) for shard in limited) == 1000


def label_skew(shards: list[Digits]) -> float:
    """Mean over shards of the share of the shard's most common label."""
    return float(np.mean([np.bincount(s.y, minlength=10).max() / len(s) for s in shards]))


def test_dirichlet_shards_are_skewed_the_smaller_alpha_the_more(train: Digits) -> None:
    iid = split.split(train, 5, seed=0, limit=0, partition="iid", alpha=0.5)
    skewed = split.split(train, 5, seed=0, limit=0, partition="dirichlet", alpha=0.1)
    mild = split.split(train, 5, seed=0, limit=0, partition="dirichlet", alpha=10.0)
    assert sum(len(s) for s in skewed) == len(train)
    assert label_skew(iid) < 0.15  # ~0.11 when every digit is equally common
    assert label_skew(skewed) > 0.4
    assert label_skew(mild) < label_skew(skewed)


def split_small(source: Path | str, folder: Path, *extra: str) -> int:
    argv = split_argv(source, folder, "--ids-out", str(folder / "ids.json"), *extra, workers=3)
    return run(split.main, split.make_parser(), argv)


def test_cli_writes_shards_test_set_and_held_out_digits_in_no_shard(
    small_mnist: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--validation", "200", "--validation-out", str(tmp_path / "validation.npz")]
    assert split_small(small_mnist, tmp_path, *extra) == 0
    assert capsys.readouterr().out == (
        "1800 training digits in 3 shards (600, 600, 600), 200 held out to score each round; "
        "500 test digits\n"
    )
    assert json.loads((tmp_path / "ids.json").read_text()) == [0, 1, 2]
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == ["0.npz", "1.npz", "2.npz"]
    shards = [read_shard(tmp_path / "shards" / f"{i}.npz") for i in range(3)]
    assert [len(shard) for shard in shards] == [600, 600, 600]
    held = read_shard(tmp_path / "validation.npz")
    trained = set().union(*map(fingerprints, shards))
    assert len(held) == 200 and not fingerprints(held) & trained
    with np.load(small_mnist) as mnist:
        every = fingerprints(Digits(mnist["x_train"], mnist["y_train"]))
    assert fingerprints(held) | trained == every
    assert len(read_shard(tmp_path / "test.npz")) == 500


def test_holding_out_draws_the_same_digits_for_a_seed_whatever_the_limit(train: Digits) -> None:
    kept, held = split.hold_out(train, 100, seed=3)
    again, same = split.hold_out(train, 100, seed=3)
    _, other = split.hold_out(train, 100, seed=4)
    assert np.array_equal(held.x, same.x) and np.array_equal(kept.y, again.y)
    assert not np.array_equal(held.y, other.y)
    assert len(kept) == len(train) - 100
    limited = split.split(kept, 2, seed=3, limit=500, partition="iid", alpha=0.5)
    assert not set().union(*map(fingerprints, limited)) & fingerprints(held)


def test_holding_out_every_digit_is_one_line(
    small_mnist: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--validation", "2000", "--validation-out", str(tmp_path / "validation.npz")]
    assert split_small(small_mnist, tmp_path, *extra) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m steps.split: error: --validation 2000 leaves no training digits of the 2000"
    )


def test_a_gs_source_whose_copy_cannot_be_kept_is_one_line_and_exit_2(
    small_mnist: Path,
    gcs_bucket: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gs:// dataset whose copy cannot be written (/sys, even for root) names MNIST_CACHE."""
    from steps.lib.storage import GCSStore

    GCSStore(gcs_bucket).upload_file(small_mnist, "reference/mnist.npz")
    monkeypatch.setenv("MNIST_CACHE", "/sys/mnist-argo-cache")
    source = f"gs://{gcs_bucket}/reference/mnist.npz"
    code = split_small(source, tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "MNIST_CACHE" in err and "Traceback" not in err
    assert not (tmp_path / "shards").exists()


def test_the_keras_url_reads_the_copy_beside_the_project_as_make_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run by hand after `make run` reads make's MNIST_SOURCE, not the Keras download."""
    copy = tmp_path / "shared" / "data" / "mnist.npz"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"a copy")
    monkeypatch.setattr(mnist, "COPY_BESIDE_THE_PROJECT", copy)
    assert mnist.fetch_source(mnist.KERAS_MNIST_URL, tmp_path / "cache") == copy
    assert not (tmp_path / "cache").exists(), "nothing downloaded"
