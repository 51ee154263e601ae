"""train as a pod runs it: progress in Argo's N/M format, the thread counts the runner sets applied,
a diverging trainer's one line, and forged checkpoints ignored."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from steps import train
from steps.lib.entry_point import run
from steps.lib.mnist import PIXEL_MAX, Digits
from steps.lib.progress import ProgressFile
from tests.support.project import ROOT, run_python
from tests.support.steps import copy_model, digits, write_npz


@pytest.fixture
def progress_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every value the progress file took, read back from the file after each write."""
    values: list[str] = []
    real_write = ProgressFile.write

    def recording_write(self: ProgressFile) -> None:
        before = self.written
        real_write(self)
        if self.written != before:
            values.append(self.path.read_text())

    monkeypatch.setattr(ProgressFile, "write", recording_write)
    return values


def train_argv(tmp_path: Path, epochs: int, *extra, count: int = 250, batch: int = 50) -> list[str]:
    shard = write_npz(tmp_path / "shard.npz", **digits(count, labels=np.arange(count) % 10))
    argv = ["--shard", shard, "--model", copy_model(tmp_path / "start.h5"), "--epochs", epochs]
    argv += ["--batch", batch, "--out", tmp_path / "out/m.h5"]
    argv += ["--stats-out", tmp_path / "out/s.json"]
    return [str(a) for a in [*argv, *extra]]


EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+): accuracy ([0-9.]+) loss ([0-9.]+) \(([0-9.]+) s\)$")


def epoch_lines(text: str) -> list[tuple[str, ...]]:
    return [match.groups() for match in map(EPOCH_LINE.match, text.splitlines()) if match]


@pytest.mark.slow  # trains
def test_train_reports_progress_and_each_epochs_loss_accuracy_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress_writes: list[str], capsys
) -> None:
    from steps.lib.keras_model import keras

    fed = []
    real_fit = keras.Model.fit

    def recording_fit(self, x, **kwargs):
        fed.append(x)
        return real_fit(self, x, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recording_fit)
    target = tmp_path / "argo" / "progress"
    monkeypatch.setenv("ARGO_PROGRESS_FILE", str(target))
    assert run(train.main, train.make_parser(), train_argv(tmp_path, 2)) == 0
    # fed one thread's batches: Keras' autotuned pipeline slowed trainers sharing the cores unevenly
    assert fed[0].options().autotune.enabled is False
    assert fed[0].options().threading.private_threadpool_size == 1
    assert progress_writes[0] == "0/10\n"  # 250 samples, batch 50: 5 batches per epoch, 2 epochs
    assert progress_writes[-1] == "10/10\n"
    done = [int(value.split("/")[0]) for value in progress_writes]
    assert done == sorted(done)
    assert target.read_text() == "10/10\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["progress"]  # no temporary left
    stats = json.loads((tmp_path / "out/s.json").read_text())
    said = epoch_lines(capsys.readouterr().out)  # for the person watching the run
    assert [(number, of) for number, of, *_ in said] == [("1", "2"), ("2", "2")]
    columns = stats["history"]
    assert [f"{value:.4f}" for value in columns["accuracy"]] == [line[2] for line in said]
    assert [f"{value:.4f}" for value in columns["loss"]] == [line[3] for line in said]
    assert columns["loss"][-1] == stats["loss"] and columns["accuracy"][-1] == stats["accuracy"]
    assert list(stats)[-1] == "samples"


@pytest.mark.slow  # trains
def test_a_resumed_trainer_keeps_its_checkpoints_epochs_and_counts_progress_from_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress_writes: list[str], capsys
) -> None:
    store = ["--checkpoint-store", str(tmp_path / "store"), "--checkpoint-key", "c/0.npz"]
    argv = train_argv(tmp_path, 2, *store)
    from steps.lib.checkpoint import StoreCheckpoint

    original = StoreCheckpoint.on_epoch_end

    def stop_after_first_epoch(self, epoch, logs=None):
        original(self, epoch, logs)
        raise KeyboardInterrupt  # as a killed trainer: its checkpoint saved, nothing after

    monkeypatch.setattr(StoreCheckpoint, "on_epoch_end", stop_after_first_epoch)
    with pytest.raises(KeyboardInterrupt):
        run(train.main, train.make_parser(), argv)
    first = epoch_lines(capsys.readouterr().out)
    monkeypatch.setattr(StoreCheckpoint, "on_epoch_end", original)

    monkeypatch.setenv("ARGO_PROGRESS_FILE", str(tmp_path / "progress"))
    assert run(train.main, train.make_parser(), argv) == 0
    captured = capsys.readouterr()
    assert "resuming from checkpoint: 1 epoch(s) done" in captured.err
    assert (progress_writes[0], progress_writes[-1]) == ("5/10\n", "10/10\n")
    second = epoch_lines(captured.out)
    assert [line[0] for line in first] == ["1"] and [line[0] for line in second] == ["2"]
    columns = json.loads((tmp_path / "out/s.json").read_text())["history"]
    assert [f"{value:.4f}" for value in columns["loss"]] == [first[0][3], second[0][3]]
    assert [f"{value:.4f}" for value in columns["accuracy"]] == [first[0][2], second[0][2]]


