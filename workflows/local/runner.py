"""`LocalRunner.run`: the compiled Workflow's DAG walked as Argo's controller walks it, on this machine."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath
from typing import Any

from steps.lib.errors import StepError
from steps.lib.storage import ArtifactStore
from workflows.errors import UnresolvedReference, WorkflowError
from workflows.local import outcome, plan, spec
from workflows.local.artifacts import load_inputs, output_parameters, save_outputs
from workflows.local.console import Console, read_progress
from workflows.local.engines import (
    Engine,
    EngineError,
    Invocation,
    ProcessEngine,
    exit_description,
    safe_filename,
)
from workflows.local.plan import Dag, Node
from workflows.local.retries import STOPPED, Attempt, decide

POLL_SECONDS = 1.0
MAX_PARALLELISM = 64  # at most this many tries at once, whatever --parallelism says
TRIES_PER_CORE = 2  # without --parallelism: a few more tries than cores keep the cores busy
POD_DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
MAX_SHOWN_LINE = 400  # characters of a step's stdout line shown as the run goes (the log keeps all)


class LocalRunner:
    """Holds what a run shares across threads: the store, the engine, the clock and the output."""

    def __init__(
        self,
        store: ArtifactStore,
        logs_dir: Path,
        parallelism: int | None = None,
        echo: Callable[[str], None] = print,
        engine: Engine | None = None,
        cores: int | None = None,
        memory: int | None = None,  # bytes the tries at once may take (default: what is free)
    ) -> None:
        self.store, self.logs_dir, self.memory = store, Path(logs_dir), memory
        self.cores = cores or os.cpu_count() or 1
        self.parallelism = min(parallelism or TRIES_PER_CORE * self.cores, MAX_PARALLELISM)
        self.engine = engine or ProcessEngine()
        self.console = Console(echo, live=echo is print and sys.stdout.isatty())
        self._stopping = threading.Event()

    def run(self, workflow: Mapping[str, Any], done: Iterable[Node] = ()) -> outcome.RunResult:
        """Run `workflow` to its end; `done`: nodes of an earlier try of this run, reused as they are."""
        self.spec = spec.read(workflow)
        dag = plan.read_dag(self.spec.entry)
        name, self.folder = self.spec.name, self.logs_dir / self.spec.name
        started = self.console.started = time.monotonic()
        self._deadline = None if self.spec.deadline is None else started + self.spec.deadline
        self._stopping.clear()
        self._budget = self.memory or available_memory()
        self._done = {node.name: node for node in done}
        self.console.say(
            f"run {name}: {len(dag.tasks)} tasks, parallelism {self.parallelism}, memory "
            f"{self._budget / 2**30:.1f} GiB, engine {self.engine.name}, store {self.store.uri}, "
            f"logs {self.folder}"
        )
        metadata = {k: v for k, v in workflow.get("metadata", {}).items() if k != "generateName"}
        named = {**workflow, "metadata": metadata | {"name": name}}
        outcome.write_json(self.folder / outcome.WORKFLOW_FILE, named)
        self._nodes: dict[str, list[Node]] = {}
        try:
            return self._record(self._drive(dag))
        except BaseException:  # Ctrl-C: what ended so far, to take the run up again
            self._record("Failed", "stopped before its end")
            raise

    def retry(self, run: str) -> outcome.RunResult:
        """Take up a failed or cut-short `run` as `argo retry` does, reusing its succeeded nodes."""
        folder = self.logs_dir / run
        try:
            workflow = json.loads((folder / outcome.WORKFLOW_FILE).read_text())
            summary = json.loads((folder / outcome.SUMMARY_FILE).read_text())
        except (OSError, ValueError):
            raise WorkflowError(f"no local run {run} to retry in {self.logs_dir}") from None
        if summary["phase"] == "Succeeded":
            raise WorkflowError(f"run {run} succeeded: there is nothing to retry")
        fields = ("name", "task", "template", "arguments", "outputs")
        reused: dict[str, Any] = {"phase": "Succeeded", "message": "it succeeded before"}
        done = [
            Node(**{key: node[key] for key in fields}, log=Path(node["log"]), **reused)
            for node in summary["nodes"]
            if node["phase"] == "Succeeded"
        ]
        return self.run(workflow, done=done)

    def _record(self, phase: str, message: str | None = None) -> outcome.RunResult:
        """The run as it stands, also written to its summary.json."""
        every = [node for task_nodes in self._nodes.values() for node in task_nodes]
        if message is None:
            message = "" if phase in ("Succeeded", "Running") else outcome.failure_message(every)
        result = outcome.RunResult(self.spec.name, phase, every, message)
        outcome.write_summary(result, self.folder, self.engine.name, self.console.started)
        return result

    def _drive(self, dag: Dag) -> str:
        """Start tasks as their depends allow, until the DAG's phase is decided."""
        running: dict[Future, Node] = {}
        queue: list[Node] = []  # nodes whose dependencies are met, waiting for room
        with ThreadPoolExecutor(max_workers=self.parallelism) as pool:
            try:
                while True:
                    for task in (task for task in dag.order if task not in self._nodes):
                        queue += self._consider(dag, task)
                    self._admit(pool, running, queue)
                    phase = plan.dag_phase(dag, self._nodes)
                    if not running:  # nothing runs and nothing can start: a task never fulfilled
                        return "Failed" if phase == "Running" else phase
                    finished, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in finished:
                        running.pop(future)
                        future.result()  # a bug in the runner itself surfaces here
                    if finished:
                        self._record("Running")
                    for node in running.values():
                        node.progress = read_progress(node.progress_file) or node.progress
                    self.console.progress(
                        {n.name: n.progress for n in running.values() if n.progress}
                    )
            except BaseException as error:  # Ctrl-C, or a bug in the runner: stop every task
                self.console.progress({})  # the status line cleared
                if isinstance(error, KeyboardInterrupt):
                    self.console.echo("interrupted: stopping every task")
                self._stopping.set()
                self.engine.stop_all()
                for future in running:
                    future.cancel()
                raise

    def _consider(self, dag: Dag, task: str) -> list[Node]:
        """Once `task`'s dependencies are fulfilled: its nodes to run, or it is Omitted, Skipped or Error."""
        if (verdict := plan.verdict(dag, task, self._nodes)) is None:
            return []
        template = dag.tasks[task]["template"]
        phase, message = "Omitted", "omitted: depends condition not met"
        try:
            expanded = plan.expand(dag.tasks[task], self._task_values()) if verdict else []
            phase, message = ("Skipped", "Skipped, empty params") if verdict else (phase, message)
        except (ValueError, UnresolvedReference) as error:
            expanded, phase, message = [], "Error", str(error)
        made = [self._done.get(n) or self._node(n, task, template, a) for n, a in expanded]
        self._nodes[task] = made or [
            self._node(task, task, template, {}, phase=phase, message=message)
        ]
        for node in self._nodes[task]:
            if node.phase != "Pending":
                said = "reused" if node.phase == "Succeeded" else node.phase.lower()
                self.console.say(f"{said:<8} {node.name}: {node.message}")
        return [node for node in made if node.phase == "Pending"]

    def _task_values(self) -> dict[str, str]:
        """Globals plus `tasks.<name>.outputs.parameters.<p>` of single-node tasks ('' when Omitted)."""
        values = dict(self.spec.globals)
        for task, (first, *more) in self._nodes.items():
            outputs = self.spec.steps[first.template].template.get("outputs", {})
            for parameter in outputs.get("parameters", []) if not more else []:
                value = first.outputs.get(parameter["name"], "")
                values[f"tasks.{task}.outputs.parameters.{parameter['name']}"] = value
        return values

    def _node(self, name: str, task: str, template: str, arguments: dict, **state: Any) -> Node:
        log = self.folder / f"{safe_filename(name)}.log"
        return Node(name, task, template, arguments, log, **state)

    def _admit(
        self, pool: ThreadPoolExecutor, running: dict[Future, Node], queue: list[Node]
    ) -> None:
        """Start queued nodes while fewer than `parallelism` run and their memory fits (one always may)."""
        used = sum(self.spec.steps[node.template].memory for node in running.values())
        while queue:
            cost = self.spec.steps[queue[0].template].memory
            if running and (len(running) >= self.parallelism or used + cost > self._budget):
                return
            node, used = queue.pop(0), used + cost
            threads = max(1, self.cores // (len(running) + 1))
            running[pool.submit(self._run_node, node, threads)] = node

    def _run_node(self, node: Node, threads: int) -> None:
        """Try `node` until it succeeds or its retry rule says no more."""
        rule = self.spec.steps[node.template].rule
        node.started, node.phase = time.monotonic(), "Running"
        self.console.say(f"started  {node.name}")
        while (attempt := self._attempt(node, threads)) is not None:
            node.tries.append(attempt)
            node.message = attempt.message
            now = time.monotonic()
            while isinstance(
                decision := decide(rule, node.tries, now, self._deadline, self._stopping.is_set()),
                float,
            ):
                self.console.say(
                    f"backoff  {node.name}: {decision - now:.0f}s before deciding on a retry"
                )
                self._stopping.wait(max(0.0, decision - now))
                now = time.monotonic()
            if decision is not None:
                node.phase = attempt.phase
                node.message += f" ({decision})" if decision != attempt.message else ""
                break
            of = f" of {rule.limit + 1}" if rule else ""
            self.console.say(
                f"retrying {node.name} (attempt {len(node.tries) + 1}{of}): {attempt.message}"
            )
        else:
            node.phase = "Succeeded"
        node.finished = time.monotonic()
        if node.phase == "Succeeded":
            tries = f", {len(node.tries)} failed tries" if node.tries else ""
            progress = f", progress {node.progress}" if node.progress else ""
            self.console.say(f"done     {node.name} ({node.duration:.1f}s{tries}{progress})")
        else:
            retried = f", {len(node.tries) - 1} retries" if len(node.tries) > 1 else ""
            self.console.say(
                f"{node.phase.upper():<8} {node.name} ({node.duration:.1f}s{retried}): {node.message}"
            )

    def _attempt(self, node: Node, threads: int) -> Attempt | None:
        """One try: None when it succeeded, else what went wrong (Failed: the step; Error: the runner)."""
        started = time.monotonic()

        def ended(phase: str, message: str, exit_code: int | None = None) -> Attempt:
            return Attempt(phase, exit_code, message, started, time.monotonic())

        step_deadline = self.spec.steps[node.template].deadline
        limits = [step_deadline, self._deadline and self._deadline - started]
        timeout = min([limit for limit in limits if limit is not None], default=None)
        if self._stopping.is_set():
            return ended("Failed", STOPPED)
        if timeout is not None and timeout <= 0:
            return ended("Failed", "Step exceeded its deadline")
        prefix = f"{safe_filename(node.name)}-"
        with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as folder:
            try:
                invocation, resolved = self._invocation(node, Path(folder), threads)
                load_inputs(self.store, resolved["inputs"], invocation)
            except UnresolvedReference as error:
                return ended("Error", str(error))
            except (StepError, OSError) as error:  # ArtifactNotFound among them
                return ended("Error", f"init: {error}")
            node.progress_file = invocation.progress_file
            with node.log.open("a") as log:
                log.write(f"--- attempt {len(node.tries) + 1}: {' '.join(invocation.command)}\n")
                try:
                    exit_code = self.engine.execute(invocation, log, timeout)
                except EngineError as error:  # the pod never ran: Argo's init/wait trouble
                    return ended("Error", str(error))
            node.progress = read_progress(invocation.progress_file) or node.progress
            saved = save_outputs(self.store, resolved["outputs"], invocation)
            if self._stopping.is_set():
                return ended("Failed", STOPPED, exit_code)
            if exit_code is None:
                return ended("Failed", POD_DEADLINE_MESSAGE)
            if exit_code != 0:
                return ended(
                    "Failed", f"{exit_description(exit_code)}: {last_line(node.log)}", exit_code
                )
            try:
                if saved:
                    raise ValueError(saved)
                node.outputs = output_parameters(resolved["outputs"], invocation)
            except (OSError, ValueError) as error:
                return ended("Error", f"wait: {error}", exit_code)
            return None

    def _invocation(self, node: Node, attempt_dir: Path, threads: int) -> tuple[Invocation, dict]:
        """The try's invocation and its template's container, inputs and outputs, their tags filled in."""
        step = self.spec.steps[node.template]
        where = f"template {node.template!r}"
        arguments = {f"inputs.parameters.{name}": v for name, v in node.arguments.items()}
        parts = {key: step.template.get(key, {}) for key in ("container", "inputs", "outputs")}
        resolved = spec.substitute(parts, self.spec.globals | arguments, where)
        container = resolved["container"]
        for folder in ("work", "argo"):
            (attempt_dir / folder).mkdir()
        invocation = Invocation(
            name=node.name,
            image=container["image"],
            command=[*container["command"], *container.get("args", [])],
            environment={"TF_NUM_INTRAOP_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)},
            working_dir=PurePosixPath(container.get("workingDir", "/")),
            host_dir=attempt_dir / "work",
            inputs=tuple(PurePosixPath(a["path"]) for a in resolved["inputs"].get("artifacts", [])),
            scratch=step.scratch,
            progress_file=attempt_dir / "argo" / "progress",
            cpus=step.cpus,
            memory=step.memory,
            on_output=lambda line: self.console.say(f"{node.name}: {line[:MAX_SHOWN_LINE]}"),
        )
        return invocation, resolved


def available_memory() -> int:
    """Bytes of memory free now (Linux: MemAvailable), else all of it."""
    meminfo = Path("/proc/meminfo")
    for line in meminfo.read_text().splitlines() if meminfo.exists() else []:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
