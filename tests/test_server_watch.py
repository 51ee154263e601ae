"""workflows/server/watch.py on runs recorded on a real cluster, replayed by the Argo Server double and
submitted with `--watch`; a killed trainer and progress are watched live in tests/cluster/test_watch_live.py."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.doubles import recordings
from tests.support import docs
from tests.support.argo_double import on_argo, submit, trainer
from tests.support.stories import FIRST_TRY_LINE, MISSING_IMAGE
from tests.support.watch_output import (
    check_retried_trainer,
    lines_of,
    phase,
    phases_of,
    retries_in,
)
from workflows.server.watch import describe, failure, one_line, steps_of

pytestmark = pytest.mark.usefixtures("clean_environment")


def test_a_failed_containers_log_tail_is_shown_by_its_last_line() -> None:
    """A failed step's log tail, in the node's message (FallbackToLogsOnError), is shown by its last line."""
    tail = (  # as the real cluster gave it: the emissary's own lines around the step's
        'time=2026-12-03T13:30:59.954Z level=INFO msg="capturing logs" argo=true\n'
        "training on in/shard.npz (1500 samples)\nepoch 1/1: accuracy 0.41\ntrain: error: bad shard\n"
        'time=2026-12-03T13:31:00.957Z level=INFO msg="sub-process exited" argo=true error="exit status 2"\n'
        "Error: exit status 2\n"
    )
    retry = {"id": "r", "displayName": "train-round-1(1:1)", "type": "Retry", "phase": "Failed"}
    retry |= {"templateName": "train", "children": ["p"], "message": "No more retries left"}
    pod = {"id": "p", "displayName": "train-round-1(1:1)(0)", "type": "Pod", "phase": "Failed"}
    pod |= {"templateName": "train", "message": f"main: Error (exit code 2): {tail}"}
    workflow = {"status": {"phase": "Failed", "nodes": {"r": retry, "p": pod}}}
    assert failure(workflow) == (
        "train-round-1(1:1) failed: main: Error (exit code 2): train: error: bad shard"
    )
    [step] = steps_of(workflow)
    assert "\n" not in describe(step)
    # and the real one: the controller's message of the aggregate that failed in the fail story
    recorded = recordings.load("fail").nodes("aggregate-round-1(0)")[-1]["message"]
    assert recorded.count("\n") > 2 and "argo=true" in recorded, recorded
    [own] = [line for line in recorded.splitlines() if line.startswith("python -m steps.aggregate")]
    assert one_line(recorded) == f"main: Error (exit code 2): {own}"


def test_a_run_goes_ahead_without_a_failed_trainer_when_min_workers_allow(
    watched_run: Callable,
) -> None:
    recording = recordings.load("min-workers")
    code, out, err = watched_run("min-workers")
    assert code == 0, out + err
    for train_round in (1, 2):
        assert phases_of(out, trainer("1", train_round))[-1] == "Failed"
        assert retries_in(lines_of(out, trainer("1", train_round))[-1]) == 2
        assert phases_of(out, trainer("0", train_round))[-1] == "Succeeded"
        assert phases_of(out, f"aggregate-round-{train_round}")[-1] == "Succeeded"
    assert f"test accuracy: {recording.output('evaluate', 'accuracy')}" in out
    assert err == ""


def test_a_retried_trainer_is_watched_as_docs_argo_md_shows_it(watched_run: Callable) -> None:
    """The retry story's lines are those docs/argo.md shows, durations aside."""
    code, out, _ = watched_run("retry")
    failed = f"main: Error (exit code 1): {FIRST_TRY_LINE}"
    check_retried_trainer(code, out, trainer("0"), failed, "15 seconds", every=True)
    section = docs.section(docs.ARGO, "Submit a run and follow it")
    [example] = [body for _, body in docs.code_blocks(section) if "mnist-x7k2p" in body]
    steps = [line for line in example.splitlines() if line.startswith("  ")]
    steps = [line for line in steps if line.split()[0] != "..." and "https://" not in line]
    assert len(steps) >= 15
    printed = {without_duration(line) for line in out.splitlines()}
    for line in steps:
        assert without_duration(line) in printed, line
    name = out.split()[1]
    for line in example.splitlines():
        if line.startswith(("run ", "test accuracy: ")):
            assert line.replace("mnist-x7k2p", name) in out.splitlines(), line


def without_duration(line: str) -> str:
    return re.sub(r"\s+\d+s(?=\s|$)", "", line)


def test_a_step_whose_image_cannot_be_pulled_stops_the_watched_run(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A try that cannot pull its image stops the watched run, as the Argo UI's Stop does."""
    monkeypatch.setattr("workflows.server.watch.STUCK_SECONDS", 0.3)
    recording = recordings.load("cannot-pull")
    double, url = serve(story="cannot-pull")
    on_argo(monkeypatch, url)
    code, out, err = submit(capsys, *recording.flags, "--watch")
    assert code == 1
    [name] = double.runs
    stuck = trainer("0")  # the other trainer waits for the node's CPU, which the stuck pod holds
    pending = [line for line in lines_of(out, stuck) if phase(line) == "Pending"]
    assert f'ImagePullBackOff: Back-off pulling image "{MISSING_IMAGE}"' in pending[-1]
    [stopping] = [line for line in out.splitlines() if line.startswith("stopping ")]
    assert stopping.startswith(f"stopping {name}: {stuck} cannot start: ImagePullBackOff: ")
    [(path, body)] = [(r[1], r[2]) for r in double.requests if r[1].endswith("/stop")]
    assert path == f"/api/v1/workflows/mnist/{name}/stop"
    assert stopping.startswith(f"stopping {name}: {body['message']}")
    shutdown = "workflow shutdown with strategy:  Stop"
    assert err.splitlines() == [
        "submit: the run was stopped (Stopped with strategy 'Stop'); nothing after it ran"
    ]
    for step in (trainer("0"), trainer("1")):
        last = lines_of(out, step)[-1]
        assert phase(last) == "Failed" and last.endswith(f"  {shutdown}"), last
    assert f"\nrun {name} Failed in " in out
    assert "publish" not in out and "test accuracy" not in out