def test_progress_writes_are_throttled_but_the_last_value_is_always_written(
    tmp_path: Path, progress_writes: list[str]
) -> None:
    progress = ProgressFile(tmp_path / "p", total=1000, interval=3600)
    for done in range(1, 1000):
        progress.advance_to(done)
    assert progress_writes == ["0/1000\n"]
    progress.advance_to(1000)
    progress.finish()
    assert progress_writes == ["0/1000\n", "1000/1000\n"]


def test_the_progress_file_is_readable_by_the_wait_containers_user(tmp_path: Path) -> None:
    """Argo's wait container, maybe another user, reads it (executor.go:monitorProgress)."""
    previous = os.umask(0o077)
    try:
        progress = ProgressFile(tmp_path / "progress", total=10)
        progress.advance_to(10)
        progress.finish()
    finally:
        os.umask(previous)
    assert (tmp_path / "progress").stat().st_mode & 0o777 == 0o644


@pytest.mark.slow  # TensorFlow in a fresh process
def test_tensorflow_loads_silently_with_the_thread_counts_and_no_collection() -> None:
    """Thread variables applied, start-up lines caught whatever TF_CPP_MIN_LOG_LEVEL; the collector off
    during the import, what it made frozen after."""
    code = (
        "import gc\n"
        "from steps.lib.tensorflow_setup import import_keras\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and runs.append(info))\n"
        "import_keras()\n"
        "print(len(runs), gc.isenabled(), gc.get_freeze_count() > 100_000)\n"
        "import tensorflow as tf\n"
        "tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads(),"
        " tf.config.threading.get_inter_op_parallelism_threads())\n"
    )
    threads = {"TF_NUM_INTRAOP_THREADS": "3", "TF_NUM_INTEROP_THREADS": "2"}
    quiet = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    result = run_python(code, env=quiet | threads, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "True", "True", "3", "2"]
    assert result.stderr == ""


