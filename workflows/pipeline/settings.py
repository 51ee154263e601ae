"""The pipeline's settings, each declared once: its default (from steps.lib.defaults, which the steps'
own flags share), what it means, how a flag of submit.py reads it, the environment variable that sets
its default (the replaced system's WORKER_NUMBER, EPOCH, BATCH), its allowed values, and whether it is a workflow parameter (set per run, also from the Argo UI's Submit form) or
shapes the compiled workflow. submit.py's flags, the workflow's parameters with their descriptions and enums,
and the README's settings table are all made from these declarations.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from steps.lib import defaults as step_defaults
from steps.lib.arguments import fraction, non_negative_int, positive_float, positive_int, seed
from steps.lib.defaults import STORE as DEFAULT_STORE
from steps.lib.published import MAX_SETTING_TEXT
from steps.lib.serving import GATED, POLICIES
from steps.lib.shards import PARTITIONS
from workflows.lint.schema import DAG_TASKS_MAX
from workflows.local.retries import DurationError, parse_duration
from workflows.local.spec import TAG_END, TAG_START

SETTING = "setting"
# The pipeline's DAG: split, init, evaluate and publish, and a train and an aggregate task per round.
RUN_TASKS, ROUND_TASKS = 4, 2
MAX_ROUNDS = (DAG_TASKS_MAX - RUN_TASKS) // ROUND_TASKS


@dataclass(frozen=True)
class Setting:
    """How one field of PipelineSettings is offered to people."""

    help: str
    parse: Callable[[str], Any]
    env: str | None = None
    choices: tuple[str, ...] = ()
    parameter: bool = True  # a workflow parameter; False: compiled into the workflow's shape
    pinned: bool = (
        False  # a parameter the Submit form shows but cannot change (an enum of its value)
    )
    flag: str = ""  # default: --<name with dashes>
    shown_default: str = ""  # how the README shows the default, when not the value itself


def setting(default: Any, help: str, parse: Callable[[str], Any], **options: Any) -> Any:
    return field(default=default, metadata={SETTING: Setting(help, untagged(parse), **options)})


def untagged(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse`, refusing first any text that holds `{{` or `}}`, whatever the setting: in the workflow Argo
    would take it for a template tag and substitute it, and an expression tag (`{{=…}}`) it evaluates,
    at submit in the server and at run time in the controller (workflow/common/util.go,
    SubstituteParams; util/template for `{{=`)."""

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
    """argparse type: a duration Argo reads (15s, 1m30s, or seconds)."""
    try:
        parse_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def dag_tasks(rounds: int) -> int:
    """How many tasks the pipeline's DAG holds for this many rounds."""
    return RUN_TASKS + ROUND_TASKS * rounds


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
    """argparse type: a URL or gs:// URI as it is; a path made absolute (each step runs in its own folder).
    At most MAX_SETTING_TEXT characters: publish keeps it on the run's card, and refuses a longer one."""
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


def inconsistency(settings: PipelineSettings) -> str | None:
    """Why these settings cannot make the run they describe, or would do less than they say (a setting
    another one makes inert), in one line; None when they agree. Known before anything runs."""
    start = PipelineSettings()
    if settings.min_workers > settings.workers:
        return (
            f"--min-workers {settings.min_workers} is more than --workers {settings.workers}: "
            "no round could ever average enough models"
        )
    if settings.limit and settings.workers > settings.limit:
        return (
            f"--workers {settings.workers} is more than the {settings.limit} training samples "
            "--limit keeps: some shards would be empty"
        )
    if settings.partition != "dirichlet" and settings.alpha != start.alpha:
        return (
            f"--alpha {settings.alpha} shapes only --partition dirichlet shards; with "
            f"{settings.partition} shards it does nothing (add --partition dirichlet)"
        )
    if settings.final_learning_rate > settings.learning_rate:
        return (
            f"--final-learning-rate {settings.final_learning_rate} is above --learning-rate "
            f"{settings.learning_rate}: the rate decays from the first to the final one"
        )
    if settings.serve != "if-not-worse" and settings.max_accuracy_drop != start.max_accuracy_drop:
        return (
            f"--max-accuracy-drop is the gate of --serve if-not-worse; with --serve "
            f"{settings.serve} it does nothing"
        )
    if settings.serve not in GATED and settings.min_accuracy != start.min_accuracy:
        return (
            f"--min-accuracy gates --serve if-better and if-not-worse; with --serve "
            f"{settings.serve} it does nothing"
        )
    if not settings.retries and settings.retry_backoff != start.retry_backoff:
        return "--retry-backoff waits before a retry; with --retries 0 it does nothing"
    return None
