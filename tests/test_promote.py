"""Promoting a kept run to the served model anyway (steps.promote), with the command the end of a run
prints when publish's --serve policy kept it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steps.lib.entry_point import run
from steps.lib.registry import LATEST_KEY, run_prefix
from tests.support.steps import FULL_RUN as FULL
from tests.support.steps import call, latest, publish_as


def test_a_kept_run_is_served_with_the_command_publish_printed(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from steps import promote

    publish_as(full_run_served, "mnist-quick", 0.7290, capsys=capsys)
    store = full_run_served / "store"
    code = run(promote.main, promote.make_parser(), ["mnist-quick", "--store", str(store)])
    out, error = capsys.readouterr()
    assert code == 0, error
    assert latest(full_run_served) == "mnist-quick"
    assert f"{LATEST_KEY} → mnist-quick" in out and f"was {FULL}" in out
    card = json.loads((store / run_prefix("mnist-quick") / "run.json").read_text())
    assert card["accuracy"] == 0.7290


def test_promoting_a_run_that_is_not_published_is_refused(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from steps import promote

    store = full_run_served / "store"
    line = call(promote, ["mnist-nope1", "--store", store], capsys)
    assert "no run mnist-nope1 is published" in line
    (store / run_prefix("mnist-broke")).mkdir()
    (store / run_prefix("mnist-broke") / "run.json").write_text("{}")
    (store / run_prefix("mnist-broke") / "model.h5").write_bytes(b"not a model")
    line = call(promote, ["mnist-broke", "--store", store], capsys)
    assert "mnist-broke" in line
    assert latest(full_run_served) == FULL


def test_the_end_of_a_run_says_what_publish_decided_in_one_line() -> None:
    from steps.lib.defaults import STORE
    from workflows.run_end import serving_lines

    assert serving_lines("mnist-a", STORE, "true", "no model was served") == [
        "served: models/mnist/LATEST → mnist-a (no model was served)"
    ]
    [line] = serving_lines("mnist-a", "gs://bucket", "false", "--serve never")
    assert line.startswith("not served: --serve never; to serve it anyway: ")
    assert line.endswith("-m steps.promote mnist-a --store gs://bucket")
    [line] = serving_lines("mnist-a", STORE, "false", "--serve never")
    assert line.endswith("-m steps.promote mnist-a"), "the default store goes without saying"
    assert serving_lines("mnist-a", STORE, None, None) == [], "a publish without these outputs"
