"""The run's history: workers' epochs, each round's average scored on held-out digits and timed, and
the checks every reader applies to it (the page reads it from the store, untrusted)."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from steps import aggregate, evaluate, init
from steps.lib import history
from steps.lib.entry_point import run
from steps.lib.mnist import Digits
from steps.lib.published import BadRunFile
from steps.lib.shards import write_shard
from tests.support.steps import call, copy_model

HELD_OUT = 300


def epochs(loss: list[float], accuracy: list[float]) -> dict:
    return {"loss": loss, "accuracy": accuracy}


def worker(folder: Path, shard: str, samples: int, trained: dict | None) -> None:
    copy_model(folder / f"{shard}.h5")
    stats = {"loss": 0.5, "accuracy": 0.8, "epochs": 2, "samples": samples}
    if trained is not None:
        stats = {"history": trained, **stats}
    (folder / f"{shard}.json").write_text(json.dumps(stats))


@pytest.fixture
def models(tmp_path: Path) -> Path:
    """The round's folder of models and stats, as aggregate reads it."""
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


@pytest.fixture
def held_out(mnist: dict[str, np.ndarray], tmp_path: Path) -> Path:
    path = tmp_path / "validation.npz"
    write_shard(path, Digits(mnist["x_train"][:HELD_OUT], mnist["y_train"][:HELD_OUT]))
    return path


def started(tmp_path: Path, seconds_ago: float) -> Path:
    path = tmp_path / "start.json"
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    path.write_text(json.dumps(history.new_history(moment)))
    return path


def aggregate_round(folder: Path, number: int, previous: Path, held_out: Path, capsys) -> dict:
    out = folder / f"round-{number}"
    argv = ["--models-dir", folder / "models", "--out", out / "model.h5", "--round", number]
    argv += ["--validation", held_out, "--history", previous]
    argv += ["--history-out", out / "history.json", "--plot-out", out / "history.png"]
    code = run(aggregate.main, aggregate.make_parser(), [str(a) for a in argv])
    assert code == 0, capsys.readouterr().err
    return json.loads((out / "history.json").read_text())


