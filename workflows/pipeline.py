"""The pipeline as an Argo Workflow, defined with Hera. It only wires steps; the steps know nothing of Argo.

    split ─┐
    init ──┴─► train-round-1 (one task per shard) ─► aggregate-round-1 ─► … round R … ─► evaluate ─► publish

Artifacts are key-only GCS artifacts: the cluster's default artifact repository supplies the bucket, and
every key starts with the run's name, so runs never collide. The fan-out takes its shard ids at run time
(`withParam`), so `workers` stays a runtime parameter; Argo shows shard i of round r as
`train-round-r(i:i)`. What only matters on a cluster (sizes, deadlines, names) comes from cluster.py.
"""

from __future__ import annotations

import json

from hera.workflows import (
    DAG,
    Container,
    EmptyDirVolume,
    Gauge,
    GCSArtifact,
    Label,
    NoneArchiveStrategy,
    Parameter,
    Resources,
    Workflow,
)
from hera.workflows import models as m

from steps.cli import EXIT_BAD_INPUT
from workflows import cluster
from workflows.settings import DEFAULT_IMAGE, DEFAULT_STORE, PipelineSettings

WORKDIR = "/work"
RUN = "{{workflow.name}}"


def _param(name: str) -> str:
    return f"{{{{inputs.parameters.{name}}}}}"


def _workflow_param(name: str) -> str:
    return f"{{{{workflow.parameters.{name}}}}}"


def _input(name: str, path: str, key: str) -> GCSArtifact:
    """A key-only GCS artifact (one object) placed at `path`."""
    return GCSArtifact(name=name, path=f"{WORKDIR}/{path}", key=key)


def _input_folder(name: str, path: str, key: str) -> GCSArtifact:
    """Every object under a key prefix, as a folder at `path` the steps' user can read.

    argoexec creates the folder with mode 0700 as its own user (artifacts/gcs/gcs.go:downloadObject), and only
    an artifact's `mode` changes that (executor/executor.go:loadArtifact): without it the step, which runs as
    the image's non-root user, cannot list the folder. Optional: when every worker failed there is nothing
    under the prefix, and the step, not the artifact loader, says which shards are missing.
    """
    return GCSArtifact(
        name=name,
        path=f"{WORKDIR}/{path}",
        key=key,
        optional=True,
        mode=cluster.READABLE_FOLDER_MODE,
        recurse_mode=True,
    )


def _output(name: str, path: str, key: str) -> GCSArtifact:
    """A key-only GCS artifact stored as plain objects (no tar), so keys are real files."""
    return GCSArtifact(name=name, path=f"{WORKDIR}/{path}", key=key, archive=NoneArchiveStrategy())


def _retry(limit: int, backoff: str) -> m.RetryStrategy | None:
    """Retry a failed try `limit` times, waiting `backoff`, then twice as long each time (at most the cap).

    Policy Always: a step's own failure (non-zero exit) and an eviction, OOM kill, preemption or node
    shutdown end a pod as Failed, not Error (controller/operator.go:inferFailedReason), so OnError would
    retry none of them. Exit code 2 is the steps' bad input: the same input fails again, so the expression
    stops it. Backoff has no maxDuration: that is a budget from the first try's start which also becomes
    every retry's deadline (operator.go:processNodeRetries); each try has its template's deadline instead.
    """
    if not limit:
        return None
    return m.RetryStrategy(
        limit=str(limit),
        retry_policy="Always",
        expression=f"asInt(lastRetry.exitCode) != {EXIT_BAD_INPUT}",
        backoff=m.Backoff(duration=backoff, **cluster.RETRY_BACKOFF),
    )


