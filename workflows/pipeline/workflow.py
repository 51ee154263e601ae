"""The pipeline as an Argo Workflow, defined with Hera: the steps' templates wired into the DAG, their
artifacts GCS keys under the run's name; workflow.yaml beside it is what it compiles to."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from functools import partial

from hera.workflows import DAG, Container, Gauge, Label, Parameter, Task, Workflow
from hera.workflows import models as m

from steps.lib.registry import CONFUSION_FILE, HISTORY_FILE, HISTORY_PLOT, METRICS_FILE
from workflows.pipeline import resources
from workflows.pipeline.settings import PipelineSettings, declared, option_name
from workflows.pipeline.templates import (
    ENDED,
    Read,
    Write,
    param,
    retry_strategy,
    step_template,
    workflow_param,
)


def build_workflow(settings: PipelineSettings, name: str | None = None) -> Workflow:
    """The whole run: `settings.rounds` rounds of a train fan-out and FedAvg, then evaluate and publish.

    split ─┐
    init ──┴─► train-round-1 ─► aggregate-round-1 ─► … ─► train-round-R ─► aggregate-round-R ─┐
               (one per shard)  (FedAvg)                                                      │
                                                             publish ◄── evaluate ◄───────────┘
    """
    with empty_workflow(settings, name) as workflow:
        # the templates, each once; only `train` runs in the TensorFlow image
        step = partial(
            step_template,
            image=settings.image,
            retry=retry_strategy(settings.retries, settings.retry_backoff),
        )
        splitting, initial = split_step(step), init_step(step)
        training = train_step(partial(step, image=settings.train_image), settings.rounds)
        averaging, scoring = aggregate_step(step), evaluate_step(step)
        publishing = publish_step(step, settings)
        with DAG(name="pipeline"):
            split = Task(name="split", template=splitting)
            init = Task(name="init", template=initial)
            shard_ids = split.get_parameter("shard-ids")
            shard_sizes = split.get_parameter("shard-sizes")
            ready: list[Task | str] = [split, init]
            model, history = INIT_MODEL, INIT_HISTORY
            missing: dict[str, str] = {}  # each round's missing-shards output, for evaluate
            for r in range(1, settings.rounds + 1):
                trained = Task(
                    name=f"train-round-{r}",
                    template=training,
                    with_param=shard_ids,
                    arguments={"shard": "{{item}}", "round": str(r), "start-model": model},
                )
                averaged = Task(  # weighs each model by its shard's size, from split
                    name=f"aggregate-round-{r}",
                    template=averaging,
                    arguments={
                        "round": str(r),
                        "shards": shard_sizes.value,
                        "start-history": history,
                    },
                )
                ready >> trained
                # once every trainer has ended, however: aggregate decides against --min-workers
                trained.next(averaged, on=ENDED)
                ready = [averaged]
                model, history = round_key(r, "model.h5"), round_key(r, HISTORY_FILE)
                missing[str(r)] = str(averaged.get_parameter("missing-shards").value)
            scored = Task(
                name="evaluate",
                template=scoring,
                arguments={"model": model, "missing-shards": json.dumps(missing)},
            )
            published = Task(name="publish", template=publishing, arguments={"model": model})
            ready >> scored >> published
    return workflow


# The artifacts' keys: each starts with the run's name.
RUN = "{{workflow.name}}"
SHARD, ROUND = param("shard"), param("round")
ROUND_MODELS = f"{RUN}/round-{ROUND}/models"
INIT_MODEL = f"{RUN}/init/model.h5"
INIT_HISTORY = f"{RUN}/init/{HISTORY_FILE}"
VALIDATION = f"{RUN}/validation.npz"
EVALUATION = f"{RUN}/evaluation"


def round_key(round_number: int | str, name: str) -> str:
    """Where round r's averaged model, or its history up to then (the file or its picture), is kept."""
    return f"{RUN}/round-{round_number}/{name}"


StepFactory = Callable[..., Container]  # step_template with the image and retry strategy filled in


def split_step(step: StepFactory) -> Container:
    data = ("source", "workers", "seed", "limit", "partition", "alpha")
    return step(
        "split",
        options={f"--{name}": workflow_param(name) for name in data},
        writes=[
            Write("shards", "out/shards", f"{RUN}/shards", "--shards-dir"),
            Write("test", "out/test.npz", f"{RUN}/test.npz", "--test-out"),
            Write("validation", "out/validation.npz", VALIDATION, "--validation-out"),
            Write("shard-ids", "out/shard-ids.json", flag="--ids-out"),
            Write("shard-sizes", "out/shard-sizes.json", flag="--sizes-out"),
        ],
    )