def test_aggregate_adds_the_round_the_average_scored_on_the_held_out_digits_and_timed(
    tmp_path: Path, models: Path, held_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker(models, "0", 100, epochs([1.2, 0.6], [0.6, 0.81]))
    worker(models, "1", 300, epochs([1.1, 0.5], [0.62, 0.84]))
    written = aggregate_round(tmp_path, 1, started(tmp_path, 5), held_out, capsys)

    (record,) = written["rounds"]
    assert record["round"] == 1 and record["epochs"] == 2 and record["missing"] == []
    assert record["workers"] == {
        "0": {"samples": 100, **epochs([1.2, 0.6], [0.6, 0.81])},
        "1": {"samples": 300, **epochs([1.1, 0.5], [0.62, 0.84])},
    }
    assert record["seconds"] >= 5  # from the run's start: its first round
    # the held-out score is the averaged model's, as evaluate scores it on the same digits
    scored = tmp_path / "scored"
    argv = ["--model", tmp_path / "round-1/model.h5", "--test", held_out, "--out-dir", scored]
    assert run(evaluate.main, evaluate.make_parser(), [str(a) for a in argv]) == 0
    metrics = json.loads((scored / "metrics.json").read_text())
    assert record["held_out"] == {
        "digits": HELD_OUT,
        "accuracy": round(metrics["accuracy"], history.DIGITS),
        "loss": round(metrics["loss"], history.DIGITS),
    }
    out = capsys.readouterr().out
    assert out.startswith(f"round 1: the average scores {metrics['accuracy']:.2%} on {HELD_OUT} ")
    assert "0: 81.00% (loss 0.6000), 1: 84.00% (loss 0.5000)" in out
    with Image.open(tmp_path / "round-1/history.png") as picture:
        assert picture.format == "PNG" and picture.width >= 600


def test_the_next_round_is_added_after_the_first_and_timed_from_its_end(
    tmp_path: Path, models: Path, held_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker(models, "0", 100, epochs([1.0, 0.5], [0.6, 0.8]))
    first = aggregate_round(tmp_path, 1, started(tmp_path, 3600), held_out, capsys)
    second = aggregate_round(tmp_path, 2, tmp_path / "round-1/history.json", held_out, capsys)
    assert [r["round"] for r in second["rounds"]] == [1, 2]
    assert second["rounds"][0] == first["rounds"][0]
    assert first["rounds"][0]["seconds"] >= 3600
    assert 0 <= second["rounds"][1]["seconds"] < 600  # since round 1 ended, not since the start
    again = aggregate_round(tmp_path, 2, tmp_path / "round-2/history.json", held_out, capsys)
    assert [r["round"] for r in again["rounds"]] == [1, 2]  # a rerun round replaces its own record
    assert second["started_at"] == first["started_at"]


def test_a_worker_whose_stats_hold_no_usable_epochs_still_counts(
    tmp_path: Path, models: Path, held_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker(models, "0", 100, None)  # a trainer resumed from a checkpoint without its epochs
    worker(models, "1", 100, epochs([0.6, 0.5], [0.5, 1.5]))  # an accuracy over 1
    worker(models, "2", 100, epochs([0.6], [0.5]))  # one epoch of the two its stats say
    written = aggregate_round(tmp_path, 1, started(tmp_path, 1), held_out, capsys)
    assert written["rounds"][0]["workers"] == {f"{i}": {"samples": 100} for i in range(3)}
    error = capsys.readouterr().err
    assert "leaving 1.json's epochs out of the history: its history's accuracy must be" in error
    assert (
        "leaving 2.json's epochs out of the history: its history has values for 1 epochs" in error
    )


def test_an_unusable_history_starts_anew_and_the_round_is_still_averaged(
    tmp_path: Path, models: Path, held_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker(models, "0", 100, epochs([1.0], [0.6]))
    broken = tmp_path / "broken.json"
    broken.write_text('{"started_at": "yesterday", "rounds": []}')
    written = aggregate_round(tmp_path, 2, broken, held_out, capsys)
    assert [r["round"] for r in written["rounds"]] == [2]
    assert written["rounds"][0]["seconds"] is None
    assert "starting a new history" in capsys.readouterr().err
    assert (tmp_path / "round-2/model.h5").is_file()


def test_init_writes_the_history_a_run_starts_from(tmp_path: Path) -> None:
    before = dt.datetime.now(dt.UTC)
    argv = ["--out", tmp_path / "model.h5", "--history-out", tmp_path / "history.json"]
    assert run(init.main, init.make_parser(), [str(a) for a in argv]) == 0
    written = history.read_history((tmp_path / "history.json").read_bytes())
    assert written["rounds"] == []
    assert before <= dt.datetime.fromisoformat(written["started_at"]) <= dt.datetime.now(dt.UTC)


def a_round(number: int, workers: int, epochs_each: int) -> dict:
    curves = epochs([0.5] * epochs_each, [0.9] * epochs_each)
    return history.round_record(
        number=number,
        ended_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        seconds=10.0,
        epochs=epochs_each,
        held_out={"digits": 1000, "accuracy": 0.97, "loss": 0.1},
        missing=[],
        workers={str(i): {"samples": 100, **curves} for i in range(workers)},
    )


def test_a_history_over_its_bound_leaves_out_the_oldest_rounds_workers_first() -> None:
    kept = history.new_history(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    for number in range(1, 11):
        kept = history.add_round(kept, a_round(number, workers=4, epochs_each=20), limit=8_000)
    assert len(json.dumps(kept)) <= 8_000
    assert [r["round"] for r in kept["rounds"]] == list(range(1, 11))  # every round's score stays
    with_workers = [r["round"] for r in kept["rounds"] if r["workers"]]
    assert with_workers and with_workers == list(range(11 - len(with_workers), 11))
    assert all(r["held_out"]["accuracy"] == 0.97 for r in kept["rounds"])
    assert history.check_history(kept) == kept


def valid() -> dict:
    kept = history.new_history(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    return history.add_round(kept, a_round(1, workers=2, epochs_each=2))


def changed(path: str, value: object) -> dict:
    """valid() with the field at `path` (dotted; numbers index lists) set to `value`."""
    document = valid()
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target[int(part) if isinstance(target, list) else part]
    target[int(last) if isinstance(target, list) else last] = value
    return document


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ([], "history.json is not a JSON object"),
        (changed("started_at", "soon"), "history.json's started_at is not an ISO 8601 time"),
        (changed("rounds", {}), "history.json's rounds must be a list of at most"),
        (changed("rounds.0.round", 0), "history.json's round must be an integer in 1.."),
        (changed("rounds.0.seconds", -1), "history.json's seconds must be a finite number"),
        (changed("rounds.0.held_out.accuracy", 2), "held-out accuracy must be a number in [0, 1]"),
        (changed("rounds.0.held_out.loss", "x"), "held-out loss must be a finite number"),
        (changed("rounds.0.missing", [1]), "missing must be a list of shard ids"),
        (changed("rounds.0.workers", []), "workers must map shard ids to their epochs"),
        (
            changed("rounds.0.workers", {"<b>0</b>": {"samples": 1}}),
            "workers must map shard ids to their epochs",
        ),
        (changed("rounds.0.workers.0.loss", [0.1]), "worker 0's columns differ in length"),
        (changed("rounds.0.workers.0.accuracy", [0.5, 10**400]), "worker 0's accuracy must be"),
        (changed("rounds.0.workers.0.samples", 0), "worker 0's samples must be an integer in 1.."),
        (
            changed("rounds.0.workers.0", {"samples": 1, **epochs([0.1] * 3, [0.5] * 3)}),
            "worker 0 has more epochs than the round's 2",
        ),
    ],
)
def test_a_malformed_history_is_refused_with_its_reason(document: object, why: str) -> None:
    with pytest.raises(BadRunFile) as refused:
        history.check_history(document)
    assert why in str(refused.value)


def test_a_history_over_its_bytes_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(BadRunFile, match=r"^history\.json is over"):
        history.read_history(b" " * (history.MAX_HISTORY_BYTES + 1))


def test_the_history_picture_draws_every_round_and_worker() -> None:
    kept = history.new_history(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    for number in (1, 2, 3):
        kept = history.add_round(kept, a_round(number, workers=3, epochs_each=2))
    from steps.lib.history_plot import draw_history

    picture = draw_history(kept)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    assert picture.mode == "RGB" and len(buffer.getvalue()) < 200_000
    empty = draw_history(history.new_history(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)))
    assert empty.size == picture.size


def test_aggregate_refuses_a_plot_without_the_history_it_draws(
    tmp_path: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker(models, "0", 100, None)
    argv = ["--models-dir", models, "--out", tmp_path / "m.h5", "--plot-out", tmp_path / "h.png"]
    line = call(aggregate, argv, capsys)
    assert line.endswith("--plot-out draws the history: give --history-out too")
    assert not (tmp_path / "m.h5").exists()
