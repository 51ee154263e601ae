"""workflows/server/watch.py's reading of a run: a failed step's own last line, from the controller's message
of a real run (tests/doubles/recordings). The watch of whole recorded runs is in tests/test_submit.py."""

from __future__ import annotations

from tests.doubles import recordings
from workflows.server.watch import describe, failure, one_line, steps_of


def test_a_failed_containers_log_tail_is_shown_by_its_last_line() -> None:
    """The kubelet makes a failed step's log tail its termination message (FallbackToLogsOnError), which
    the controller appends to the node's message: the watch and the failure show its last line, where a
    step says what went wrong, as the local runner does."""
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
