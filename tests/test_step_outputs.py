"""A step's outputs appear together or not at all, never over something it does not own; bad arguments
and bad output paths are the steps' one line and exit 2; a model only counts with its stats."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from steps import aggregate, evaluate, init, split, train
from steps.lib.entry_point import run
from steps.lib.mnist import Digits
from tests.support.steps import (
    call,
    copy_model,
    digits,
    files_in,
    flags,
    split_argv,
    write_json,
    write_npz,
)


def test_split_refuses_to_replace_a_folder_that_is_not_its_own(
    small_mnist: Path, tmp_path: Path, capsys
) -> None:
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "thesis.tex").write_text("years of work")
    line = call(split, split_argv(small_mnist, tmp_path), capsys)
    assert "holds files that are not shards (thesis.tex)" in line
    assert files_in(tmp_path) == {"shards", "shards/thesis.tex"}


def test_split_replaces_its_own_previous_shards(small_mnist: Path, tmp_path: Path, capsys) -> None:
    for workers in (3, 2):
        argv = split_argv(small_mnist, tmp_path, workers=workers)
        assert run(split.main, split.make_parser(), argv) == 0
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == ["0.npz", "1.npz"]
    assert files_in(tmp_path) == {"shards", "shards/0.npz", "shards/1.npz", "test.npz"}
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "shards").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700
    assert (tmp_path / "test.npz").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_split_writes_nothing_when_its_last_output_cannot_be_written(
    small_mnist: Path, tmp_path: Path, capsys
) -> None:
    (tmp_path / "ids.json").mkdir()
    line = call(
        split, split_argv(small_mnist, tmp_path, "--ids-out", tmp_path / "ids.json"), capsys
    )
    assert f"output path is a folder: {tmp_path / 'ids.json'}" in line
    assert files_in(tmp_path) == {"ids.json"}


def test_evaluate_writes_all_four_files_or_none(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    (out / "report.txt").mkdir(parents=True)
    test_set = write_npz(tmp_path / "test.npz", **digits(20, labels=np.arange(20) % 10))
    argv = ["--model", copy_model(tmp_path / "m.h5"), "--test", test_set, "--out-dir", out]
    assert "output path is a folder" in call(evaluate, argv, capsys)
    assert files_in(out) == {"report.txt"}
    (out / "report.txt").rmdir()
    assert run(evaluate.main, evaluate.make_parser(), [str(a) for a in argv]) == 0
    assert files_in(out) == {"metrics.json", "confusion.png", "report.txt", "accuracy.txt"}
    # the test digits it scored on: a score compares only with one on the very same digits
    recorded = json.loads((out / "metrics.json").read_text())["test_sha256"]
    same, relabelled = (
        digits(20, labels=np.arange(20) % 10),
        digits(20, labels=np.arange(20) // 2),
    )
    assert recorded == Digits(**same).sha256() != Digits(**relabelled).sha256()


@pytest.mark.parametrize("module", [init, train, aggregate])
def test_an_output_path_that_is_a_folder_is_one_line(module, tmp_path: Path, capsys) -> None:
    out, models = tmp_path / "out", tmp_path / "models"
    out.mkdir()
    models.mkdir()
    write_json(models / "0.json", {"samples": 8})
    argv = {
        init: flags(out=out),
        train: flags(shard=write_npz(tmp_path / "shard.npz", **digits()), model=models / "0.h5")
        + flags(out=out, stats_out=tmp_path / "s"),
        aggregate: flags(models_dir=models, out=out),
    }[module]
    copy_model(models / "0.h5")
    assert f"output path is a folder: {out}" in call(module, argv, capsys)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("value", ["-1", str(2**64), "x"])
@pytest.mark.parametrize("module", [split, init, train])
def test_out_of_range_seeds_are_refused_by_the_parser(module, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        module.make_parser().parse_args(["--seed", value, "--help-not-reached"])
    assert stopped.value.code == 2
    assert "argument --seed" in capsys.readouterr().err


def test_a_seed_out_of_numpys_range_cannot_reach_split(small_mnist: Path, tmp_path: Path) -> None:
    from steps.lib.arguments import seed

    assert seed("0") == 0 and seed(str(2**32 - 1)) == 2**32 - 1
    with pytest.raises(Exception, match=r"must be in 0\.\.4294967295"):
        seed("-1")


# --- train: the model first, its stats last; aggregate counts a model only with its stats


@pytest.mark.slow  # trains
def test_train_renames_its_model_before_its_stats(tmp_path: Path, monkeypatch, capsys) -> None:
    renamed = []
    real_replace = os.replace

    def recording_replace(source, target):
        renamed.append(Path(target).name)
        real_replace(source, target)

    import steps.lib.staged_outputs

    monkeypatch.setattr(steps.lib.staged_outputs.os, "replace", recording_replace)
    shard = write_npz(tmp_path / "shard.npz", **digits(20, labels=np.arange(20) % 10))
    argv = ["--shard", shard, "--model", copy_model(tmp_path / "m.h5")]
    argv += ["--out", tmp_path / "out/model.h5", "--stats-out", tmp_path / "out/stats.json"]
    assert run(train.main, train.make_parser(), [str(a) for a in argv]) == 0
    assert renamed[-2:] == ["model.h5", "stats.json"]