def init_step(step: StepFactory) -> Container:
    return step(
        "init",
        options={"--seed": workflow_param("seed")},
        writes=[
            Write("model", "out/model.h5", INIT_MODEL, "--out"),
            Write("history", f"out/{HISTORY_FILE}", INIT_HISTORY, "--history-out"),
        ],
    )


def train_step(step: StepFactory, rounds: int) -> Container:
    """One shard of one round: the round's number and the run's rounds set its learning rate."""
    learning = ("epochs", "batch", "learning-rate", "final-learning-rate")
    return step(
        "train",
        parameters=["shard", "round", "start-model"],
        options={
            **{f"--{name}": workflow_param(name) for name in learning},
            "--round": ROUND,
            "--rounds": str(rounds),
            "--seed": SHARD,
            "--checkpoint-store": workflow_param("store"),
            "--checkpoint-key": f"{RUN}/round-{ROUND}/checkpoints/{SHARD}.npz",
        },
        reads=[
            Read("shard", "in/shard.npz", f"{RUN}/shards/{SHARD}.npz", "--shard"),
            Read("start-model", "in/start.h5", param("start-model"), "--model"),
        ],
        writes=[
            Write("model", "out/model.h5", f"{ROUND_MODELS}/{SHARD}.h5", "--out"),
            Write("stats", "out/stats.json", f"{ROUND_MODELS}/{SHARD}.json", "--stats-out"),
        ],
    )


def aggregate_step(step: StepFactory) -> Container:
    """One round's FedAvg, scored on split's held-out digits and added to the history."""
    return step(
        "aggregate",
        parameters=["round", "shards", "start-history"],
        options={
            "--shards": param("shards"),
            "--min-workers": workflow_param("min-workers"),
            "--round": ROUND,
        },
        reads=[
            Read("models", "in/models", ROUND_MODELS, "--models-dir", folder=True),
            Read("validation", "in/validation.npz", VALIDATION, "--validation"),
            Read("history", f"in/{HISTORY_FILE}", param("start-history"), "--history"),
        ],
        writes=[
            Write("model", "out/model.h5", round_key(ROUND, "model.h5"), "--out"),
            Write("missing-shards", "out/missing.txt", flag="--missing-out"),
            Write(
                "history", f"out/{HISTORY_FILE}", round_key(ROUND, HISTORY_FILE), "--history-out"
            ),
            Write(
                "history-plot", f"out/{HISTORY_PLOT}", round_key(ROUND, HISTORY_PLOT), "--plot-out"
            ),
        ],
    )


def evaluate_step(step: StepFactory) -> Container:
    """Scores the final model into --out-dir; the Argo UI shows the confusion picture and report."""
    return step(
        "evaluate",
        parameters=["model", "missing-shards"],
        options={"--missing-shards": param("missing-shards"), "--out-dir": "out"},
        reads=[
            Read("model", "in/model.h5", param("model"), "--model"),
            Read("test", "in/test.npz", f"{RUN}/test.npz", "--test"),
        ],
        writes=[
            Write("accuracy", "out/accuracy.txt"),
            Write("metrics", f"out/{METRICS_FILE}", f"{EVALUATION}/{METRICS_FILE}"),
            Write("confusion", f"out/{CONFUSION_FILE}", f"{EVALUATION}/{CONFUSION_FILE}"),
            Write("report", "out/report.txt", f"{EVALUATION}/report.txt"),
        ],
        metrics=[
            Gauge(
                name=resources.ACCURACY_METRIC,
                help="Test accuracy of the averaged MNIST model",
                when="{{status}} == Succeeded",
                realtime=False,
                value="{{outputs.parameters.accuracy}}",
            )
        ],
    )


def publish_step(step: StepFactory, settings: PipelineSettings) -> Container:
    """Publishes the model with a card of every setting; whether it is served is its outputs."""
    trained_with = [name for name in settings.parameters() if name != "store"]
    card = [f"{name}={workflow_param(name)}" for name in trained_with]
    values = asdict(settings)
    shaped = [f"{option_name(n)}={values[n]}" for n, spec in declared() if not spec.parameter]
    attached = [  # the files the card carries beside the model
        ("confusion", CONFUSION_FILE, f"{EVALUATION}/{CONFUSION_FILE}"),
        ("history", HISTORY_FILE, round_key(settings.rounds, HISTORY_FILE)),
        ("history-plot", HISTORY_PLOT, round_key(settings.rounds, HISTORY_PLOT)),
    ]
    return step(
        "publish",
        parameters=["model"],
        options={
            "--store": workflow_param("store"),
            "--run": RUN,
            "--serve": workflow_param("serve"),
            "--min-accuracy": workflow_param("min-accuracy"),
            "--max-accuracy-drop": workflow_param("max-accuracy-drop"),
            "--setting": [*card, *shaped],
        },
        reads=[
            Read("model", "in/model.h5", param("model"), "--model"),
            Read("metrics", f"in/{METRICS_FILE}", f"{EVALUATION}/{METRICS_FILE}", "--metrics"),
            *(Read(name, f"in/{file}", key, "--attach") for name, file, key in attached),
        ],
        writes=[
            Write("served", "out/served.txt", flag="--served-out"),
            Write("reason", "out/reason.txt", flag="--reason-out"),
        ],
    )