def _step(
    name: str,
    image: str,
    args: list[str],
    inputs: list,
    outputs: list,
    retries: int = 0,
    metrics: list | None = None,
    backoff: str = "15s",
) -> Container:
    """A template running `python -m steps.<name> ARGS` in the steps' image, sized for that step, on a
    read-only root: the step writes only its outputs (an emptyDir at out/) and temporary files (/tmp)."""
    size = cluster.STEP_SIZES[name]
    return Container(
        name=name,
        image=image,
        command=["python", "-m", f"steps.{name}"],
        args=args,
        working_dir=WORKDIR,
        inputs=inputs,
        outputs=outputs,
        resources=Resources(
            cpu_request=size.cpu_request,
            cpu_limit=size.cpu_limit,
            memory_request=size.memory_request,
            memory_limit=size.memory_limit,
        ),
        # an IntOrString, which Argo's schema types as a string
        active_deadline_seconds=str(size.deadline_seconds),
        labels={f"{cluster.APP_LABEL}/step": name},
        retry_strategy=_retry(retries, backoff),
        metrics=metrics,
        volumes=[
            EmptyDirVolume(name="out", mount_path=f"{WORKDIR}/out"),
            EmptyDirVolume(name="tmp", mount_path="/tmp"),
        ],
        security_context=m.SecurityContext(
            read_only_root_filesystem=True,
            run_as_non_root=True,
            allow_privilege_escalation=False,
            capabilities=m.Capabilities(drop=["ALL"]),
        ),
    )


PARAMETER_HELP = {
    "workers": "shards, and trainers running in parallel each round",
    "epochs": "passes over its shard per worker and round",
    "batch": "samples per gradient step",
    "learning-rate": "Adam step size",
    "limit": "use only this many training samples, 0 = all",
    "seed": "seed for shards and the shared initial model",
    "partition": "how shards are drawn: iid, or label-skewed dirichlet",
    "alpha": "Dirichlet concentration, smaller is more skewed",
    "source": "mnist.npz: URL or gs:// URI",
    "store": "where the model is published: gs://bucket[/prefix]",
    "min-workers": "aggregate when at least this many workers delivered a model; 0 = all",
}
PARAMETER_CHOICES = {"partition": ["iid", "dirichlet"]}


def _arguments(settings: PipelineSettings, store: str) -> list[Parameter]:
    """The workflow parameters, described for the Argo UI's submit form."""
    values = {**settings.parameters(), "store": store}
    return [
        Parameter(
            name=name,
            value=value,
            description=PARAMETER_HELP.get(name),
            enum=PARAMETER_CHOICES.get(name),
        )
        for name, value in values.items()
    ]


def _run_metadata(settings: PipelineSettings) -> dict:
    """Labels that say what a run is: fixed ones, and the run's knobs read from its parameters."""
    labels = {
        "app.kubernetes.io/name": cluster.APP_LABEL,
        "app.kubernetes.io/component": "training",
        f"{cluster.APP_LABEL}/rounds": str(settings.rounds),
    }
    knobs = {
        f"{cluster.APP_LABEL}/{name}": m.LabelValueFrom(expression=f"workflow.parameters.{name}")
        for name in ("workers", "epochs", "batch")
    }
    # workflowMetadata labels every run, also those started from the WorkflowTemplate
    return {
        "labels": labels,
        "workflow_metadata": m.WorkflowMetadata(labels=labels, labels_from=knobs),
    }


