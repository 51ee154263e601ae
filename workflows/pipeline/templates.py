"""How a step becomes an Argo container template: `python -m steps.<name>` in /work on a read-only root,
reading under in/ and writing under out/ and /tmp, each file declared once (path, artifact key, flag)."""

from __future__ import annotations

from dataclasses import dataclass

from hera.workflows import Container, EmptyDirVolume, GCSArtifact, NoneArchiveStrategy, Parameter
from hera.workflows import models as m
from hera.workflows.task import TaskResult

from steps.lib.errors import EXIT_BAD_INPUT
from workflows.pipeline import resources

WORKDIR = "/work"
# A task that depends on a fan-out with this runs once every item has ended, whatever way.
ENDED = TaskResult.succeeded | TaskResult.failed | TaskResult.errored


def param(name: str) -> str:
    """A reference to the template's own input parameter."""
    return f"{{{{inputs.parameters.{name}}}}}"


def workflow_param(name: str) -> str:
    return f"{{{{workflow.parameters.{name}}}}}"


@dataclass(frozen=True)
class Read:
    """An input artifact: the object at `key` (or all under it) at `path`, named by the step's `flag`."""

    name: str
    path: str
    key: str
    flag: str
    folder: bool = False  # every object under `key`, as files under `path`

    def artifact(self) -> GCSArtifact:
        # argoexec makes a folder input 0700, its own, but for `mode` (executor.go:loadArtifact); optional:
        # when every worker failed, the step, not the artifact loader, says which shards are missing.
        return GCSArtifact(
            name=self.name,
            path=f"{WORKDIR}/{self.path}",
            key=self.key,
            optional=self.folder or None,
            mode=resources.READABLE_FOLDER_MODE if self.folder else None,
            recurse_mode=self.folder or None,
        )


@dataclass(frozen=True)
class Write:
    """An output at `path`: an artifact at `key`, or (no key) a parameter; `flag` names it, if any."""

    name: str
    path: str
    key: str | None = None  # a folder's files are stored under `key`/
    flag: str | None = None

    def output(self) -> GCSArtifact | Parameter:
        if self.key is None:
            return Parameter(name=self.name, value_from=m.ValueFrom(path=f"{WORKDIR}/{self.path}"))
        return GCSArtifact(
            name=self.name,
            path=f"{WORKDIR}/{self.path}",
            key=self.key,
            archive=NoneArchiveStrategy(),
        )


def step_template(
    name: str,
    image: str,
    retry: m.RetryStrategy | None,
    options: dict[str, str | list[str]],
    parameters: tuple[str, ...] | list[str] = (),
    reads: list[Read] | tuple = (),
    writes: list[Write] | tuple = (),
    metrics: list | None = None,
) -> Container:
    """The template running `python -m steps.<name>` with `options` and a flag per file."""
    args = [
        part
        for flag, value in options.items()
        for item in ([value] if isinstance(value, str) else value)
        for part in (flag, item)
    ]
    args += [part for f in [*reads, *writes] if f.flag for part in (f.flag, f.path)]
    size = resources.STEP_SIZES[name]
    return Container(
        name=name,
        image=image,
        command=["python", "-m", f"steps.{name}"],
        args=args,
        working_dir=WORKDIR,
        inputs=[Parameter(name=p) for p in parameters] + [r.artifact() for r in reads],
        outputs=[w.output() for w in writes],
        resources=size.resources(),
        active_deadline_seconds=str(size.deadline_seconds),  # an IntOrString: a string
        labels={f"{resources.APP_LABEL}/step": name},
        retry_strategy=retry,
        metrics=metrics,
        volumes=[
            EmptyDirVolume(name="out", mount_path=f"{WORKDIR}/out"),
            EmptyDirVolume(name="tmp", mount_path="/tmp"),
        ],
        security_context=resources.container_security_context(),
        # The log's tail, with the step's last line saying why it failed, ends the node's message
        # (operator.go:1893-1897): "main: Error (exit code 2): split: error: …".
        termination_message_policy="FallbackToLogsOnError",
    )


def retry_strategy(retries: int, backoff: str) -> m.RetryStrategy | None:
    """Retry a failed try `retries` times, waiting `backoff`, then twice as long each time. Policy
    Always: a step's failure and an eviction, OOM kill or preemption end a pod as Failed, not Error
    (controller/operator.go:inferFailedReason); exit code 2, bad input, is not retried. No maxDuration:
    it would also become every retry's deadline (operator.go:processNodeRetries)."""
    if not retries:
        return None
    return m.RetryStrategy(
        limit=m.IntOrString(str(retries)),
        retry_policy="Always",
        expression=f"asInt(lastRetry.exitCode) != {EXIT_BAD_INPUT}",
        backoff=m.Backoff(
            duration=backoff,
            factor=m.IntOrString(resources.RETRY_BACKOFF["factor"]),
            cap=resources.RETRY_BACKOFF["cap"],
        ),
    )
