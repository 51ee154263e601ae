"""The runs the watch is tested on, each a real run on a cluster: recorded for the Argo Server
double (tests/doubles/record_runs.py) and watched live (tests/cluster/test_watch_live.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tests.support.faults import with_failing_shard
from workflows.pipeline.settings import PipelineSettings, defaults, from_arguments
from workflows.pipeline.workflow import compile_workflow
from workflows.submit import make_parser

# The step's own last line before the kernel kills it: the watch shows it after the node's message.
OOM_LINE = "train: holding 4 GiB, past the container memory limit of 3Gi"
# More than the train template's 3Gi limit, written so every page is touched (bytes * n fills them).
OOM = f"echo '{OOM_LINE}' >&2; python -c 'b\"x\" * (4 << 30)'; exit $?"
# The log's last line of a trainer the kernel killed: the shell's own word for a child ended by SIGKILL.
OOM_LAST_LINE = "Killed"
FIRST_TRY_LINE = "train: this first try ends here with exit code 1"
MISSING_IMAGE = "localhost/mnist-argo-missing:0"
SEEDED = ("--seed", "0", "--serve", "never")  # the same shards and starting weights every time
QUICK = ("--epochs", "1", "--batch", "32", "--limit", "3000", *SEEDED)


def first_try_fails(after_seconds: int) -> str:
    """A fault for one shard: its first try trains for at most AFTER_SECONDS (0: not at all), keeping no
    checkpoint (an empty --checkpoint-store, given last, turns it off), then ends with exit code 1; the
    next try trains from the start (`{{retries}}` is the try's number, 0 first)."""
    train = f"timeout {after_seconds} python -m steps.train \"$@\" --checkpoint-store ''; "
    return (
        f"if [ {{{{retries}}}} = 0 ]; then {train if after_seconds else ''}"
        f"echo '{FIRST_TRY_LINE}' >&2; exit 1; fi"
    )


@dataclass(frozen=True)
class Story:
    """A run: its settings as submit.py flags, and the fault put into its workflow, if any."""

    name: str
    about: str
    flags: tuple[str, ...]
    failing_shard: str = ""  # the shard whose trainer runs `fault` first
    fault: str = ""
    train_image: str = ""  # instead of the cluster's train image
    stop_stuck_after: float = 0.0  # seconds a try waits for its image before the run is stopped

    def settings(self, where: Mapping[str, str]) -> PipelineSettings:
        """The settings the flags give, with the cluster's store, MNIST and images (WHERE: its env)."""
        arguments = [
            *("--artifacts", where["ARTIFACTS"], "--source", where["MNIST_SOURCE"]),
            *("--image", where["STEPS_IMAGE"]),
            *("--train-image", self.train_image or where["TRAIN_IMAGE"]),
            *self.flags,
        ]
        return from_arguments(make_parser(defaults({})).parse_args(arguments))

    def workflow(self, where: Mapping[str, str]) -> dict:
        """The compiled workflow with this story's fault in it, if any."""
        workflow = compile_workflow(self.settings(where))
        return (
            with_failing_shard(workflow, self.failing_shard, self.fault) if self.fault else workflow
        )


FAIL = Story(
    "fail",
    "2 workers, 2 rounds; shard 1's trainer is OOM-killed on every try, so round 1's aggregate fails "
    "(every worker must deliver)",
    ("--workers", "2", "--rounds", "2", "--min-workers", "0", *QUICK),
    failing_shard="1",
    fault=OOM,
)
# Long enough for the controller to take two progress reports from each try at Argo's default tick (a minute)
LONG = ("--epochs", "8", "--batch", "32", "--limit", "0", *SEEDED)
STORIES = {
    story.name: story
    for story in (
        Story(
            "succeed",
            "a run of 3 workers and 2 rounds that succeeds, not served (--serve never)",
            ("--workers", "3", "--rounds", "2", *QUICK),
        ),
        FAIL,
        replace(
            FAIL,
            name="min-workers",
            about="the fail story with --min-workers 1: the run goes ahead without shard 1",
            flags=("--workers", "2", "--rounds", "2", "--min-workers", "1", *QUICK),
        ),
        Story(
            "retry",
            "1 worker (the node has room for one trainer at a time), 1 round of a long trainer; its "
            "first try trains 150 s, then ends with exit code 1, and its retry trains from the start",
            ("--workers", "1", "--rounds", "1", *LONG),
            failing_shard="0",
            fault=first_try_fails(150),
        ),
        Story(
            "cannot-pull",
            f"2 workers, 1 round; the trainers' image {MISSING_IMAGE} cannot be pulled, and the "
            "run is stopped after its trainers waited 20 s for it",
            ("--workers", "2", "--rounds", "1", *QUICK),
            train_image=MISSING_IMAGE,
            stop_stuck_after=20.0,
        ),
    )
}