def build_workflow(
    settings: PipelineSettings, image: str = DEFAULT_IMAGE, store: str = DEFAULT_STORE
) -> Workflow:
    """The whole run: `settings.rounds` rounds of train fan-out and FedAvg, then evaluate and publish."""
    metadata = _run_metadata(settings)
    with Workflow(
        generate_name="mnist-",
        entrypoint="pipeline",
        arguments=_arguments(settings, store),
        labels=metadata["labels"],
        workflow_metadata=metadata["workflow_metadata"],
        pod_metadata=m.Metadata(labels={"app.kubernetes.io/name": cluster.APP_LABEL}),
        service_account_name=cluster.SERVICE_ACCOUNT,
        active_deadline_seconds=cluster.RUN_DEADLINE_SECONDS,
        pod_gc=m.PodGC(strategy="OnWorkflowSuccess"),
        ttl_strategy=m.TTLStrategy(
            seconds_after_success=cluster.SUCCEEDED_RUN_TTL_SECONDS,
            seconds_after_failure=cluster.FAILED_RUN_TTL_SECONDS,
        ),
        metrics=[
            Gauge(
                name=cluster.DURATION_METRIC,
                help="Duration of an MNIST training run, in seconds",
                labels=[Label(key="status", value="{{workflow.status}}")],
                realtime=False,
                value="{{workflow.duration}}",
            )
        ],
    ) as workflow:
        split = _step(
            "split",
            image,
            args=[
                "--source",
                _workflow_param("source"),
                "--workers",
                _workflow_param("workers"),
                "--seed",
                _workflow_param("seed"),
                "--limit",
                _workflow_param("limit"),
                "--partition",
                _workflow_param("partition"),
                "--alpha",
                _workflow_param("alpha"),
                "--shards-dir",
                "out/shards",
                "--test-out",
                "out/test.npz",
                "--ids-out",
                "out/shard-ids.json",
            ],
            inputs=[],
            outputs=[
                Parameter(
                    name="shard-ids", value_from=m.ValueFrom(path=f"{WORKDIR}/out/shard-ids.json")
                ),
                _output("shards", "out/shards", f"{RUN}/shards"),
                _output("test", "out/test.npz", f"{RUN}/test.npz"),
            ],
            retries=settings.retries,
            backoff=settings.retry_backoff,
        )
        init = _step(
            "init",
            image,
            args=["--seed", _workflow_param("seed"), "--out", "out/model.h5"],
            inputs=[],
            outputs=[_output("model", "out/model.h5", f"{RUN}/init/model.h5")],
            retries=settings.retries,
            backoff=settings.retry_backoff,
        )
        model_key = f"{RUN}/round-{_param('round')}/models/{_param('shard')}"
        train = _step(
            "train",
            image,
            args=[
                "--shard",
                "in/shard.npz",
                "--model",
                "in/start.h5",
                "--epochs",
                _workflow_param("epochs"),
                "--batch",
                _workflow_param("batch"),
                "--learning-rate",
                _workflow_param("learning-rate"),
                "--seed",
                _param("shard"),
                "--out",
                "out/model.h5",
                "--stats-out",
                "out/stats.json",
                "--checkpoint-store",
                _workflow_param("store"),
                "--checkpoint-key",
                f"{RUN}/round-{_param('round')}/checkpoints/{_param('shard')}.npz",
            ],
            inputs=[
                Parameter(name="shard"),
                Parameter(name="round"),
                Parameter(name="start-model"),
                _input("shard", "in/shard.npz", f"{RUN}/shards/{_param('shard')}.npz"),
                _input("start-model", "in/start.h5", _param("start-model")),
            ],
            outputs=[
                _output("model", "out/model.h5", f"{model_key}.h5"),
                _output("stats", "out/stats.json", f"{model_key}.json"),
            ],
            retries=settings.retries,
            backoff=settings.retry_backoff,
        )
        aggregate = _step(
            "aggregate",
            image,
            args=[
                "--models-dir",
                "in/models",
                "--shards",
                _param("shards"),
                "--min-workers",
                _workflow_param("min-workers"),
                "--out",
                "out/model.h5",
                "--missing-out",
                "out/missing.json",
            ],
            inputs=[
                Parameter(name="round"),
                Parameter(name="shards"),
                _input_folder("models", "in/models", f"{RUN}/round-{_param('round')}/models"),
            ],
            outputs=[
                Parameter(
                    name="missing-shards",
                    value_from=m.ValueFrom(path=f"{WORKDIR}/out/missing.json"),
                ),
                _output("model", "out/model.h5", f"{RUN}/round-{_param('round')}/model.h5"),
            ],
            retries=settings.retries,
            backoff=settings.retry_backoff,
        )
        evaluate = _step(
            "evaluate",
            image,
            args=[
                "--model",
                "in/model.h5",
                "--test",
                "in/test.npz",
                "--missing-shards",
                _param("missing-shards"),
                "--out-dir",
                "out",
            ],
            inputs=[
                Parameter(name="model"),
                Parameter(name="missing-shards"),
                _input("model", "in/model.h5", _param("model")),
                _input("test", "in/test.npz", f"{RUN}/test.npz"),
            ],
            outputs=[
                Parameter(
                    name="accuracy", value_from=m.ValueFrom(path=f"{WORKDIR}/out/accuracy.txt")
                ),
                _output("metrics", "out/metrics.json", f"{RUN}/evaluation/metrics.json"),
                _output("confusion", "out/confusion.png", f"{RUN}/evaluation/confusion.png"),
                _output("report", "out/report.txt", f"{RUN}/evaluation/report.txt"),
            ],
            retries=settings.retries,
            backoff=settings.retry_backoff,
            metrics=[
                Gauge(
                    name=cluster.ACCURACY_METRIC,
                    help="Test accuracy of the averaged MNIST model",
                    when="{{status}} == Succeeded",
                    realtime=False,
                    value="{{outputs.parameters.accuracy}}",
                )
            ],
        )
        run_settings = {name: _workflow_param(name) for name in settings.parameters()}
        publish = _step(
            "publish",
            image,
            args=[
                "--store",
                _workflow_param("store"),
                "--run",
                RUN,
                "--model",
                "in/model.h5",
                "--metrics",
                "in/metrics.json",
                "--attach",
                "in/confusion.png",
                "--settings",
                json.dumps({**run_settings, "rounds": settings.rounds}),
            ],
            inputs=[
                Parameter(name="model"),
                _input("model", "in/model.h5", _param("model")),
                _input("metrics", "in/metrics.json", f"{RUN}/evaluation/metrics.json"),
                _input("confusion", "in/confusion.png", f"{RUN}/evaluation/confusion.png"),
            ],
            outputs=[],
            retries=settings.retries,
            backoff=settings.retry_backoff,
        )

        with DAG(name="pipeline"):
            shards = split()
            start = init()
            model = f"{RUN}/init/model.h5"
            previous = [shards, start]
            missing = {}
            for round_number in range(1, settings.rounds + 1):
                trained = train(
                    name=f"train-round-{round_number}",
                    with_param=shards.get_parameter("shard-ids"),
                    arguments={
                        "shard": "{{item}}",
                        "round": str(round_number),
                        "start-model": model,
                    },
                )
                averaged = aggregate(
                    name=f"aggregate-round-{round_number}",
                    arguments={
                        "round": str(round_number),
                        "shards": shards.get_parameter("shard-ids").value,
                    },
                    # Once every trainer has ended, however it ended: a shard that failed every retry
                    # does not fail the run by itself; aggregate decides, against --min-workers.
                    # (Argo refuses continueOn beside depends, and AllFailed is false when a trainer
                    # ended in Error: controller/dag.go:evaluateDependsLogic.)
                    depends=" || ".join(
                        f"{trained.name}.{result}" for result in ("Succeeded", "Failed", "Errored")
                    ),
                )
                previous >> trained
                previous, model = [averaged], f"{RUN}/round-{round_number}/model.h5"
                missing[str(round_number)] = (
                    f"{{{{tasks.{averaged.name}.outputs.parameters.missing-shards}}}}"
                )
            missing_json = "{" + ", ".join(f'"{r}": {ref}' for r, ref in missing.items()) + "}"
            scored = evaluate(arguments={"model": model, "missing-shards": missing_json})
            released = publish(arguments={"model": model})
            previous >> scored >> released
    return workflow


def compile_workflow(
    settings: PipelineSettings, image: str = DEFAULT_IMAGE, store: str = DEFAULT_STORE
) -> dict:
    """The Workflow manifest as a plain dict, exactly what goes to the Argo Server or the local runner."""
    return build_workflow(settings, image, store).to_dict()


def compile_template(
    settings: PipelineSettings,
    image: str = DEFAULT_IMAGE,
    store: str = DEFAULT_STORE,
    name: str = cluster.TEMPLATE_NAME,
) -> dict:
    """The same pipeline as a WorkflowTemplate: registered once, started from the Argo UI's Submit form.

    Every workflow parameter (workers, epochs, batch, ...) is a field of that form; `rounds` shapes the DAG,
    so it is fixed when the template is registered.
    """
    workflow = compile_workflow(settings, image, store)
    labels = workflow["metadata"].get("labels", {})
    return {
        "apiVersion": workflow["apiVersion"],
        "kind": "WorkflowTemplate",
        "metadata": {"name": name, "labels": labels},
        "spec": workflow["spec"],
    }
