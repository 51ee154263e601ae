"""A seeded fuzz of the steps' readers of untrusted files: each mutated file is read or refused with a
StepError (one line, exit 2), never another exception, a hang or part of a step's outputs."""

from __future__ import annotations

import faulthandler
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from steps import aggregate, split
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from tests.support.steps import copy_model, digits, files_in, split_argv

SEED = 20240516
CASES_PER_KIND = 60
HANG_SECONDS = 60  # each case takes milliseconds: one still running after this is stuck, not slow


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One of the usual mutations: flipped bytes, a cut, an insertion, a run of 0xFF, a moved block."""
    data = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del data[rng.randrange(len(data)) :]
    elif kind == 2:
        at = rng.randrange(len(data))
        data[at:at] = rng.randbytes(rng.randint(1, 64))
    elif kind == 3:
        at = rng.randrange(len(data))
        data[at : at + rng.randint(1, 32)] = b"\xff" * 32
    elif kind == 4:
        start, end = sorted(rng.randrange(len(data)) for _ in range(2))
        at = rng.randrange(len(data))
        data[at:at] = data[start : min(end, start + 4096)]
    else:
        at = rng.randrange(len(data))
        data[at : at + 8] = rng.choice(
            [b"\x00" * 8, b"\xff\xff\xff\x7f\x00\x00\x00\x00", (2**62).to_bytes(8, "little")]
        )
    return bytes(data)


def fuzz(
    seed_file: Path, reader: Callable[[Path], object], tmp_path: Path, cases: int = CASES_PER_KIND
) -> dict[str, int]:
    """Feed `reader` mutations of `seed_file`; count outcomes; fail on anything but a StepError."""
    rng = random.Random(f"{SEED}-{seed_file.name}")
    original = seed_file.read_bytes()
    outcomes = {"read": 0, "refused": 0}
    for case in range(cases):
        target = tmp_path / f"case-{case}{seed_file.suffix}"
        target.write_bytes(mutate(original, rng))
        faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=sys.__stderr__)  # loud exit
        try:
            reader(target)
            outcomes["read"] += 1
        except StepError:
            outcomes["refused"] += 1
        finally:
            faulthandler.cancel_dump_traceback_later()
        target.unlink()
    assert outcomes["refused"] > 0
    return outcomes


def test_fuzzed_shards(tmp_path: Path) -> None:
    from steps.lib.shards import read_shard

    for name, save in (("stored.npz", np.savez), ("deflated.npz", np.savez_compressed)):
        seed = tmp_path / name
        save(seed, **digits(40, labels=np.arange(40) % 10))
        fuzz(seed, read_shard, tmp_path)


def test_fuzzed_sources_through_split_leave_no_output(tmp_path: Path, capsys) -> None:
    """split in-process on mutated mnist.npz files: it splits or refuses, and refusing leaves nothing."""
    seed = tmp_path / "mnist.npz"
    images = digits(30, labels=np.arange(30) % 10)
    x, y = images["x"], images["y"]
    np.savez_compressed(seed, x_train=x, y_train=y, x_test=x, y_test=y)
    out = tmp_path / "out"

    def split_into_out(source: Path) -> None:
        code = run(split.main, split.make_parser(), split_argv(source, out))
        capsys.readouterr()
        if code == 0:
            assert files_in(out) == {"shards", "shards/0.npz", "shards/1.npz", "test.npz"}
            for path in sorted(out.rglob("*"), reverse=True):
                path.rmdir() if path.is_dir() else path.unlink()
            return
        assert code == 2
        assert not out.exists() or files_in(out) == set()
        raise StepError("refused")

    fuzz(seed, split_into_out, tmp_path, cases=40)


def test_fuzzed_checkpoints(tmp_path: Path) -> None:
    from steps.lib import checkpoint
    from steps.lib.keras_model import compile_model, load_model

    model = compile_model(load_model(copy_model(tmp_path / "m.h5")), 1e-3)
    model.optimizer.build(model.trainable_variables)
    seed = tmp_path / "checkpoint.npz"
    checkpoint.save(model, 1, {"loss": 0.5}, "inputs", seed)
    weights = checkpoint._specs(model.get_weights(), "w")
    optimizer = checkpoint._specs([np.asarray(v) for v in model.optimizer.variables], "o")
    fuzz(seed, lambda path: checkpoint.read(path, "inputs", 2, weights, optimizer), tmp_path)


def test_fuzzed_model_files_through_aggregate_leave_no_output(tmp_path: Path, capsys) -> None:
    """aggregate in-process (h5py only) on mutated model files."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "0.json").write_text(json.dumps({"samples": 10}))
    out = tmp_path / "avg.h5"
    seed = copy_model(tmp_path / "seed.h5")

    def aggregate_one(model: Path) -> None:
        model.replace(folder / "0.h5")
        argv = ["--models-dir", str(folder), "--out", str(out)]
        code = run(aggregate.main, aggregate.make_parser(), argv)
        capsys.readouterr()
        (folder / "0.h5").replace(model)
        if code == 0:
            out.unlink()
            return
        assert code == 2
        assert files_in(tmp_path) == {"models", "models/0.json", "seed.h5", model.name}
        raise StepError("refused")

    outcomes = fuzz(seed, aggregate_one, tmp_path, cases=150)
    assert outcomes["read"] > 0, "some mutations leave the weights' bytes valid"


@pytest.mark.parametrize(
    ("text", "reader"),
    [
        ('{"loss": 0.1, "epochs": 1, "samples": 100}', "stats"),
        (
            json.dumps(
                {
                    "accuracy": 0.9,
                    "loss": 0.3,
                    "test_samples": 100,
                    "per_class_accuracy": {str(d): 0.9 for d in range(10)},
                    "confusion_matrix": [[d] * 10 for d in range(10)],
                    "missing_shards": {"1": ["2"]},
                }
            ),
            "metrics",
        ),
        ('{"1": "2", "2": ""}', "missing-shards"),
        ('["0", "1", "2"]', "shards"),
        ("workers=3\nlearning-rate=0.003\npartition=iid\nsource=/data/mnist.npz", "settings"),
    ],
)
def test_fuzzed_json(text: str, reader: str, tmp_path: Path) -> None:
    from steps.evaluate import missing_shards
    from steps.lib.published import check_settings, read_metrics
    from steps.publish import settings_from

    readers = {
        "stats": aggregate.sample_count,
        "metrics": lambda path: read_metrics(path.read_bytes()),
        "missing-shards": lambda path: missing_shards(path.read_bytes().decode("latin-1")),
        "shards": lambda path: aggregate.expected_shards(path.read_bytes().decode("latin-1"), []),
        "settings": lambda path: check_settings(
            settings_from(path.read_bytes().decode("latin-1").splitlines())
        ),
    }
    seed = tmp_path / f"{reader}.json"
    seed.write_text(text)
    fuzz(seed, readers[reader], tmp_path)