def test_a_bad_thread_count_is_the_steps_one_line(tmp_path: Path) -> None:
    from steps.lib.tensorflow_setup import thread_settings

    assert thread_settings({"TF_NUM_INTRAOP_THREADS": " 4 "}) == {"TF_NUM_INTRAOP_THREADS": 4}
    result = subprocess.run(
        [sys.executable, "-m", "steps.train", *train_argv(tmp_path, 1)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TF_NUM_INTEROP_THREADS": "zero"},
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "python -m steps.train: error: "
        "TF_NUM_INTEROP_THREADS must be a whole number in 1..1024, got 'zero'\n"
    )
    assert not (tmp_path / "out").exists()


def test_the_learning_rate_decays_geometrically_over_the_rounds() -> None:
    from steps.lib.schedule import round_learning_rate

    assert round_learning_rate(0.004, 0.001, 1, 2) == 0.004
    assert round_learning_rate(0.004, 0.001, 2, 2) == pytest.approx(0.001)
    assert round_learning_rate(0.004, 0.001, 2, 3) == pytest.approx(0.002)
    assert round_learning_rate(0.004, 0.001, 1, 1) == pytest.approx(0.002)


def numbered_digits(n: int) -> Digits:
    """Digits whose first two pixels spell their index (low byte, high byte)."""
    x = np.zeros((n, 28, 28), np.uint8)
    x[:, 0, 0], x[:, 0, 1] = np.arange(n) % 256, np.arange(n) // 256
    return Digits(x, (np.arange(n) % 10).astype(np.uint8))


def one_pass(batches) -> tuple[list[int], np.ndarray, np.ndarray]:
    """One pass over the batches: (batch sizes, pixels, labels), all batches concatenated."""
    sizes, pixels, labels = [], [], []
    for x, y in batches:
        sizes.append(len(y))
        pixels.append(x.numpy())
        labels.append(y.numpy())
    return sizes, np.concatenate(pixels), np.concatenate(labels)


def test_training_batches_hold_every_digit_once_per_epoch_scaled_as_to_inputs() -> None:
    from steps.lib.keras_model import to_inputs, training_batches

    shard = numbered_digits(300)
    batches = training_batches(shard, 64, seed=3)
    orders = []
    for _ in range(2):
        sizes, pixels, labels = one_pass(batches)
        assert sizes == [64, 64, 64, 64, 44]  # the last batch is the rest, as fit's own batching
        order = np.rint(pixels[:, 0, 0, 0] * PIXEL_MAX) + 256 * np.rint(
            pixels[:, 0, 1, 0] * PIXEL_MAX
        )
        order = order.astype(int)
        assert sorted(order) == list(range(300))
        assert pixels.dtype == np.float32
        np.testing.assert_array_equal(pixels, to_inputs(shard.x[order]))  # the same numbers
        np.testing.assert_array_equal(labels, shard.y[order])
        orders.append(order)
    assert list(orders[0]) != list(orders[1])  # a new order each epoch
    again = one_pass(training_batches(shard, 64, seed=3))[1]
    np.testing.assert_array_equal(again, to_inputs(shard.x[orders[0]]))  # the seed decides
    other = one_pass(training_batches(shard, 64, seed=4))[1]
    assert not np.array_equal(other, again)


@pytest.mark.slow  # trains
def test_a_trainer_reports_every_call_of_many_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress_writes: list[str]
) -> None:
    """Keras calls back once per STEPS_PER_CALL batches with the last one's index in its epoch."""
    from steps.lib.keras_model import STEPS_PER_CALL

    count = 4 * (2 * STEPS_PER_CALL + 3) + 2  # batch 4: two full calls and a short one per epoch
    per_epoch = 2 * STEPS_PER_CALL + 4
    monkeypatch.setenv("ARGO_PROGRESS_FILE", str(tmp_path / "progress"))
    clock = itertools.count(0, 3600)  # every write past the throttle
    monkeypatch.setattr("steps.lib.progress.time", SimpleNamespace(monotonic=lambda: next(clock)))
    argv = train_argv(tmp_path, 2, count=count, batch=4)
    assert run(train.main, train.make_parser(), argv) == 0
    ends = [STEPS_PER_CALL, 2 * STEPS_PER_CALL, per_epoch]
    expected = [0, *ends, *(per_epoch + end for end in ends)]
    assert progress_writes == [f"{done}/{2 * per_epoch}\n" for done in expected]


INFINITE_STEP = "1e39"
DIVERGENCE = {
    "weights only (one batch)": (100, []),
    "the loss too (three batches)": (300, []),
    "with checkpoints (three batches)": (300, ["--checkpoint-key", "c/0.npz"]),
}


@pytest.mark.slow  # trains
@pytest.mark.parametrize("case", list(DIVERGENCE))
def test_a_diverging_trainer_says_so_in_one_line_and_writes_nothing(
    tmp_path: Path, small_mnist: Path, capsys, case: str
) -> None:
    from steps.lib.mnist import load_mnist
    from steps.lib.shards import write_shard

    samples, extra = DIVERGENCE[case]
    train_digits, _ = load_mnist(small_mnist)
    write_shard(tmp_path / "shard.npz", train_digits.take(np.arange(samples)))
    argv = ["--shard", tmp_path / "shard.npz", "--model", copy_model(tmp_path / "start.h5")]
    argv += ["--learning-rate", INFINITE_STEP, "--batch", "100", "--epochs", "1"]
    argv += ["--out", tmp_path / "o/m.h5", "--stats-out", tmp_path / "o/s.json"]
    if extra:
        argv += ["--checkpoint-store", tmp_path / "store", *extra]
    assert run(train.main, train.make_parser(), [str(a) for a in argv]) == 2
    captured = capsys.readouterr()
    *_, last = captured.err.strip().splitlines()
    epoch = next(line for line in captured.out.splitlines() if line.startswith("epoch 1/1: "))
    assert ("loss nan" in epoch) == (samples > 100), epoch  # the path the case is about was taken
    assert last == (
        f"python -m steps.train: error: training diverged on {tmp_path / 'shard.npz'}: its loss or "
        "weights became NaN or infinite; try a smaller --learning-rate"
    )
    assert not (tmp_path / "o").exists()
    assert not list((tmp_path / "store").rglob("*.npz")), "a diverged model was checkpointed"


