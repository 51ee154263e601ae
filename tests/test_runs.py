"""submit.py --list, --compare and --retry (workflows/runs.py): on a folder store, on GCS (the
emulator) and on the Argo Server double (tests/doubles/argo_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.lib.storage import open_store
from tests.doubles import recordings
from tests.doubles.argo_server import ArgoDouble
from tests.support.runs import CUT, OLD, SERVED, fill
from workflows.submit import main


def submit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.fixture
def folder_store(tmp_path: Path) -> str:
    fill(open_store(tmp_path))
    return str(tmp_path)


def test_list_newest_first_with_the_served_run(
    folder_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = submit(capsys, "--artifacts", folder_store, "--list")
    assert (code, err) == (0, "")
    header, cut, served, old = lines
    assert header.split()[:3] == ["run", "started", "(UTC)"]
    assert cut.split() == (
        f"{CUT} 2026-12-01 11:00 unfinished: round 2 training — --workers 2 --epochs 1".split()
    )
    assert (
        served.split() == f"{SERVED} 2026-12-01 10:00 published 98.71% LATEST --workers 2".split()
    )
    assert old.split()[3:] == ["published", "96.12%", "--epochs", "1"]


def test_compare_two_runs_side_by_side(
    folder_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = submit(capsys, "--artifacts", folder_store, "--compare", OLD, CUT)
    rows = {line.split("  ")[0]: line.split() for line in lines[1:]}
    assert code == 0 and lines[0].split() == [OLD, CUT]
    assert rows["test accuracy"][2:] == ["96.12%", "—"]
    assert rows["workers"][1:] == ["3", "2", "*"]
    assert rows["batch"][1:] == ["100", "—"]  # not said by a run that was not published
    assert rows["round 1 held out"][4:] == ["90.00%", "in", "30", "s", "93.00%", "in", "30", "s"]
    assert rows["round 2 held out"][4:] == ["95.00%", "in", "30", "s", "—"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--compare", OLD, "mnist-none1"), "holds no run 'mnist-none1'"),
        (("--list",), "no store at"),
        (("--retry", SERVED), f"run {SERVED} succeeded (it is published)"),
        (("--retry", CUT), f"no local run {CUT} to retry in"),
    ],
)
def test_refusals_are_one_line(
    args: tuple[str, ...], said: str, folder_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = folder_store if args[0] != "--list" else f"{folder_store}/none"
    code, lines, err = submit(capsys, "--artifacts", store, *args)
    assert (code, lines) == (2, [])
    assert err.count("\n") == 1 and said in err, err


def test_list_a_bucket(gcs_bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    fill(open_store(f"gs://{gcs_bucket}"))
    code, lines, _ = submit(capsys, "--artifacts", f"gs://{gcs_bucket}", "--list")
    assert code == 0 and [line.split()[0] for line in lines[1:]] == [CUT, SERVED, OLD]
    code, _, err = submit(capsys, "--artifacts", "gs://no-such-bucket", "--list")
    assert code == 2 and err.strip().endswith("the bucket does not exist"), err


def run_story(argo: ArgoDouble, story: str, name: str, bucket: str) -> None:
    """A run of the story's recording, named `name`, at its end."""
    argo.story = story
    image = ("--image", "registry.example/steps:1", "--train-image", "registry.example/train:1")
    assert main(["--artifacts", bucket, *image, *recordings.load(story).flags, "--name", name]) == 0
    argo.runs[name].reads = argo.max_reads // 2  # read at its end


@pytest.mark.usefixtures("clean_environment")
def test_on_a_cluster_the_servers_runs(
    argo: ArgoDouble, gcs_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = f"gs://{gcs_bucket}"
    run_story(argo, "succeed", SERVED, bucket)
    run_story(argo, "fail", CUT, bucket)
    fill(open_store(bucket))  # what the runs left there: LATEST and the rounds' history
    capsys.readouterr()
    code, lines, _ = submit(capsys, "--artifacts", bucket, "--list")
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    accuracy = float(recordings.load("succeed").output("evaluate", "accuracy") or 0)
    assert code == 0 and sorted(rows) == [CUT, SERVED]
    assert rows[SERVED][3:6] == ["Succeeded", f"{accuracy:.2%}", "LATEST"]
    assert (
        rows[CUT][3:5] == ["Failed", "—"]
        and "--workers 2 --epochs 1" in lines[1 + list(rows).index(CUT)]
    )
    code, lines, err = submit(capsys, "--artifacts", bucket, "--compare", SERVED, CUT)
    assert code == 0, err
    assert any(line.startswith("round 1 held out") for line in lines)
    assert next(line for line in lines if line.startswith("workers")).split()[1:] == ["3", "2", "*"]
    # a retry on the server: tests/cluster/test_retry.py
    code, _, err = submit(capsys, "--retry", "mnist-none1")
    assert code == 2 and err.count("\n") == 1 and "holds no such run" in err
