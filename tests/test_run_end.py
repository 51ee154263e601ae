"""workflows/run_end.py: the lines that end a run, the same for a local run and a watched cluster run
(publish's `served` and `reason` lines: tests/test_publish.py)."""

from __future__ import annotations

import pytest

from steps.lib.defaults import STORE
from workflows.run_end import RunEnd, report


def test_a_run_that_succeeded_ends_with_its_accuracy_and_what_publish_decided(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ended = RunEnd("mnist-a", "Succeeded", 30.25, accuracy="0.9912", served="true", reason="first")
    assert report(ended, STORE) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1:] == [
        "run mnist-a Succeeded in 30.2s",
        "test accuracy: 0.9912",
        "served: models/mnist/LATEST → mnist-a (first)",
    ]
    assert err == ""


@pytest.mark.parametrize(("seconds", "said"), [(360.0, " in 360s"), (0.04, " in 0s"), (None, "")])
def test_a_cluster_runs_whole_seconds_are_said_whole(
    seconds: float | None, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report(RunEnd("mnist-b", "Failed", seconds, failure="train failed: exit code 2"), STORE)
    out, err = capsys.readouterr()
    assert out.splitlines()[1] == f"run mnist-b Failed{said}"
    assert err == "submit: train failed: exit code 2\n"


def test_a_run_that_failed_exits_1_and_says_nothing_of_accuracy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert report(RunEnd("mnist-c", "Error", 5.0, notes=("logs: x",)), STORE) == 1
    out, err = capsys.readouterr()
    assert "accuracy" not in out and "logs" not in out
    assert err == "submit: the run did not succeed\n"