def empty_workflow(settings: PipelineSettings, name: str | None) -> Workflow:
    """The Workflow before its templates: parameters, labels, accounts, deadlines, clean-up, metric."""
    labels = {
        "app.kubernetes.io/name": resources.APP_LABEL,
        "app.kubernetes.io/component": "training",
        f"{resources.APP_LABEL}/rounds": str(settings.rounds),
    }
    knobs = {
        f"{resources.APP_LABEL}/{name}": m.LabelValueFrom(expression=label_expression(name))
        for name in ("workers", "epochs", "batch")
    }
    # The Argo UI shows it under the run's name in the workflows list (ui/src/shared/annotations.ts).
    annotations = {
        "workflows.argoproj.io/description": (
            f"MNIST, {settings.rounds} round{'s' * (settings.rounds != 1)} of federated averaging: "
            "each round's training curves on "
            "`aggregate-round-N`, the confusion matrix on `evaluate` (Inputs/Outputs)"
        )
    }
    return Workflow(
        name=name,
        generate_name=None if name else resources.RUN_PREFIX,
        entrypoint="pipeline",
        arguments=workflow_parameters(settings),
        labels=labels,
        annotations=annotations,
        # workflowMetadata labels every run, also those started from the WorkflowTemplate
        workflow_metadata=m.WorkflowMetadata(
            labels=labels, labels_from=knobs, annotations=annotations
        ),
        pod_metadata=m.Metadata(labels={"app.kubernetes.io/name": resources.APP_LABEL}),
        **resources.workflow_pod_fields(),
        active_deadline_seconds=resources.RUN_DEADLINE_SECONDS,
        # gc_controller.go:ttl() reads secondsAfterFailure for phase Failed only: a run ending in Error
        # (e.g. a Spot node's "pod deleted") goes after secondsAfterCompletion, with its pods.
        pod_gc=m.PodGC(strategy="OnWorkflowSuccess"),
        ttl_strategy=m.TTLStrategy(
            seconds_after_success=resources.SUCCEEDED_RUN_TTL_SECONDS,
            seconds_after_failure=resources.FAILED_RUN_TTL_SECONDS,
            seconds_after_completion=resources.FAILED_RUN_TTL_SECONDS,
        ),
        metrics=[
            Gauge(
                name=resources.DURATION_METRIC,
                help="Duration of an MNIST training run, in seconds",
                labels=[Label(key="status", value="{{workflow.status}}")],
                realtime=False,
                value="{{workflow.duration}}",
            )
        ],
    )


# The controller fails a run whose labelsFrom value is no label value (operator.go: updateWorkflowMetadata),
# e.g. "3 " typed in the Submit form: the number trimmed, or "invalid" (the step then refuses the setting).
LABEL_NUMBER = "^[0-9]{1,9}$"
INVALID_LABEL = "invalid"


def label_expression(parameter: str) -> str:
    """The expr-lang expression labelling a run with a numeric workflow parameter."""
    value = f"trim(workflow.parameters.{parameter})"
    return f"{value} matches '{LABEL_NUMBER}' ? {value} : '{INVALID_LABEL}'"


def workflow_parameters(settings: PipelineSettings) -> list[Parameter]:
    """The parameters for the Argo UI's Submit form; the pinned store is an enum of its one value."""
    values = settings.parameters()
    return [
        Parameter(
            name=option_name(name),
            value=values[option_name(name)],
            description=spec.help,
            enum=list(spec.choices) or ([values[option_name(name)]] if spec.pinned else None),
        )
        for name, spec in declared()
        if spec.parameter
    ]


def compile_workflow(settings: PipelineSettings, name: str | None = None) -> dict:
    """The Workflow manifest as a plain dict, exactly what goes to the Argo Server or the local runner;
    named `name`, or by the server from the runs' prefix."""
    return build_workflow(settings, name or None).to_dict()


def compile_template(settings: PipelineSettings, name: str = resources.TEMPLATE_NAME) -> dict:
    """The same pipeline as a WorkflowTemplate, for the Argo UI's Submit form (`rounds` is fixed)."""
    workflow = compile_workflow(settings)
    return {
        "apiVersion": workflow["apiVersion"],
        "kind": "WorkflowTemplate",
        "metadata": {"name": name, "labels": workflow["metadata"].get("labels", {})},
        "spec": workflow["spec"],
    }
