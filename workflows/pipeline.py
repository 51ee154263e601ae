"""The pipeline as an Argo Workflow, defined with Hera. It only wires steps; the steps know nothing of Argo.

    split ─┐
    init ──┴─► train-round-1 (one task per shard) ─► aggregate-round-1 ─► … round R … ─► evaluate ─► publish

Artifacts are key-only GCS artifacts: the cluster's default artifact repository supplies the bucket, and
every key starts with the run's name, so runs never collide.
"""

from __future__ import annotations

import json

from hera.workflows import DAG, Container, GCSArtifact, NoneArchiveStrategy, Parameter, Workflow
from hera.workflows import models as m

from workflows.settings import DEFAULT_IMAGE, DEFAULT_STORE, PipelineSettings

WORKDIR = "/work"
RUN = "{{workflow.name}}"


def _param(name: str) -> str:
    return f"{{{{inputs.parameters.{name}}}}}"


def _workflow_param(name: str) -> str:
    return f"{{{{workflow.parameters.{name}}}}}"


def _input(name: str, path: str, key: str, optional: bool | None = None) -> GCSArtifact:
    """A key-only GCS artifact (a file, or every object under a key prefix) placed at `path`."""
    return GCSArtifact(name=name, path=f"{WORKDIR}/{path}", key=key, optional=optional)


def _output(name: str, path: str, key: str) -> GCSArtifact:
    """A key-only GCS artifact stored as plain objects (no tar), so keys are real files."""
    return GCSArtifact(name=name, path=f"{WORKDIR}/{path}", key=key, archive=NoneArchiveStrategy())


def _step(
    name: str,
    image: str,
    args: list[str],
    inputs: list,
    outputs: list,
    retries: int | None = None,
    backoff: str = "10s",
) -> Container:
    """A template running `python -m steps.<name> ARGS` in the steps' image."""
    return Container(
        name=name,
        image=image,
        command=["python", "-m", f"steps.{name}"],
        args=args,
        working_dir=WORKDIR,
        inputs=inputs,
        outputs=outputs,
        retry_strategy=m.RetryStrategy(
            limit=str(retries),
            retry_policy="Always",
            # exit code 2 is bad input: the same input fails again, so it is not retried
            expression="asInt(lastRetry.exitCode) != 2",
            backoff=m.Backoff(duration=backoff, factor="2"),
        )
        if retries
        else None,
    )


def build_workflow(
    settings: PipelineSettings, image: str = DEFAULT_IMAGE, store: str = DEFAULT_STORE
) -> Workflow:
    """The whole run: `settings.rounds` rounds of train fan-out and FedAvg, then evaluate and publish."""
    arguments = {**settings.parameters(), "store": store}
    with Workflow(generate_name="mnist-", entrypoint="pipeline", arguments=arguments) as workflow:
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
        )
        init = _step(
            "init",
            image,
            args=["--seed", _workflow_param("seed"), "--out", "out/model.h5"],
            inputs=[],
            outputs=[_output("model", "out/model.h5", f"{RUN}/init/model.h5")],
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
                # optional: when every worker failed there is nothing under the prefix, and
                # aggregate, not the artifact loader, says which shards are missing
                _input(
                    "models", "in/models", f"{RUN}/round-{_param('round')}/models", optional=True
                ),
            ],
            outputs=[
                Parameter(
                    name="missing-shards",
                    value_from=m.ValueFrom(path=f"{WORKDIR}/out/missing.json"),
                ),
                _output("model", "out/model.h5", f"{RUN}/round-{_param('round')}/model.h5"),
            ],
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
                    # a shard that still fails after its retries does not fail the run by itself:
                    # aggregate decides, against --min-workers
                    continue_on=m.ContinueOn(failed=True),
                )
                averaged = aggregate(
                    name=f"aggregate-round-{round_number}",
                    arguments={
                        "round": str(round_number),
                        "shards": shards.get_parameter("shard-ids").value,
                    },
                    depends=f"{trained.name}.AnySucceeded || {trained.name}.AllFailed",
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
