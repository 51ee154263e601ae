"""The local engine: runs a compiled Workflow on this machine as Argo v4.1.2's controller would on a cluster.

What follows the controller (docs/local-runner.md lists every difference, "Where the local runner still differs
from Argo"):
- the DAG: a task starts once every task its `depends` names is fulfilled and the expression holds, else it is
  Omitted; a failed task stops nothing already running; the run's phase comes from the target tasks
  (workflows/local/dag.py, after controller/dag.go);
- each node's tries: a step's non-zero exit is Failed, the runner's own artifact trouble is Error, retries are
  decided in processNodeRetries' order (workflows/local/retries.py), template and workflow activeDeadlineSeconds end a
  try as Failed;
- artifacts are loaded and saved as argoexec does, outputs whatever the exit code (workflows/local/artifacts.py);
- steps report progress through ARGO_PROGRESS_FILE (workflows/local/progress.py), and what a step prints to
  stdout is shown as it comes, after the task's name (on a cluster: its pod's log, `argo logs`);
- ready tries start in order while they fit, as the scheduler places pods by their requests: at most
  `parallelism` at once and their memory requests within the memory free at the start;
Each try runs through an engine (workflows/local/engines.py): a process here, or the steps' container image.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import string
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from steps.lib.errors import StepError
from steps.lib.storage import ArtifactStore
from workflows.common import tags
from workflows.common.durations import deadline_seconds
from workflows.errors import (
    UnresolvedReference,
    UnsupportedFeature,
    WorkflowError,
)
from workflows.local import artifacts, retries
from workflows.local.containers import memory_bytes
from workflows.local.dag import Dag, TaskOutcome, assess, read_dag, should_run
from workflows.local.engines import (
    DeadlineExceeded,
    Engine,
    EngineError,
    Invocation,
    ProcessEngine,
    exit_description,
)
from workflows.local.progress import ProgressReport, read_progress
from workflows.local.spec_rules import Invalid, any_string, validate_arguments
from workflows.local.supported import check_supported, emptydir_mounts, templates_by_name

LOG_TAIL_LINES = 15
FINAL = {"Succeeded", "Failed", "Error", "Omitted", "Skipped"}
POLL_SECONDS = 1.0
MAX_PARALLELISM = 64  # at most this many tries at once, whatever --parallelism says
TRIES_PER_CORE = 2  # without --parallelism: a few more tries than cores keep the cores busy
POD_DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
SUMMARY_FILE = "summary.json"
MAX_SHOWN_LINE = 400  # characters of a step's stdout line shown as the run goes (the log keeps all)


@dataclass
class Node:
    """One execution of a template: a DAG task, one item of a task's fan-out, or an Omitted/Skipped task."""

    name: str
    task: str
    template: str
    arguments: dict[str, str]
    log: Path
    phase: str = "Pending"
    tries: list[retries.Attempt] = field(default_factory=list)
    message: str = ""
    started: float | None = None
    finished: float | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    progress: str = ""
    progress_file: Path | None = None

    @property
    def attempts(self) -> int:
        return len(self.tries) + (self.phase == "Succeeded")

    @property
    def exit_code(self) -> int | None:
        return self.tries[-1].exit_code if self.tries and self.phase != "Succeeded" else None

    @property
    def duration(self) -> float:
        return (self.finished or time.monotonic()) - (self.started or time.monotonic())


@dataclass
class RunResult:
    name: str
    phase: str
    nodes: list[Node]
    message: str = ""
    summary: Path | None = None

    @property
    def tolerated_failures(self) -> list[Node]:
        """Nodes that failed in a run that still succeeded (or every failed node of a failed run)."""
        return [node for node in self.nodes if node.phase in ("Failed", "Error")]

    def output(self, task: str, parameter: str) -> str | None:
        for node in self.nodes:
            if node.task == task and parameter in node.outputs:
                return node.outputs[parameter]
        return None


