"""The page's report: every error coloured on the confusion picture's own scale (one in a thousand shows),
errors counted per digit, the commonest named; the training curves drawn from the run's history."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from steps.lib import history
from steps.lib.confusion_plot import CELL, MARGIN, draw_confusion
from ui import report, training

WHITE = (255, 255, 255)


def matrix_with(errors: dict[tuple[int, int], int], right: int = 1000) -> np.ndarray:
    matrix = np.diag(np.full(10, right))
    for (true, predicted), count in errors.items():
        matrix[true, predicted] = count
    return matrix


def fill(picture, row: int, column: int) -> tuple[int, int, int]:
    """A cell's colour, read at its corner, away from its count."""
    return picture.getpixel((MARGIN + column * CELL + 3, MARGIN + row * CELL + 3))


def test_every_error_shows_the_commonest_darkest_and_a_single_one_still_tinted() -> None:
    picture = draw_confusion(matrix_with({(3, 5): 20, (7, 1): 1, (4, 9): 5}))
    worst, single, some = fill(picture, 3, 5), fill(picture, 7, 1), fill(picture, 4, 9)
    assert worst[0] > 150 and max(worst[1:]) < 90  # strongly red: 20 of 1020, the worst
    assert single[0] == 255 and max(single[1:]) < 235  # one mistake of 1001: visible
    assert worst[1] < some[1] < single[1]  # the more errors, the darker
    assert fill(picture, 0, 1) == WHITE  # no error: nothing
    right = fill(picture, 2, 2)
    assert right[2] > right[0]  # the right answers in blue
    perfect = draw_confusion(matrix_with({}))
    assert all(fill(perfect, r, c) == WHITE for r in range(10) for c in range(10) if r != c)


def test_errors_per_digit_are_counted_from_the_matrix() -> None:
    errors = report.errors_per_digit(matrix_with({(3, 5): 20, (3, 8): 2, (7, 1): 1}))
    assert errors["misread"].tolist() == [0, 0, 0, 22, 0, 0, 0, 1, 0, 0]
    assert errors.loc["3", "share"] == pytest.approx(22 / 1022)
    assert list(errors.index) == [str(digit) for digit in range(10)]


def test_the_commonest_mistakes_come_first_and_none_is_invented() -> None:
    matrix = matrix_with({(3, 5): 20, (7, 1): 1, (4, 9): 5})
    assert report.commonest_mistakes(matrix, 2) == [(3, 5, 20), (4, 9, 5)]
    assert report.commonest_mistakes(matrix_with({}), 3) == []


def two_rounds() -> dict:
    kept = history.new_history(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    for number, (held, last) in enumerate(((0.95, 0.9), (0.98, 0.97)), start=1):
        record = history.round_record(
            number=number,
            ended_at=dt.datetime(2026, 1, 1, 0, number, tzinfo=dt.UTC),
            seconds=20.0 + number,
            epochs=2,
            held_out={"digits": 1000, "accuracy": held, "loss": 1 - held},
            missing=[],
            workers={
                "0": {"samples": 10, "loss": [0.5, 1 - last], "accuracy": [0.8, last]},
                "1": {"samples": 10},  # a worker whose epochs could not be said
            },
        )
        kept = history.add_round(kept, record)
    return kept


def test_each_epoch_is_drawn_at_its_place_and_the_average_at_each_rounds_end() -> None:
    points = training.curve_points(two_rounds(), "accuracy")
    average = points[points["line"] == training.AVERAGE]
    assert average[["epoch", "value"]].values.tolist() == [[2, 0.95], [4, 0.98]]
    worker = points[points["line"] == "worker 0"]
    assert worker[["round", "epoch", "value"]].values.tolist() == [
        [1, 1, 0.8],
        [1, 2, 0.9],
        [2, 3, 0.8],
        [2, 4, 0.97],
    ]
    assert "worker 1" not in set(points["line"])


def test_the_rounds_are_said_in_a_line() -> None:
    assert training.rounds_line(two_rounds()) == (
        "2 rounds of 2 epochs; held out of training: 1000 digits. "
        "Round 1: 95.00% in 21 s; round 2: 98.00% in 22 s."
    )
