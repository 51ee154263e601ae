"""The local run: `LocalRunner.run` reads the compiled Workflow (spec.py, retries.py), walks its DAG (plan.py),
runs each node's tries through an engine (engines.py, containers.py) with its artifacts (artifacts.py), retrying
as the template says, and reports (console.py, outcome.py), as Argo v4.1.4's controller would on a cluster.

Ready tries start in order while they fit, as the scheduler places pods by their requests: at most
`parallelism` at once and their memory requests within the memory free at the start. A failed task stops
nothing already running. Ctrl-C stops every try.
"""

from __future__ import annotations

import os
import re
import shutil
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
from workflows.errors import UnresolvedReference, UnsupportedFeature
from workflows.local import artifacts, outcome, plan, retries, spec
from workflows.local.console import Console, read_progress
from workflows.local.containers import memory_bytes
from workflows.local.engines import (
    DeadlineExceeded,
    Engine,
    EngineError,
    Invocation,
    ProcessEngine,
    exit_description,
)
from workflows.local.plan import Dag, Node
from workflows.local.retries import Attempt

POLL_SECONDS = 1.0
MAX_PARALLELISM = 64  # at most this many tries at once, whatever --parallelism says
TRIES_PER_CORE = 2  # without --parallelism: a few more tries than cores keep the cores busy
POD_DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
STOPPED = "Stopped with strategy 'Stop'"
MAX_SHOWN_LINE = 400  # characters of a step's stdout line shown as the run goes (the log keeps all)


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
        live_progress: bool | None = None,
        cores: int | None = None,
        memory: int | None = None,
    ) -> None:
        self.store = store
        self.logs_dir = Path(logs_dir)
        self.cores = cores or os.cpu_count() or 1
        self.parallelism = min(parallelism or TRIES_PER_CORE * self.cores, MAX_PARALLELISM)
        self.memory = memory  # what the tries running at once may request; by default what is free
        self.engine = engine or ProcessEngine()
        live = sys.stdout.isatty() and echo is print if live_progress is None else live_progress
        self.console = Console(echo, live)
        self._active = 0  # tries submitted and not yet finished: they share the cores
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._deadline: float | None = None

    def run(self, workflow: Mapping[str, Any], done: Iterable[Node] = ()) -> outcome.RunResult:
        """Run `workflow` to the end (phase Succeeded, Failed or Error); `done`: nodes of an earlier try of
        this run that succeeded, taken as they are instead of run again."""
        self.spec = spec.read(workflow)
        dag = plan.read_dag(self.spec.entry)
        name = self.spec.name
        started = self.console.started = time.monotonic()
        self._deadline = None if self.spec.deadline is None else started + self.spec.deadline
        self._stopping.clear()
        self._budget = self.memory or available_memory()
        self._done = {node.name: node for node in done}
        self.console.say(
            f"run {name}: {len(dag.tasks)} tasks, parallelism {self.parallelism}, memory "
            f"{self._budget / 2**30:.1f} GiB, engine {self.engine.name}, store {self.store.uri}, "
            f"logs {self.logs_dir / name}"
        )
        metadata = {k: v for k, v in workflow.get("metadata", {}).items() if k != "generateName"}
        outcome.write_json(
            self.logs_dir / name / outcome.WORKFLOW_FILE,
            {**workflow, "metadata": metadata | {"name": name}},
        )
        self._nodes: dict[str, list[Node]] = {}
        try:
            phase = self._drive(dag, self._nodes)
        except BaseException:  # Ctrl-C: what ended so far, to take the run up again
            self._record("Failed", "stopped before its end")
            raise
        every = [node for task_nodes in self._nodes.values() for node in task_nodes]
        return self._record(phase, "" if phase == "Succeeded" else outcome.failure_message(every))

    def _record(self, phase: str, message: str = "") -> outcome.RunResult:
        """The run as it stands, also written to its summary.json."""
        every = [node for task_nodes in self._nodes.values() for node in task_nodes]
        result = outcome.RunResult(self.spec.name, phase, every, message)
        folder, started = self.logs_dir / self.spec.name, self.console.started
        result.summary = outcome.write_summary(result, folder, self.engine.name, started)
        return result

    # ---- the DAG ---------------------------------------------------------------------------------

    def _drive(self, dag: Dag, nodes: dict[str, list[Node]]) -> str:
        """Start tasks as their depends allow, until the DAG's phase is decided."""
        running: dict[Future, Node] = {}
        queue: list[Node] = []  # nodes whose dependencies are met, waiting for room
        with ThreadPoolExecutor(max_workers=self.parallelism) as pool:
            try:
                while True:
                    for task in dag.order:
                        if task not in nodes:
                            queue += self._consider(dag, task, nodes)
                    self._admit(pool, running, queue)
                    phase = plan.dag_phase(dag, nodes)
                    if not running:  # nothing runs and nothing can start: a task never fulfilled
                        return "Failed" if phase == "Running" else phase
                    finished, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in finished:
                        running.pop(future)
                        future.result()  # a bug in the runner itself surfaces here
                    if finished:
                        self._record("Running")
                    self._show_progress(running.values())
            except BaseException as error:  # Ctrl-C, or a spec that cannot run: stop every task
                self.console.clear()
                if isinstance(error, KeyboardInterrupt):
                    self.console.echo("interrupted: stopping every task")
                self._stopping.set()
                self.engine.stop_all()
                for future in running:
                    future.cancel()
                raise

    def _consider(self, dag: Dag, task: str, nodes: dict[str, list[Node]]) -> list[Node]:
        """Once `task`'s dependencies are fulfilled: its nodes to run, or it is Omitted, Skipped or Error."""
        verdict = plan.verdict(dag, task, nodes)
        if verdict is None:
            return []
        if not verdict:
            nodes[task] = [self._final(dag, task, "Omitted", "omitted: depends condition not met")]
            return []
        try:
            expanded = plan.expand(dag.tasks[task], self._task_values(nodes))
        except (ValueError, UnresolvedReference) as error:
            nodes[task] = [self._final(dag, task, "Error", str(error))]
            return []
        if not expanded:
            nodes[task] = [self._final(dag, task, "Skipped", "Skipped, empty params")]
            return []
        template = dag.tasks[task]["template"]
        nodes[task] = [self._done.get(n) or self._node(n, task, template, a) for n, a in expanded]
        for node in nodes[task]:
            if node.phase == "Succeeded":
                self.console.say(f"reused   {node.name}: it succeeded before")
        return [node for node in nodes[task] if node.phase != "Succeeded"]

    def _task_values(self, nodes: Mapping[str, list[Node]]) -> dict[str, str]:
        """Globals plus `tasks.<name>.outputs.parameters.<p>` of single-node tasks ('' when Omitted)."""
        values = dict(self.spec.globals)
        for task, task_nodes in nodes.items():
            outputs = self.spec.templates[task_nodes[0].template].get("outputs", {})
            for parameter in outputs.get("parameters", []) if len(task_nodes) == 1 else []:
                value = task_nodes[0].outputs.get(parameter["name"], "")
                values[f"tasks.{task}.outputs.parameters.{parameter['name']}"] = value
        return values

    def _node(self, name: str, task: str, template: str, arguments: dict[str, str]) -> Node:
        return Node(
            name,
            task,
            template,
            arguments,
            self.logs_dir / self.spec.name / f"{safe_filename(name)}.log",
        )

    def _final(self, dag: Dag, task: str, phase: str, message: str) -> Node:
        node = self._node(task, task, dag.tasks[task]["template"], {})
        node.phase, node.message = phase, message
        self.console.say(f"{phase.lower():<8} {node.name}: {message}")
        return node

    def _admit(
        self, pool: ThreadPoolExecutor, running: dict[Future, Node], queue: list[Node]
    ) -> None:
        """Start queued nodes, in order, while they fit: at most `parallelism` at once, and the memory
        their templates request within the budget (one always starts when nothing runs)."""
        used = sum(self._memory_request(node) for node in running.values())
        while queue:
            cost = self._memory_request(queue[0])
            if running and (len(running) >= self.parallelism or used + cost > self._budget):
                return
            node = queue.pop(0)
            used += cost
            with self._lock:
                self._active += 1
            running[pool.submit(self._run_node, node)] = node

    def _memory_request(self, node: Node) -> int:
        """The memory a try of `node` asks for: its container's requests, else its limits, else 0."""
        resources = self.spec.templates[node.template]["container"].get("resources", {})
        asked = resources.get("requests", resources.get("limits", {})).get("memory")
        return memory_bytes(str(asked)) if asked else 0

    def _show_progress(self, running: Iterable[Node]) -> None:
        for node in running:
            node.progress = read_progress(node.progress_file) or node.progress
        self.console.progress({node.name: node.progress for node in running if node.progress})

    # ---- one node: its tries and retries -------------------------------------------------------

    def _run_node(self, node: Node) -> None:
        try:
            self._run_tries(node, self.spec.rules[node.template])
        finally:
            with self._lock:
                self._active -= 1

    def _run_tries(self, node: Node, rule: retries.RetryRule | None) -> None:
        node.started = time.monotonic()
        node.log.parent.mkdir(parents=True, exist_ok=True)
        node.phase = "Running"
        self.console.say(f"started  {node.name}")
        while (attempt := self._attempt(node)) is not None:
            node.tries.append(attempt)
            node.message = attempt.message
            while isinstance(decision := self._decide(rule, node), retries.Wait):
                delay = decision.until - time.monotonic()
                self.console.say(f"backoff  {node.name}: {delay:.0f}s before deciding on a retry")
                self._stopping.wait(max(0.0, delay))
            if isinstance(decision, retries.Stop):
                node.phase = attempt.phase
                if decision.message != attempt.message:
                    node.message = f"{attempt.message} ({decision.message})"
                break
            of = f" of {rule.limit + 1}" if rule else ""
            self.console.say(
                f"retrying {node.name} (attempt {len(node.tries) + 1}{of}): {attempt.message}"
            )
        else:
            node.phase = "Succeeded"
        node.finished = time.monotonic()
        progress = f", progress {node.progress}" if node.progress else ""
        if node.phase == "Succeeded":
            tries = f", {len(node.tries)} failed tries" if node.tries else ""
            self.console.say(f"done     {node.name} ({node.duration:.1f}s{tries}{progress})")
        else:
            retried = f", {len(node.tries) - 1} retries" if len(node.tries) > 1 else ""
            self.console.say(
                f"{node.phase.upper():<8} {node.name} ({node.duration:.1f}s{retried}): {node.message}"
            )

    def _decide(self, rule: retries.RetryRule | None, node: Node) -> retries.Decision:
        now, stopping = time.monotonic(), self._stopping.is_set()
        return retries.decide(rule, node.tries, now, self._deadline, stopping)

    def _attempt(self, node: Node) -> Attempt | None:
        """One try: None when it succeeded, else what went wrong (Failed: the step; Error: the runner)."""
        started = time.monotonic()

        def ended(phase: str, message: str, exit_code: int | None = None) -> Attempt:
            return Attempt(phase, exit_code, message, started, time.monotonic())

        if self._stopping.is_set():
            return ended("Failed", STOPPED)
        timeout = self._timeout(node.template)
        if timeout is not None and timeout <= 0:
            return ended("Failed", "Step exceeded its deadline")
        try:
            resolved = self._resolve(node)
        except (UnresolvedReference, UnsupportedFeature) as error:
            return ended("Error", str(error))
        attempt_dir = Path(tempfile.mkdtemp(prefix=f"{safe_filename(node.name)}-"))
        try:
            invocation = self._invocation(node, resolved, attempt_dir)
            try:
                artifacts.load_inputs(self.store, resolved["inputs"], invocation)
            except (StepError, OSError) as error:  # ArtifactNotFound among them
                return ended("Error", f"init: {error}")
            node.progress_file = invocation.progress_file
            with node.log.open("a") as log:
                log.write(f"--- attempt {len(node.tries) + 1}: {' '.join(invocation.command)}\n")
                log.flush()
                try:
                    exit_code, deadline_hit = self.engine.execute(invocation, log, timeout), False
                except DeadlineExceeded:
                    exit_code, deadline_hit = None, True
                except EngineError as error:  # the pod never ran: Argo's init/wait trouble
                    return ended("Error", str(error))
            node.progress = read_progress(invocation.progress_file) or node.progress
            saved = artifacts.save_outputs(self.store, resolved["outputs"], invocation)
            if self._stopping.is_set():
                return ended("Failed", STOPPED, exit_code)
            if deadline_hit or exit_code is None:
                return ended("Failed", POD_DEADLINE_MESSAGE)
            if exit_code != 0:
                return ended(
                    "Failed", f"{exit_description(exit_code)}: {_last_line(node.log)}", exit_code
                )
            try:
                node.outputs = artifacts.output_parameters(resolved["outputs"], invocation, saved)
            except (OSError, ValueError) as error:
                return ended("Error", f"wait: {error}", exit_code)
            return None
        finally:
            shutil.rmtree(attempt_dir, ignore_errors=True)

    def _timeout(self, template: str) -> float | None:
        """Seconds this try may run: the template's deadline, and what is left of the workflow's."""
        left = None if self._deadline is None else self._deadline - time.monotonic()
        limits = [limit for limit in (self.spec.deadlines[template], left) if limit is not None]
        return min(limits, default=None)

    def _resolve(self, node: Node) -> dict[str, Any]:
        """The template with the workflow's globals and the node's arguments filled in."""
        template = self.spec.templates[node.template]
        where = f"template {template['name']!r}"
        values = dict(self.spec.globals)
        for parameter in template.get("inputs", {}).get("parameters", []):
            if parameter["name"] not in node.arguments:
                raise UnresolvedReference(
                    f"input parameter {parameter['name']!r} has no value ({where})"
                )
            values[f"inputs.parameters.{parameter['name']}"] = node.arguments[parameter["name"]]
        inputs = template.get("inputs", {}).get("artifacts", [])
        parts = {
            "container": template["container"],
            "inputs": inputs,
            "outputs": template.get("outputs", {}),
        }
        return spec.substitute(parts, values, where)

    def _invocation(self, node: Node, resolved: Mapping[str, Any], attempt_dir: Path) -> Invocation:
        container = resolved["container"]
        command = [*container["command"], *container.get("args", [])]
        working_dir = PurePosixPath(container.get("workingDir", "/"))
        outputs = resolved["outputs"]
        paths = [a["path"] for a in outputs.get("artifacts", [])]
        paths += [p["valueFrom"]["path"] for p in outputs.get("parameters", [])]
        limits = container.get("resources", {}).get("limits", {})
        (attempt_dir / "work").mkdir()
        (attempt_dir / "argo").mkdir()
        return Invocation(
            name=node.name,
            image=container["image"],
            command=command,
            environment=self._thread_environment(),
            working_dir=working_dir,
            host_dir=attempt_dir / "work",
            inputs=tuple(PurePosixPath(a["path"]) for a in resolved["inputs"]),
            outputs=tuple(PurePosixPath(path) for path in paths),
            scratch=tuple(PurePosixPath(path) for path in self.spec.scratch[node.template]),
            progress_file=attempt_dir / "argo" / "progress",
            cpu_limit=limits.get("cpu"),
            memory_limit=limits.get("memory"),
            network=any("://" in part for part in command),
            mounts=_host_paths(command),
            on_output=lambda line: self.console.say(f"{node.name}: {line[:MAX_SHOWN_LINE]}"),
        )

    def _thread_environment(self) -> dict[str, str]:
        """Thread pools sized so the tries running together share the cores instead of fighting over
        them: one TensorFlow process does not keep two cores busy, two processes with one thread each do."""
        with self._lock:
            sharing = max(1, min(self._active, self.parallelism))
        threads = str(max(1, self.cores // sharing))
        return {"TF_NUM_INTRAOP_THREADS": threads, "OMP_NUM_THREADS": threads}


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
    paths = [Path(part) for part in command if part.startswith("/") and Path(part).exists()]
    return tuple((path, path.is_dir()) for path in paths)


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
