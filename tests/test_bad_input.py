"""Every step meets bad input with exit code 2, one line on stderr, and no output file left behind (a
model of another architecture: test_weights_rules.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from steps import evaluate, split, train
from steps.lib.entry_point import run
from tests.support.steps import call, copy_model, digits, files_in, flags, split_argv, write_npz


def train_argv(shard: Path, model: Path, out: Path) -> list:
    return flags(shard=shard, model=model, out=out / "m.h5", stats_out=out / "s.json")


BAD_SHARDS = {
    "not an npz": ("not-npz", "not a readable .npz"),
    "wrong keys": ({"images": np.zeros((2, 28, 28), np.uint8)}, "missing keys"),
    "wrong shape": (digits(shape=(32, 32)), "shape (n, 28, 28)"),
    "wrong dtype": (digits(dtype=np.float32), "must be uint8"),
    "labels out of range": (digits(labels=[0, 3, 12, 1, 1, 1, 1, 1]), "labels must be in 0..9"),
    "empty": (digits(n=0, labels=[]), "holds no samples"),
}


def bad_shard(tmp_path: Path, case: str) -> Path:
    content, _ = BAD_SHARDS[case]
    path = tmp_path / "shard.npz"
    if isinstance(content, str):
        path.write_text("this is not a zip archive")
        return path
    return write_npz(path, **content)


@pytest.mark.parametrize("case", list(BAD_SHARDS))
def test_train_refuses_bad_shards(case: str, tmp_path: Path, capsys) -> None:
    shard = bad_shard(tmp_path, case)
    out = tmp_path / "out"
    line = call(train, train_argv(shard, copy_model(tmp_path / "good.h5"), out), capsys)
    assert BAD_SHARDS[case][1] in line
    assert str(shard) in line
    assert not out.exists()


@pytest.mark.parametrize("case", ["not an npz", "wrong shape", "labels out of range", "empty"])
def test_evaluate_refuses_bad_test_sets(case: str, tmp_path: Path, capsys) -> None:
    model = copy_model(tmp_path / "good.h5")
    argv = flags(model=model, test=bad_shard(tmp_path, case), out_dir=tmp_path / "out")
    line = call(evaluate, argv, capsys)
    assert BAD_SHARDS[case][1] in line
    assert not (tmp_path / "out").exists()


def test_missing_files_are_named(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere.npz"
    model = copy_model(tmp_path / "good.h5")
    assert "shard not found" in call(train, train_argv(missing, model, tmp_path), capsys)
    shard = write_npz(tmp_path / "ok.npz", **digits())
    line = call(train, train_argv(shard, tmp_path / "none.h5", tmp_path), capsys)
    assert "starting model not found" in line
    line = call(split, split_argv(missing, tmp_path), capsys)
    assert f"dataset not found: {missing}" in line
    assert files_in(tmp_path) == {"ok.npz", "good.h5"}


def test_split_refuses_more_workers_than_samples(small_mnist: Path, tmp_path: Path, capsys) -> None:
    line = call(split, split_argv(small_mnist, tmp_path, workers=1001), capsys)
    # the 2000 training digits less the 1000 held out to score each round (steps.lib.defaults)
    assert "--workers 1001 is more than the 1000 training samples" in line
    assert files_in(tmp_path) == set()


def test_split_refuses_a_dataset_without_mnist_keys(tmp_path: Path, capsys) -> None:
    source = write_npz(tmp_path / "other.npz", **digits())
    line = call(split, split_argv(source, tmp_path), capsys)
    assert "missing keys" in line


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "-3"], ["--limit", "-1"]])
def test_split_refuses_bad_numbers(argv: list[str], tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        run(
            split.main,
            split.make_parser(),
            [*argv, *map(str, split_argv("x", tmp_path, workers=1)[4:])],
        )
    assert stopped.value.code == 2
    assert "error: argument" in capsys.readouterr().err.splitlines()[-1]
    assert files_in(tmp_path) == set()
