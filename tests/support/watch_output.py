"""What `submit.py --watch` printed, read, and the watch's rules for the stories checked on it: offline on
a recording's replay, where the watch saw every status (`every=True`), and live on a cluster."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

PROGRESS = " progress "
BACKOFF = "Backoff for "


def lines_of(out: str, step: str) -> list[str]:
    """The lines about STEP, in order."""
    return [line for line in out.splitlines() if line.split()[:1] == [step]]


def phase(line: str) -> str:
    return line.split()[1]


def phases_of(out: str, step: str) -> list[str]:
    """The step's phases as the watch printed them: every line of it but its progress lines."""
    return [phase(line) for line in lines_of(out, step) if PROGRESS not in line]


def progress_value(line: str) -> str:
    return line.split(PROGRESS)[1].split()[0]


def progress_of(out: str, step: str) -> list[str]:
    """The progress values printed for STEP, in order."""
    return [progress_value(line) for line in lines_of(out, step) if PROGRESS in line]


def steps_in(out: str) -> list[str]:
    """Every step the watch printed a line about, in the order each first appeared."""
    names: list[str] = []
    for line in out.splitlines():
        words = line.split()
        if line.startswith("  ") and words and not words[0].startswith("http"):
            names += [words[0]] if words[0] not in names else []
    return names


def tries_of(out: str, step: str) -> list[list[str]]:
    """A step's lines, one list per try, cut after each wait for a retry (Running, with the backoff)."""
    tries: list[list[str]] = [[]]
    for line in lines_of(out, step):
        tries[-1].append(line)
        if PROGRESS not in line and phase(line) == "Running" and BACKOFF in line:
            tries.append([])
    return tries


def collapsed(items: Iterable[str]) -> list[str]:
    """ITEMS with each run of equal ones as one."""
    kept: list[str] = []
    for item in items:
        if kept[-1:] != [item]:
            kept.append(item)
    return kept


def in_order(printed: list[str], expected: list[str], every: bool) -> bool:
    """EVERY: PRINTED is EXPECTED; otherwise some of it, in its order, ending as it ends."""
    if every:
        return printed == expected
    rest = iter(expected)
    return bool(printed) and printed[-1] == expected[-1] and all(p in rest for p in printed)


def counted(retries: int) -> str:
    """How a line counts a step's retries (watch.py, describe)."""
    return f"  {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""


def retries_in(line: str) -> int:
    """The retries a line counts (0 when it counts none)."""
    words = line.split()
    for number, word in itertools.pairwise(words):
        if word in ("retry", "retries") and number.isdigit():
            return int(number)
    return 0


def check_try(lines: list[str], phases: list[str], retries: int, every: bool) -> None:
    """One try's lines: its phases in order, each counting the retries before it."""
    shown = collapsed(phase(line) for line in lines if PROGRESS not in line)
    assert in_order(shown, phases, every), lines
    assert [retries_in(line) for line in lines] == [retries] * len(lines), lines


def check_failed_trainer(
    code: int, out: str, err: str, failing: str, failed: str, backoffs: list[str], every: bool
) -> None:
    """A trainer failing every try: each try's phases, each wait saying why and how long, the step
    Failed with its retries counted, the failure one stderr line, and nothing run after the round."""
    assert code == 1, out + err
    assert err.splitlines() == [f"submit: {failing} failed: {failed}"], err
    tries = tries_of(out, failing)
    assert len(tries) == len(backoffs) + 1, lines_of(out, failing)
    for retries, (lines, backoff) in enumerate(zip(tries, backoffs, strict=False)):
        check_try(lines, ["Pending", "Running"], retries, every)  # its wait is Running too
        assert lines[-1].endswith(f"{counted(retries)}  {failed}; {BACKOFF}{backoff}"), lines
    check_try(tries[-1], ["Pending", "Running", "Failed"], len(backoffs), every)
    assert tries[-1][-1].endswith(f"{counted(len(backoffs))}  {failed}"), tries[-1]
    assert phases_of(out, "aggregate-round-1")[-1] == "Failed"
    assert "train-round-2" not in out and "test accuracy" not in out


def check_retried_trainer(
    code: int, out: str, retried: str, failed: str, backoff: str, every: bool
) -> None:
    """A trainer whose first try fails: its wait says why and how long, the second try Succeeds."""
    assert code == 0, out
    first, second = tries_of(out, retried)
    check_try(first, ["Pending", "Running"], 0, every)
    assert first[-1].endswith(f"  {failed}; {BACKOFF}{backoff}"), first
    check_try(second, ["Pending", "Running", "Succeeded"], 1, every)
    others = [line for line in out.splitlines() if "retr" in line and retried not in line]
    assert others == []


def check_progress_rises(out: str, trainers: list[str]) -> None:
    """Each try's progress printed once per value, rising; none for a step that is no trainer."""
    for step in trainers:
        for lines in tries_of(out, step):
            values = [progress_value(line).split("/") for line in lines if PROGRESS in line]
            done = [int(value[0]) for value in values]
            assert done == sorted(set(done)), lines
            assert len({value[1] for value in values}) <= 1, lines
    for step in set(steps_in(out)) - set(trainers):
        assert progress_of(out, step) == [], step
