"""The pipeline's settings, each declared once (default, meaning, parser, variable, choices); submit.py's
flags, the workflow's parameters and the README's settings table are made from these."""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from steps.lib import defaults as step_defaults
from steps.lib.arguments import fraction, non_negative_int, positive_float, positive_int, seed
from steps.lib.defaults import STORE as DEFAULT_STORE
from steps.lib.promotion import POLICIES
from steps.lib.published import MAX_SETTING_TEXT
from steps.lib.shards import PARTITIONS

SETTING = "setting"
# The most tasks one DAG may hold: Argo v4.1.4's CRD, DAGTemplate.Tasks +kubebuilder:validation:MaxItems=200
# (pkg/apis/workflow/v1alpha1/workflow_types.go:3595); the API server refuses a Workflow with more.
DAG_TASKS_MAX = 200
# The pipeline's DAG: split, init, evaluate and publish, and a train and an aggregate task per round.
RUN_TASKS, ROUND_TASKS = 4, 2
MAX_ROUNDS = (DAG_TASKS_MAX - RUN_TASKS) // ROUND_TASKS
# Argo's template tags: in a setting's text Argo would substitute them, and evaluate `{{=…}}`.
TAG_START, TAG_END = "{{", "}}"
# The wait before a retry, as the README gives it: whole seconds, or Go's h, m and s units in that order
# (a subset of what Argo reads, wfv1.ParseStringToDuration; the server's lint judges the rest).
DURATION = re.compile(r"[0-9]+|(?=[0-9])([0-9]+h)?([0-9]+m)?([0-9]+s)?")


@dataclass(frozen=True)
class Setting:
    """How one field of PipelineSettings is offered to people."""

    help: str
    parse: Callable[[str], Any]
    env: str | None = None
    choices: tuple[str, ...] = ()
    parameter: bool = True  # a workflow parameter; False: compiled into the workflow's shape
    # a parameter the Submit form shows but cannot change (an enum of its value)
    pinned: bool = False
    flag: str = ""  # default: --<name with dashes>
    shown_default: str = ""  # how the README shows the default, when not the value itself


def setting(default: Any, help: str, parse: Callable[[str], Any], **options: Any) -> Any:
    return field(default=default, metadata={SETTING: Setting(help, untagged(parse), **options)})