@pytest.fixture
def trainer_inputs(tmp_path: Path, small_mnist: Path) -> dict:
    from steps.lib.mnist import load_mnist
    from steps.lib.shards import write_shard

    train_digits, _ = load_mnist(small_mnist)
    write_shard(tmp_path / "shard.npz", train_digits.take(np.arange(200)))
    return {
        "shard": tmp_path / "shard.npz",
        "model": copy_model(tmp_path / "start.h5"),
        "store": tmp_path / "store",
        "key": "run/checkpoints/0.npz",
        "epochs": 1,
    }


def forge_checkpoint(inputs: dict, record: dict, weights: list | None = None) -> object:
    """A checkpoint fingerprinted as train's inputs holding `record`; the model it was made for."""
    from steps.lib.keras_model import compile_model, load_model

    model = compile_model(load_model(inputs["model"]), 1e-3)
    model.optimizer.build(model.trainable_variables)
    arrays = {f"w{i}": w for i, w in enumerate(weights or model.get_weights())}
    arrays |= {f"o{i}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
    record.setdefault("inputs", fingerprint_of(inputs))
    path = inputs["store"] / inputs["key"]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, meta=np.array(json.dumps(record)), **arrays)
    return model


def fingerprint_of(inputs: dict) -> str:
    from steps.lib.checkpoint import fingerprint

    return fingerprint(inputs["shard"], inputs["model"], f"{inputs['epochs']} 50 0.001")


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"epochs_done": 99, "logs": {}}, "epochs_done must be an integer in 1..1"),
        ({"epochs_done": "1", "logs": {}}, "epochs_done must be an integer"),
        ({"epochs_done": True, "logs": {}}, "epochs_done must be an integer"),
        ({"epochs_done": 1, "logs": 5}, "logs must be an object"),
        ({"epochs_done": 1, "logs": {"samples": 10**9}}, "logs must be an object of loss"),
        ({"epochs_done": 1, "logs": {"loss": "x"}}, "logs must hold finite, non-negative numbers"),
        # math.isfinite(10**400) raised OverflowError: every retry crashed on the same checkpoint
        ({"epochs_done": 1, "logs": {"loss": 10**400}}, "logs must hold finite, non-negative"),
        (
            {"epochs_done": 1, "logs": {}, "inputs": ["not", "a", "string"]},
            "it was made from other",
        ),
        (
            {"epochs_done": 1, "logs": {}, "history": {"loss": [0.1], "seconds": [1.0]}},
            "its history must hold the columns loss, accuracy",
        ),
        (
            {"epochs_done": 1, "logs": {}, "history": {"loss": [0.1, 0.2], "accuracy": [0.5, 0.6]}},
            "its history has values for 2 epochs, not 1",
        ),
        ({"epochs_done": 1, "logs": {"loss": 0.1}, "nan": True}, "it holds NaN or infinite values"),
    ],
)
def test_a_forged_checkpoint_is_ignored_saying_why(
    record: dict, why: str, trainer_inputs: dict, capsys
) -> None:
    from steps.lib.checkpoint import restore
    from steps.lib.model_file import read_weights

    weights = None
    if record.pop("nan", False):
        weights = read_weights(trainer_inputs["model"])
        weights[2][:] = np.nan
    model = forge_checkpoint(trainer_inputs, record, weights)
    path = trainer_inputs["store"] / trainer_inputs["key"]
    assert restore(model, fingerprint_of(trainer_inputs), 1, path) is None
    assert f"ignoring the stored checkpoint: {why}" in capsys.readouterr().err


def test_a_finished_checkpoint_is_used_and_cannot_change_the_sample_count(
    trainer_inputs: dict, tmp_path: Path, capsys
) -> None:
    forge_checkpoint(trainer_inputs, {"epochs_done": 1, "logs": {"loss": 0.25, "accuracy": 0.5}})
    inputs, out = trainer_inputs, tmp_path / "out"
    argv = [
        *("--shard", inputs["shard"], "--model", inputs["model"], "--epochs", inputs["epochs"]),
        *("--batch", 50, "--learning-rate", 0.001),  # as forge_checkpoint's fingerprint has it
        *("--out", out / "model.h5", "--stats-out", out / "stats.json"),
        *("--checkpoint-store", inputs["store"], "--checkpoint-key", inputs["key"]),
    ]
    code = run(train.main, train.make_parser(), [str(a) for a in argv])
    error = capsys.readouterr().err
    assert code == 0, error
    assert "resuming from checkpoint: 1 epoch(s) done" in error
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats == {"loss": 0.25, "accuracy": 0.5, "epochs": 1, "samples": 200}
    assert list(stats)[-1] == "samples"
