"""`submit.py --watch` on the real cluster for the stories the offline tests replay, checked by the same
rules (tests/support/watch_output.py); polling once a second, it may miss a short state."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cluster import Cluster
from tests.support.project import ROOT
from tests.support.stories import (
    FIRST_TRY_LINE,
    OOM_LAST_LINE,
    SEEDED,
    STORIES,
    Story,
    first_try_fails,
)
from tests.support.watch_output import (
    check_failed_trainer,
    check_progress_rises,
    check_retried_trainer,
    progress_of,
)

pytestmark = pytest.mark.cluster
WARNING = "submit: warning: "

# The retry story, shorter: its first try ends at once, and the retry trains for about a minute, long
# enough for the controller to take several progress reports (the executor sends one every
# PROGRESS_REPORT_TIME, infra/gke/lib.sh: 10 s).
RETRY = Story(
    "retry-live",
    "1 worker, 1 round; the first try ends at once with exit code 1, the retry trains",
    ("--workers", "1", "--rounds", "1", "--epochs", "4", "--batch", "32", "--limit", "0", *SEEDED),
    failing_shard="0",
    fault=first_try_fails(0),
)


def watched(cluster: Cluster, story: Story) -> tuple[int, str, str]:
    """`submit.py --watch` of STORY on the cluster to its end; stderr without the image warnings."""
    flags = cluster.submit_arguments(*story.flags, "--watch", "--poll-seconds", "1")
    command = [sys.executable, "-m", "tests.support.story_submit", story.failing_shard, story.fault]
    done = subprocess.run(
        [*command, *flags],
        env=cluster.process_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    errors = [line for line in done.stderr.splitlines(True) if not line.startswith(WARNING)]
    return done.returncode, done.stdout, "".join(errors)


def test_a_trainer_killed_on_every_try_fails_the_watched_run(cluster: Cluster) -> None:
    code, out, err = watched(cluster, STORIES["fail"])
    killed = f"main: OOMKilled (exit code 137): {OOM_LAST_LINE}"
    backoffs = ["15 seconds", "30 seconds"]
    check_failed_trainer(code, out, err, "train-round-1(1:1)", killed, backoffs, every=False)
    check_progress_rises(out, ["train-round-1(0:0)", "train-round-1(1:1)"])


def test_a_retried_trainer_shows_its_retry_and_its_progress(cluster: Cluster) -> None:
    code, out, err = watched(cluster, RETRY)
    failed = f"main: Error (exit code 1): {FIRST_TRY_LINE}"
    retried = "train-round-1(0:0)"
    check_retried_trainer(code, out, retried, failed, "15 seconds", every=False)
    check_progress_rises(out, [retried])
    assert progress_of(out, retried), out
    assert err == ""
