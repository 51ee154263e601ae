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
def test_a_failed_run_exits_1_its_whole_seconds_said_whole_and_why_it_failed(
    seconds: float | None, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ended = RunEnd("mnist-b", "Failed", seconds, failure="train failed: exit code 2", notes=("x",))
    assert report(ended, STORE) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[1:] == [f"run mnist-b Failed{said}"], "no accuracy, no notes"
    assert err == "submit: train failed: exit code 2\n"
    report(RunEnd("mnist-c", "Error", 5.0), STORE)
    assert capsys.readouterr().err == "submit: the run did not succeed\n"