def generate_name(prefix: str) -> str:
    """A name as Kubernetes' generateName makes it: the prefix and five random characters."""
    return prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")


class LocalRunner:
    """Holds what a run shares across threads: the store, the engine, the clock and the output."""

    def __init__(
        self,
        store: ArtifactStore,
        logs_dir: Path,
        parallelism: int | None = None,
        echo: Callable[[str], None] = print,
        engine: Engine | None = None,
        image: str | None = None,
        live_progress: bool | None = None,
        cores: int | None = None,
        memory: int | None = None,
    ) -> None:
        self.store = store
        self.logs_dir = Path(logs_dir)
        self.cores = cores or os.cpu_count() or 1
        self.parallelism = min(parallelism or TRIES_PER_CORE * self.cores, MAX_PARALLELISM)
        # What the tries running at once may ask for, as Kubernetes places pods by their memory
        # requests: the memory free when the run starts, unless given.
        self.memory = memory
        self._budget = memory or 0
        self._queue: list[Node] = []  # nodes whose dependencies are met, waiting for room
        self._active = 0  # tries submitted and not yet finished: they share the cores
        self.echo = echo
        self.engine = engine or ProcessEngine()
        self.image = image
        live = sys.stdout.isatty() and echo is print if live_progress is None else live_progress
        self.progress = ProgressReport(echo, live)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._started = time.monotonic()
        self._deadline: float | None = None

    # ---- the run ------------------------------------------------------------------------------

    def run(
        self, workflow: Mapping[str, Any], parameters: Mapping[str, str] | None = None
    ) -> RunResult:
        """Run `workflow` to the end; returns its result (phase Succeeded, Failed or Error)."""
        check_supported(workflow)
        self.workflow = workflow
        metadata = workflow.get("metadata", {})
        name = metadata.get("name") or generate_name(metadata.get("generateName", "run-"))
        spec = workflow["spec"]
        self.templates = templates_by_name(workflow)
        self.globals = self._globals(name, spec, parameters or {})
        entry = self.templates.get(spec["entrypoint"])
        if entry is None or "dag" not in entry:
            raise UnsupportedFeature("the local runner needs a dag template as the entrypoint")
        try:
            dag = read_dag(entry)
        except ValueError as error:
            raise WorkflowError(str(error)) from None
        for task in dag.tasks.values():
            if task["template"] not in self.templates:
                raise WorkflowError(
                    f"task {task['name']!r} names a template that does not exist: {task['template']!r}"
                )
        self._started = time.monotonic()
        limit = deadline_seconds(spec.get("activeDeadlineSeconds"))
        self._deadline = self._started + limit if limit is not None else None
        self._stopping.clear()
        self._queue.clear()
        self._budget = self.memory or available_memory()
        self.echo(
            f"run {name}: {len(dag.tasks)} tasks, parallelism {self.parallelism}, memory "
            f"{self._budget / 2**30:.1f} GiB, engine {self.engine.name}, store {self.store.uri}, "
            f"logs {self.logs_dir / name}"
        )
        nodes: dict[str, list[Node]] = {}
        phase = self._drive(name, dag, nodes)
        every = [node for task_nodes in nodes.values() for node in task_nodes]
        message = "" if phase == "Succeeded" else self._failure_message(every)
        result = RunResult(name, phase, every, message)
        result.summary = self._write_summary(result)
        return result

    def _globals(self, name: str, spec: Mapping[str, Any], given: Mapping[str, str]) -> dict:
        declared = {
            p["name"]: any_string(p.get("value", p.get("default", "")))
            for p in spec.get("arguments", {}).get("parameters", [])
        }
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise WorkflowError(f"no workflow parameter named {', '.join(unknown)}")
        # the values given at submit are checked with the spec's own (validate.go:validateArguments), as
        # Argo refuses a run from the Submit form whose value is not in the parameter's enum
        submitted = [
            parameter | ({"value": given[parameter["name"]]} if parameter["name"] in given else {})
            for parameter in spec.get("arguments", {}).get("parameters", [])
        ]
        try:
            validate_arguments(
                "spec.arguments.", {"parameters": submitted}, allow_empty_values=False
            )
        except Invalid as fault:
            raise WorkflowError(str(fault)) from None
        declared.update(given)
        return {"workflow.name": name} | {
            f"workflow.parameters.{key}": value for key, value in declared.items()
        }

    def _drive(self, run: str, dag: Dag, nodes: dict[str, list[Node]]) -> str:
        """Start tasks as their depends allow, until the DAG's phase is decided."""
        running: dict[Future, Node] = {}
        with ThreadPoolExecutor(max_workers=self.parallelism) as pool:
            try:
                while True:
                    for task in dag.order():
                        if task not in nodes:
                            self._consider(run, dag, task, nodes)
                    self._admit(pool, running)
                    phase = assess(dag, self._outcomes(dag, nodes))
                    if phase != "Running" and not running:
                        return phase
                    if not running:  # nothing runs and nothing can start: a task never fulfilled
                        return "Failed"
                    done, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        running.pop(future)
                        future.result()  # a bug in the runner itself surfaces here
                    self._show_progress(running.values())
            except BaseException as error:  # Ctrl-C, or a spec that cannot run: stop every task
                self.progress.clear()
                if isinstance(error, KeyboardInterrupt):
                    self.echo("interrupted: stopping every task")
                self._stopping.set()
                self.engine.stop_all()
                for future in running:
                    future.cancel()
                raise

    def _consider(self, run: str, dag: Dag, task: str, nodes: dict[str, list[Node]]) -> None:
        """Queue, omit or skip `task` once its dependencies are fulfilled."""
        verdict = should_run(dag, task, self._outcomes(dag, nodes))
        if verdict is None:
            return
        spec = dag.tasks[task]
        if not verdict:
            nodes[task] = [
                self._final_node(run, spec, "Omitted", "omitted: depends condition not met")
            ]
            return
        try:
            expanded = self._expand(run, spec, nodes)
        except (ValueError, UnresolvedReference) as error:
            nodes[task] = [self._final_node(run, spec, "Error", str(error))]
            return
        if not expanded:
            nodes[task] = [self._final_node(run, spec, "Skipped", "Skipped, empty params")]
            return
        nodes[task] = expanded
        self._queue.extend(expanded)

    def _admit(self, pool: ThreadPoolExecutor, running: dict[Future, Node]) -> None:
        """Start queued nodes, in order, while they fit: at most `parallelism` at once, and the memory
        their templates request within the budget (one always starts when nothing runs)."""
        used = sum(self._memory_request(node) for node in running.values())
        while self._queue:
            node = self._queue[0]
            cost = self._memory_request(node)
            if running and (len(running) >= self.parallelism or used + cost > self._budget):
                return
            self._queue.pop(0)
            used += cost
            with self._lock:
                self._active += 1
            running[pool.submit(self._run_node, node, self.templates[node.template])] = node

    def _memory_request(self, node: Node) -> int:
        """The memory a try of `node` asks for: its container's requests, else its limits, else 0."""
        resources = self.templates[node.template].get("container", {}).get("resources", {})
        quantity = resources.get("requests", {}).get("memory") or resources.get("limits", {}).get(
            "memory"
        )
        try:
            return memory_bytes(str(quantity)) if quantity else 0
        except ValueError:
            return 0

    def _outcomes(self, dag: Dag, nodes: Mapping[str, list[Node]]) -> dict[str, TaskOutcome]:
        outcomes = {}
        for task, task_nodes in nodes.items():
            fan_out = any(key in dag.tasks[task] for key in ("withParam", "withItems"))
            phases = tuple(n.phase if n.phase in FINAL else None for n in task_nodes)
            if fan_out and task_nodes[0].phase not in ("Omitted", "Skipped", "Error"):
                outcomes[task] = TaskOutcome(None, phases)
            else:
                outcomes[task] = TaskOutcome(phases[0])
        return outcomes

    def _show_progress(self, running: Any) -> None:
        progress = {}
        for node in running:
            value = read_progress(node.progress_file)
            if value:
                node.progress = value
                progress[node.name] = value
        with self._lock:
            self.progress.update(progress, time.monotonic() - self._started)

    # ---- tasks into nodes -----------------------------------------------------------------------

    def _task_values(self, nodes: Mapping[str, list[Node]]) -> dict[str, str]:
        """Globals plus `tasks.<name>.outputs.parameters.<p>` of single-node tasks ('' when Omitted)."""
        values = dict(self.globals)
        for task, task_nodes in nodes.items():
            if len(task_nodes) != 1:
                continue
            node = task_nodes[0]
            declared = self.templates[node.template].get("outputs", {}).get("parameters", [])
            for parameter in declared:
                value = node.outputs.get(parameter["name"], "")
                values[f"tasks.{task}.outputs.parameters.{parameter['name']}"] = value
        return values

    def _expand(self, run: str, task: Mapping[str, Any], nodes: Mapping[str, list[Node]]) -> list:
        """The task's nodes: one, or one per item of its withParam / withItems list."""
        values = self._task_values(nodes)
        where = f"task {task['name']!r}"
        arguments = {
            p["name"]: p.get("value", "") for p in task.get("arguments", {}).get("parameters", [])
        }
        if "withParam" not in task and "withItems" not in task:
            resolved = {
                key: substitute(any_string(v), values, where) for key, v in arguments.items()
            }
            return [self._node(run, task["name"], task, resolved)]
        if "withItems" in task:
            items = task["withItems"]
        else:
            text = substitute(task["withParam"], values, where)
            try:
                items = json.loads(text)
            except ValueError:
                items = None
            if not isinstance(items, list):
                raise ValueError(
                    f"withParam value could not be parsed as a JSON list: {text.strip()}"
                )
        expanded = []
        for index, item in enumerate(items):
            label = item if isinstance(item, str) else json.dumps(item)
            item_values = values | {"item": label}
            if isinstance(item, dict):
                item_values |= {f"item.{key}": str(value) for key, value in item.items()}
            resolved = {
                key: substitute(any_string(v), item_values, where) for key, v in arguments.items()
            }
            expanded.append(self._node(run, f"{task['name']}({index}:{label})", task, resolved))
        return expanded

    def _node(self, run: str, name: str, task: Mapping[str, Any], arguments: dict) -> Node:
        return Node(
            name=name,
            task=task["name"],
            template=task["template"],
            arguments=arguments,
            log=self.logs_dir / run / f"{safe_filename(name)}.log",
        )

    def _final_node(self, run: str, task: Mapping[str, Any], phase: str, message: str) -> Node:
        node = self._node(run, task["name"], task, {})
        node.phase, node.message = phase, message
        self._say(f"{phase.lower():<8} {node.name}: {message}")
        return node

    # ---- one node: its tries and retries -------------------------------------------------------

    def _say(self, text: str) -> None:
        with self._lock:
            self.progress.clear()
            self.echo(f"{time.monotonic() - self._started:7.1f}s  {text}")

    def _run_node(self, node: Node, template: Mapping[str, Any]) -> None:
        try:
            self._run_tries(node, template)
        finally:
            with self._lock:
                self._active -= 1

    def _run_tries(self, node: Node, template: Mapping[str, Any]) -> None:
        strategy = template.get("retryStrategy")
        node.started = time.monotonic()
        node.log.parent.mkdir(parents=True, exist_ok=True)
        node.phase = "Running"
        self._say(f"started  {node.name}")
        retry_deadline = None
        while True:
            attempt = self._attempt(node, template, retry_deadline)
            if attempt is None:
                node.phase = "Succeeded"
                break
            node.tries.append(attempt)
            node.message = attempt.message
            decision = self._decide(node, strategy)
            if isinstance(decision, retries.Stop):
                node.phase = attempt.phase
                if decision.message != attempt.message:
                    node.message = f"{attempt.message} ({decision.message})"
                break
            retry_deadline = decision.deadline
            limit = retries.limit_of(strategy or {})
            of = "" if limit is None else f" of {limit + 1}"
            self._say(
                f"retrying {node.name} (attempt {len(node.tries) + 1}{of}): {attempt.message}"
            )
        node.finished = time.monotonic()
        tries = (
            f", {len(node.tries)} failed tries" if node.tries and node.phase == "Succeeded" else ""
        )
        retried = f", {len(node.tries) - 1} retries" if len(node.tries) > 1 else ""
        progress = f", progress {node.progress}" if node.progress else ""
        if node.phase == "Succeeded":
            self._say(f"done     {node.name} ({node.duration:.1f}s{tries}{progress})")
        else:
            self._say(
                f"{node.phase.upper():<8} {node.name} ({node.duration:.1f}s{retried}): {node.message}"
            )

    def _decide(
        self, node: Node, strategy: Mapping[str, Any] | None
    ) -> retries.Stop | retries.Retry:
        """Wait out Argo's backoff, then whether to try again (retries.decide)."""
        if not strategy:
            return retries.Stop(node.tries[-1].message)
        while True:
            decision = retries.decide(
                strategy, node.tries, time.monotonic(), self._deadline, self._stopping.is_set()
            )
            if not isinstance(decision, retries.Wait):
                return decision
            delay = decision.until - time.monotonic()
            self._say(f"backoff  {node.name}: {delay:.0f}s before deciding on a retry")
            self._stopping.wait(max(0.0, delay))

    def _attempt(
        self, node: Node, template: Mapping[str, Any], retry_deadline: float | None
    ) -> retries.Attempt | None:
        """One try: None when it succeeded, else what went wrong (Failed: the step; Error: the runner)."""
        started = time.monotonic()

        def ended(phase: str, message: str, exit_code: int | None = None) -> retries.Attempt:
            return retries.Attempt(phase, exit_code, message, started, time.monotonic())

        if self._stopping.is_set():
            return ended("Failed", "Stopped with strategy 'Stop'")
        timeout = self._timeout(template, retry_deadline)
        if timeout is not None and timeout <= 0:
            return ended("Failed", "Step exceeded its deadline")
        try:
            resolved = self._resolve(node, template)
        except (UnresolvedReference, UnsupportedFeature) as error:
            return ended("Error", str(error))
        attempt_dir = Path(tempfile.mkdtemp(prefix=f"{safe_filename(node.name)}-"))
        try:
            invocation = self._invocation(node, resolved, attempt_dir)
            try:
                for artifact in resolved["inputs"]:
                    artifacts.load_input(
                        self.store, artifact, invocation.host_path(artifact["path"])
                    )
            except (StepError, OSError) as error:  # ArtifactNotFound among them
                return ended("Error", f"init: {error}")
            node.progress_file = invocation.progress_file
            with node.log.open("a") as log:
                log.write(f"--- attempt {len(node.tries) + 1}: {' '.join(invocation.command)}\n")
                log.flush()
                try:
                    exit_code, deadline_hit = self._execute(invocation, log, timeout)
                except EngineError as error:  # the pod never ran: Argo's init/wait trouble
                    return ended("Error", str(error))
            node.progress = read_progress(invocation.progress_file) or node.progress
            saved = self._save_outputs(resolved["outputs"], invocation)
            if self._stopping.is_set():
                return ended("Failed", "Stopped with strategy 'Stop'", exit_code)
            if deadline_hit:
                return ended("Failed", POD_DEADLINE_MESSAGE)
            if exit_code != 0:
                message = f"{exit_description(exit_code)}: {_last_line(node.log)}"
                return ended("Failed", message, exit_code)
            if saved:
                return ended("Error", f"wait: {saved}", exit_code)
            try:
                node.outputs = self._output_parameters(resolved["outputs"], invocation)
            except (OSError, ValueError) as error:
                return ended("Error", f"wait: {error}", exit_code)
            return None
        finally:
            shutil.rmtree(attempt_dir, ignore_errors=True)

    def _timeout(self, template: Mapping[str, Any], retry_deadline: float | None) -> float | None:
        """Seconds this try may run: the template's deadline, maxDuration's, the workflow's."""
        now = time.monotonic()
        limits = [
            deadline_seconds(template.get("activeDeadlineSeconds")),
            None if retry_deadline is None else retry_deadline - now,
            None if self._deadline is None else self._deadline - now,
        ]
        present = [limit for limit in limits if limit is not None]
        return min(present) if present else None

    def _resolve(self, node: Node, template: Mapping[str, Any]) -> dict[str, Any]:
        """The template with its inputs, the workflow's globals and the node's arguments filled in."""
        where = f"template {template['name']!r}"
        values = dict(self.globals)
        for parameter in template.get("inputs", {}).get("parameters", []):
            value = node.arguments.get(parameter["name"], parameter.get("value"))
            if value is None:
                value = parameter.get("default")
            if value is None:
                raise UnresolvedReference(
                    f"input parameter {parameter['name']!r} has no value ({where})"
                )
            values[f"inputs.parameters.{parameter['name']}"] = any_string(value)
        return {
            "container": substitute(template["container"], values, where),
            "inputs": substitute(template.get("inputs", {}).get("artifacts", []), values, where),
            "outputs": substitute(template.get("outputs", {}), values, where),
            "scratch": emptydir_mounts(self.workflow, template),
        }

    def _invocation(self, node: Node, resolved: Mapping[str, Any], attempt_dir: Path) -> Invocation:
        container = resolved["container"]
        command = [*container["command"], *container.get("args", [])]
        working_dir = PurePosixPath(container.get("workingDir", "/"))
        outputs = resolved["outputs"]
        paths = [a["path"] for a in outputs.get("artifacts", [])]
        paths += [p["valueFrom"]["path"] for p in outputs.get("parameters", [])]
        for path in [*paths, *(a["path"] for a in resolved["inputs"])]:
            if PurePosixPath(path).is_absolute() and working_dir not in PurePosixPath(path).parents:
                raise UnsupportedFeature(
                    f"the local runner needs artifact paths under workingDir {working_dir}, got {path}"
                )
        limits = container.get("resources", {}).get("limits", {})
        (attempt_dir / "work").mkdir()
        (attempt_dir / "argo").mkdir()
        return Invocation(
            name=node.name,
            image=self.image or container.get("image", ""),
            command=command,
            environment=self._thread_environment()
            | {v["name"]: v.get("value", "") for v in container.get("env", [])},
            working_dir=working_dir,
            host_dir=attempt_dir / "work",
            inputs=tuple(PurePosixPath(a["path"]) for a in resolved["inputs"]),
            outputs=tuple(PurePosixPath(path) for path in paths),
            scratch=tuple(PurePosixPath(path) for path in resolved["scratch"]),
            progress_file=attempt_dir / "argo" / "progress",
            cpu_limit=limits.get("cpu"),
            memory_limit=limits.get("memory"),
            network=any("://" in part for part in command),
            mounts=_host_paths(command),
            on_output=lambda line: self._say(f"{node.name}: {line[:MAX_SHOWN_LINE]}"),
        )

    def _thread_environment(self) -> dict[str, str]:
        """Thread pools sized so the tries running together share the cores instead of fighting over
        them: one TensorFlow process does not keep two cores busy, two processes with one thread each do."""
        with self._lock:
            sharing = max(1, min(self._active, self.parallelism))
        threads = str(max(1, self.cores // sharing))
        return {"TF_NUM_INTRAOP_THREADS": threads, "OMP_NUM_THREADS": threads}

    def _execute(self, invocation: Invocation, log: TextIO, timeout: float | None) -> tuple:
        """(exit code, whether the deadline stopped it)."""
        try:
            return self.engine.execute(invocation, log, timeout), False
        except DeadlineExceeded:
            return None, True

    def _save_outputs(self, outputs: Mapping[str, Any], invocation: Invocation) -> str:
        """Save every output artifact that exists, whatever the exit code; '' or what went wrong."""
        problems = []
        for artifact in outputs.get("artifacts", []):
            try:
                saved = artifacts.save_output(
                    self.store, artifact, invocation.host_path(artifact["path"])
                )
            except (OSError, StepError) as error:
                problems.append(f"output artifact {artifact['name']!r}: {error}")
                continue
            if not saved and not artifact.get("optional"):
                problems.append(
                    f"output artifact {artifact['name']!r} was not written at {artifact['path']}"
                )
        return "; ".join(problems)

    def _output_parameters(self, outputs: Mapping[str, Any], invocation: Invocation) -> dict:
        values = {}
        for parameter in outputs.get("parameters", []):
            source = parameter["valueFrom"]
            path = invocation.host_path(source["path"])
            if path.is_file():
                values[parameter["name"]] = path.read_text().strip()
            elif "default" in source:
                values[parameter["name"]] = str(source["default"])
            else:
                raise ValueError(
                    f"output parameter {parameter['name']!r}: {source['path']} not found"
                )
        return values

    # ---- reporting ------------------------------------------------------------------------------

    def _failure_message(self, nodes: list[Node]) -> str:
        failed = [node for node in nodes if node.phase in ("Failed", "Error")]
        if not failed:
            return "the run did not succeed"
        node = max(failed, key=lambda n: n.finished or 0)  # the failure that decided the run
        tail = (
            node.log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            if node.log.exists()
            else []
        )
        lines = [f"{node.name} failed: {node.message}"] + [f"  | {line}" for line in tail]
        return "\n".join(lines)

    def _write_summary(self, result: RunResult) -> Path:
        """The run as data, for tools: every node with its phase, tries, timings and outputs."""
        folder = self.logs_dir / result.name
        folder.mkdir(parents=True, exist_ok=True)
        summary = {
            "name": result.name,
            "phase": result.phase,
            "message": result.message,
            "engine": self.engine.name,
            "seconds": time.monotonic() - self._started,
            "nodes": [
                {
                    "name": node.name,
                    "task": node.task,
                    "template": node.template,
                    "phase": node.phase,
                    "message": node.message,
                    "started": None if node.started is None else node.started - self._started,
                    "finished": None if node.finished is None else node.finished - self._started,
                    "tries": [
                        asdict(t)
                        | {
                            "started": t.started - self._started,
                            "finished": t.finished - self._started,
                        }
                        for t in node.tries
                    ],
                    "attempts": node.attempts,
                    "outputs": node.outputs,
                    "progress": node.progress,
                    "log": str(node.log),
                }
                for node in result.nodes
            ],
        }
        path = folder / SUMMARY_FILE
        path.write_text(json.dumps(summary, indent=2))
        return path


def substitute(value: Any, values: Mapping[str, str], where: str) -> Any:
    """`value` with every `{{…}}` replaced as the controller replaces it (workflows/common/tags.py); a tag
    without a value, or an unclosed one, is an UnresolvedReference naming `where`."""
    try:
        return tags.substitute_value(value, values)
    except (tags.UnresolvedTag, tags.TagError) as fault:
        raise UnresolvedReference(f"{fault} ({where})") from None


def available_memory() -> int:
    """Bytes of memory free for new processes now (Linux: MemAvailable), else all of it."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _host_paths(command: list[str]) -> tuple[tuple[Path, bool], ...]:
    """Absolute paths of this machine a step names (a folder store: writable; a data file: read-only)."""
    found = []
    for part in command:
        if part.startswith("/") and Path(part).exists():
            found.append((Path(part), Path(part).is_dir()))
    return tuple(found)


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