def untagged(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse`, refusing first any `{{` or `}}`, which Argo would substitute (common/util.go)."""

    @functools.wraps(parse)
    def checked(text: str) -> Any:
        if TAG_START in text or TAG_END in text:
            raise argparse.ArgumentTypeError(
                f"Argo would read {TAG_START} or {TAG_END} in it as a template tag (and evaluate "
                f"{TAG_START}=…{TAG_END}): leave them out"
            )
        return parse(text)

    return checked


def duration(text: str) -> str:
    """argparse type: a wait such as 15s, 1m30s, 2h or 30 (seconds)."""
    if not DURATION.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: whole seconds (30) or h, m and s (15s, 1m30s)"
        )
    return text


def round_count(text: str) -> int:
    """argparse type: rounds, as many as fit in one DAG (the CRD's MaxItems on DAGTemplate.Tasks)."""
    value = positive_int(text)
    if value > MAX_ROUNDS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_ROUNDS}, got {value}: each round adds {ROUND_TASKS} tasks to the DAG, "
            f"and Argo's CRD allows at most {DAG_TASKS_MAX} tasks in one DAG"
        )
    return value


def location(text: str) -> str:
    """argparse type: a URL or gs:// URI as it is, a path made absolute; as long as the run's card takes."""
    value = text if "://" in text else str(Path(text).resolve())
    if len(value) > MAX_SETTING_TEXT:
        raise argparse.ArgumentTypeError(
            f"longer than {MAX_SETTING_TEXT} characters (the run's card keeps it): {value[:40]}…"
        )
    return value


@dataclass(frozen=True)
class PipelineSettings:
    """What one run trains, where it reads and writes, and how the compiled workflow is shaped."""

    workers: int = setting(
        step_defaults.WORKERS,
        "shards, and trainers running in parallel on them",
        positive_int,
        env="WORKER_NUMBER",
    )
    epochs: int = setting(
        step_defaults.EPOCHS,
        "passes each worker makes over its shard in each round",
        positive_int,
        env="EPOCH",
    )
    batch: int = setting(
        step_defaults.BATCH, "samples per gradient step", positive_int, env="BATCH"
    )
    rounds: int = setting(
        step_defaults.ROUNDS,
        f"train → average rounds (at most {MAX_ROUNDS}); each round starts from the previous "
        "round's average",
        round_count,
        env="ROUNDS",
        parameter=False,
    )
    learning_rate: float = setting(
        step_defaults.LEARNING_RATE, "Adam's step size at the start of training", positive_float
    )
    final_learning_rate: float = setting(
        step_defaults.FINAL_LEARNING_RATE,
        "Adam's step size at the end of the last round; it decays from the first to this",
        positive_float,
    )
    retries: int = setting(
        step_defaults.RETRIES,
        "retries of a failed step, except on bad input (Argo `retryStrategy`, honoured locally too)",
        non_negative_int,
        parameter=False,
    )
    retry_backoff: str = setting(
        step_defaults.RETRY_BACKOFF,
        "wait before the first retry; each further wait doubles (at most 5 minutes each)",
        duration,
        parameter=False,
    )
    min_workers: int = setting(
        step_defaults.MIN_WORKERS,
        "aggregate when at least this many workers delivered a model (0: all must)",
        non_negative_int,
    )
    limit: int = setting(
        step_defaults.LIMIT,
        f"train on only this many samples (0 = all: 60000 less the {step_defaults.VALIDATION} held out "
        "to score each round), for quick runs",
        non_negative_int,
    )
    seed: int = setting(
        step_defaults.SEED, "seed of the shuffle, the shards and the shared initial weights", seed
    )
    partition: str = setting(
        step_defaults.PARTITION,
        "`iid` shards, or label-skewed `dirichlet` shards for non-IID experiments",
        str,
        choices=PARTITIONS,
    )
    alpha: float = setting(
        step_defaults.ALPHA,
        "Dirichlet concentration (smaller: each shard holds fewer digits)",
        positive_float,
    )
    serve: str = setting(
        step_defaults.SERVE,
        "when the run becomes the model the page serves (`LATEST`): `if-better` than that one, "
        "`if-not-worse`, `always` or `never`; a partial run (`--limit`, or missing workers) "
        "replaces a complete one only with `always`; every run is kept under `models/mnist/<run>/`",
        str,
        choices=POLICIES,
    )
    min_accuracy: float = setting(
        step_defaults.MIN_ACCURACY,
        "`if-better` and `if-not-worse` serve no model whose test accuracy is below this (0: any)",
        fraction,
    )
    max_accuracy_drop: float = setting(
        step_defaults.MAX_ACCURACY_DROP,
        "`if-not-worse` serves a model scoring up to this below the one `LATEST` serves",
        fraction,
    )
    source: str = setting(
        step_defaults.SOURCE,
        "`mnist.npz` as an `https://` URL, a path, or a `gs://` URI",
        location,
        env=step_defaults.SOURCE_ENV,
        shown_default="Keras URL",
    )
    store: str = setting(
        DEFAULT_STORE,
        "the artifact store: a folder (made only inside an existing one), or `gs://bucket[/prefix]`; "
        "the model is published there "
        "(on a cluster: the artifact repository's bucket itself, fixed when registering)",
        location,
        env=step_defaults.STORE_ENV,
        flag="--artifacts",
        pinned=True,
        shown_default="`.runs` in the project",
    )
    image: str = setting(
        step_defaults.IMAGE,
        "the container image of every step but `train` (no TensorFlow), on a cluster and with "
        "`--engine podman|docker`",
        str,
        parameter=False,
    )
    train_image: str = setting(
        step_defaults.TRAIN_IMAGE,
        "the `train` step's container image (TensorFlow; it can run every step)",
        str,
        parameter=False,
    )

    def parameters(self) -> dict[str, str]:
        """The workflow parameters and their values, as strings."""
        values = asdict(self)
        return {option_name(name): str(values[name]) for name, spec in declared() if spec.parameter}


def declared() -> Iterator[tuple[str, Setting]]:
    """Every setting's field name and declaration, in declaration order."""
    for each in fields(PipelineSettings):
        yield each.name, each.metadata[SETTING]


def option_name(name: str) -> str:
    """The setting's name in flags and workflow parameters: learning_rate → learning-rate."""
    return name.replace("_", "-")


def flag_of(name: str, spec: Setting) -> str:
    return spec.flag or f"--{option_name(name)}"


def defaults(environ: Mapping[str, str] = os.environ) -> PipelineSettings:
    """The defaults, with those the environment sets; ValueError naming the variable for a bad value."""
    changes = {}
    for name, spec in declared():
        if spec.env and environ.get(spec.env):
            try:
                changes[name] = spec.parse(environ[spec.env])
            except (argparse.ArgumentTypeError, ValueError) as error:
                raise ValueError(f"{spec.env}={environ[spec.env]!r}: {error}") from None
    return replace(PipelineSettings(), **changes)


def add_arguments(parser: argparse.ArgumentParser | Any, start: PipelineSettings) -> None:
    """One flag per setting, with `start`'s values as defaults."""
    for name, spec in declared():
        value = getattr(start, name)
        env = f"env {spec.env}; " if spec.env else ""
        parser.add_argument(
            flag_of(name, spec),
            dest=name,
            type=spec.parse,
            default=value,
            choices=spec.choices or None,
            help=f"{spec.help} ({env}default: {spec.shown_default or value})".replace("%", "%%"),
        )


def from_arguments(args: argparse.Namespace) -> PipelineSettings:
    return PipelineSettings(**{name: getattr(args, name) for name, _ in declared()})
