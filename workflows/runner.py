"""The local engine: runs a compiled Workflow on this machine as Argo would run it on a cluster.

Each task is its own process with its container's command line, in a fresh working folder; the runner
moves key-only artifacts between the store and that folder, reads output parameters from files, expands
`withParam`, honours `retryStrategy`, and runs independent tasks in parallel.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import steps
from steps.cli import StepError
from steps.storage import ArtifactStore, download_dir, upload_dir
from workflows.spec import (
    Depends,
    UnresolvedReference,
    UnsupportedFeature,
    check_supported,
    depends_holds,
    depends_on,
    parse_depends,
    parse_duration,
    retry_allowed,
    substitute,
    substitute_all,
    templates_by_name,
)

PROJECT_ROOT = Path(steps.__file__).resolve().parents[1]
LOG_TAIL_LINES = 15
FINAL = {"Succeeded", "Failed", "Error", "Omitted"}


class WorkflowError(Exception):
    """The spec cannot run: a reference that does not resolve, a cycle, a missing template."""


@dataclass
class Node:
    """One execution of a template: a DAG task, or one item of a task's withParam."""

    name: str
    task: str
    template: str
    arguments: dict[str, str]
    log: Path
    phase: str = "Pending"
    attempts: int = 0
    exit_code: int | None = None
    message: str = ""
    started: float | None = None
    finished: float | None = None
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return (self.finished or time.monotonic()) - (self.started or time.monotonic())


@dataclass
class RunResult:
    name: str
    phase: str
    nodes: list[Node]
    message: str = ""

    @property
    def tolerated_failures(self) -> list[Node]:
        """Failed nodes; in a run that succeeded, those its DAG tolerated (continueOn.failed)."""
        return [node for node in self.nodes if node.phase in ("Failed", "Error")]

    def output(self, task: str, parameter: str) -> str | None:
        for node in self.nodes:
            if node.task == task and parameter in node.outputs:
                return node.outputs[parameter]
        return None


def _generate_name(prefix: str) -> str:
    return prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")


class LocalRunner:
    """Holds what a run shares across threads: the store, the live processes, the progress output."""

    def __init__(
        self,
        store: ArtifactStore,
        logs_dir: Path,
        parallelism: int | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.store = store
        self.logs_dir = Path(logs_dir)
        self.parallelism = parallelism or os.cpu_count() or 1
        self.echo = echo
        self._lock = threading.Lock()
        self._processes: set[subprocess.Popen] = set()
        self._cancelled = threading.Event()
        self._started = time.monotonic()

    # ---- the DAG ------------------------------------------------------------------------------

    def run(
        self, workflow: Mapping[str, Any], parameters: Mapping[str, str] | None = None
    ) -> RunResult:
        """Run `workflow` to the end; returns its result (phase Succeeded or Failed)."""
        check_supported(workflow)
        metadata = workflow.get("metadata", {})
        name = metadata.get("name") or _generate_name(metadata.get("generateName", "run-"))
        spec = workflow["spec"]
        templates = templates_by_name(workflow)
        arguments = {
            p["name"]: str(p.get("value", ""))
            for p in spec.get("arguments", {}).get("parameters", [])
        }
        unknown = sorted(set(parameters or {}) - set(arguments))
        if unknown:
            raise WorkflowError(f"no workflow parameter named {', '.join(unknown)}")
        arguments.update(parameters or {})
        self.globals = {"workflow.name": name} | {
            f"workflow.parameters.{key}": value for key, value in arguments.items()
        }
        entry = templates.get(spec["entrypoint"])
        if entry is None or "dag" not in entry:
            raise UnsupportedFeature("the local runner needs a dag template as the entrypoint")
        tasks = {task["name"]: task for task in entry["dag"]["tasks"]}
        depends = {task: parse_depends(tasks[task]) for task in tasks}
        _check_dag({task: sorted(depends_on(d)) for task, d in depends.items()}, tasks, templates)

        self._started = time.monotonic()
        self._cancelled.clear()
        self.echo(
            f"run {name}: {len(tasks)} tasks, parallelism {self.parallelism}, "
            f"store {self.store.uri}, logs {self.logs_dir / name}"
        )
        nodes: list[Node] = []
        task_nodes: dict[str, list[Node]] = {}
        running: dict[Future, Node] = {}
        failed: Node | None = None
        with ThreadPoolExecutor(max_workers=self.parallelism) as pool:
            try:
                while True:
                    decided = []
                    if failed is None:
                        for task_name in self._ready(depends, task_nodes):
                            decided.append(task_name)
                            phases = {
                                need: [n.phase for n in task_nodes[need]]
                                for need in depends_on(depends[task_name])
                            }
                            if not depends_holds(depends[task_name], phases):
                                task_nodes[task_name] = [self._omitted(tasks[task_name], name)]
                                continue
                            expanded = self._expand(tasks[task_name], name, task_nodes)
                            task_nodes[task_name] = expanded
                            nodes.extend(expanded)
                            for node in expanded:
                                future = pool.submit(self._run_node, node, templates[node.template])
                                running[future] = node
                    if not running:
                        if decided:
                            continue
                        break
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        node = running.pop(future)
                        future.result()
                        tolerated = tasks[node.task].get("continueOn", {}).get("failed", False)
                        if node.phase != "Succeeded" and not tolerated and failed is None:
                            failed = node
                            self._cancel(running)
            except BaseException as error:  # Ctrl-C, or a spec that cannot run: stop every task
                if isinstance(error, KeyboardInterrupt):
                    self.echo("interrupted: stopping every task")
                self._cancel(running)
                raise
        if failed is not None:
            return RunResult(name, "Failed", nodes, self._failure_message(failed))
        return RunResult(name, "Succeeded", nodes)

    def _ready(self, depends: dict[str, Depends], task_nodes: dict[str, list[Node]]) -> list[str]:
        """Tasks not yet started whose every dependency has finished."""

        def finished(task: str) -> bool:
            return task in task_nodes and all(n.phase in FINAL for n in task_nodes[task])

        return [
            task
            for task, expression in depends.items()
            if task not in task_nodes and all(finished(need) for need in depends_on(expression))
        ]

    def _omitted(self, task: Mapping[str, Any], run: str) -> Node:
        node = self._node(run, task["name"], task, {})
        node.phase, node.message = "Omitted", f"depends {task.get('depends')!r} is false"
        self._say(f"omitted  {node.name}: {node.message}")
        return node

    def _expand(
        self, task: Mapping[str, Any], run: str, task_nodes: dict[str, list[Node]]
    ) -> list[Node]:
        """The task's nodes: one, or one per item of its withParam list."""
        values = dict(self.globals)
        for other, other_nodes in task_nodes.items():
            if len(other_nodes) == 1:
                values.update(
                    {
                        f"tasks.{other}.outputs.parameters.{key}": value
                        for key, value in other_nodes[0].outputs.items()
                    }
                )
        where = f"task {task['name']!r}"
        arguments = {
            p["name"]: p.get("value", "") for p in task.get("arguments", {}).get("parameters", [])
        }
        if "withParam" not in task:
            resolved = {
                key: substitute(str(value), values, where) for key, value in arguments.items()
            }
            return [self._node(run, task["name"], task, resolved)]
        items = json.loads(substitute(task["withParam"], values, where))
        if not isinstance(items, list):
            raise WorkflowError(f"withParam of {where} is not a JSON list: {items!r}")
        expanded = []
        for index, item in enumerate(items):
            item_values = values | {"item": item if isinstance(item, str) else json.dumps(item)}
            if isinstance(item, dict):
                item_values |= {f"item.{key}": str(value) for key, value in item.items()}
            resolved = {
                key: substitute(str(value), item_values, where) for key, value in arguments.items()
            }
            label = item if isinstance(item, str) else json.dumps(item)
            expanded.append(self._node(run, f"{task['name']}({index}:{label})", task, resolved))
        return expanded

    def _node(
        self, run: str, name: str, task: Mapping[str, Any], arguments: dict[str, str]
    ) -> Node:
        return Node(
            name=name,
            task=task["name"],
            template=task["template"],
            arguments=arguments,
            log=self.logs_dir / run / f"{_safe_filename(name)}.log",
        )

    def _cancel(self, running: dict[Future, Node]) -> None:
        self._cancelled.set()
        for future in running:
            future.cancel()
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            _stop(process)

    def _failure_message(self, node: Node) -> str:
        tail = (
            node.log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            if node.log.exists()
            else []
        )
        lines = [f"{node.name} failed: {node.message}"] + [f"  | {line}" for line in tail]
        return "\n".join(lines)

    # ---- one node -----------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        with self._lock:
            self.echo(f"{time.monotonic() - self._started:7.1f}s  {text}")

    def _run_node(self, node: Node, template: Mapping[str, Any]) -> None:
        retry = template.get("retryStrategy", {})
        limit = int(retry.get("limit", 0)) if retry else 0
        policy = retry.get("retryPolicy", "OnFailure")
        backoff = retry.get("backoff", {})
        node.started = time.monotonic()
        node.log.parent.mkdir(parents=True, exist_ok=True)
        node.phase = "Running"
        self._say(f"started  {node.name}")
        while not self._cancelled.is_set():
            node.attempts += 1
            kind = self._attempt(node, template)
            if kind is None:
                node.phase = "Succeeded"
                break
            retryable = (
                policy == "Always"
                or (policy == "OnFailure" and kind == "Failed")
                or (policy == "OnError" and kind == "Error")
            )
            if retryable and not retry_allowed(retry.get("expression"), node.exit_code):
                retryable = False
                node.message += f" (not retried: {retry['expression']} is false)"
            if not retryable or node.attempts > limit or self._cancelled.is_set():
                node.phase = kind
                break
            delay = _backoff_delay(backoff, node.attempts)
            self._say(
                f"retrying {node.name} in {delay:.0f}s (attempt {node.attempts + 1} of "
                f"{limit + 1}): {node.message}"
            )
            if self._cancelled.wait(delay):
                break
        if self._cancelled.is_set() and node.phase == "Running":
            node.phase, node.message = "Failed", "stopped: the run was cancelled"
        node.finished = time.monotonic()
        retries = f", {node.attempts - 1} retries" if node.attempts > 1 else ""
        if node.phase == "Succeeded":
            self._say(f"done     {node.name} ({node.duration:.1f}s{retries})")
        else:
            self._say(f"FAILED   {node.name} ({node.duration:.1f}s{retries}): {node.message}")

    def _attempt(self, node: Node, template: Mapping[str, Any]) -> str | None:
        """One try: None on success, else 'Failed' (the step exited non-zero) or 'Error' (runner-side)."""
        where = f"template {template['name']!r}"
        node.exit_code = None
        values = dict(self.globals)
        for parameter in template.get("inputs", {}).get("parameters", []):
            value = node.arguments.get(parameter["name"], parameter.get("value"))
            if value is None:
                raise UnresolvedReference(
                    f"input parameter {parameter['name']!r} has no value ({where})"
                )
            values[f"inputs.parameters.{parameter['name']}"] = str(value)
        container = substitute_all(template["container"], values, where)
        inputs = substitute_all(template.get("inputs", {}).get("artifacts", []), values, where)
        outputs = substitute_all(template.get("outputs", {}), values, where)
        workdir = Path(tempfile.mkdtemp(prefix=f"{_safe_filename(node.name)}-"))
        try:
            root = PurePosixPath(container.get("workingDir", "/"))
            try:
                for artifact in inputs:
                    self._download(artifact, _local(workdir, root, artifact["path"]))
            except StepError as error:
                node.message = f"input artifact: {error}"
                return "Error"
            with node.log.open("a") as log:
                log.write(
                    f"--- attempt {node.attempts}: {' '.join(container['command'] + container.get('args', []))}\n"
                )
                log.flush()
                node.exit_code = self._execute(container, workdir, log)
            if self._cancelled.is_set():
                return "Failed"
            if node.exit_code != 0:
                node.message = f"exit code {node.exit_code}; last line: {_last_line(node.log)}"
                return "Failed"
            try:
                for parameter in outputs.get("parameters", []):
                    path = _local(workdir, root, parameter["valueFrom"]["path"])
                    node.outputs[parameter["name"]] = path.read_text().strip()
                for artifact in outputs.get("artifacts", []):
                    self._upload(artifact, _local(workdir, root, artifact["path"]))
            except (OSError, StepError) as error:
                node.message = f"output: {error}"
                return "Error"
            return None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _execute(self, container: Mapping[str, Any], workdir: Path, log: Any) -> int:
        command = list(container["command"]) + list(container.get("args", []))
        if command[0] in ("python", "python3"):
            command[0] = sys.executable
        environment = os.environ | {v["name"]: v.get("value", "") for v in container.get("env", [])}
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), environment.get("PYTHONPATH")])
        )
        environment["PYTHONUNBUFFERED"] = "1"
        process = subprocess.Popen(
            command,
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,
        )
        with self._lock:
            self._processes.add(process)
        try:
            return process.wait()
        finally:
            with self._lock:
                self._processes.discard(process)

    def _download(self, artifact: Mapping[str, Any], target: Path) -> None:
        """A key is a file, or a prefix standing for every object under it (a directory)."""
        key = artifact["gcs"]["key"]
        if self.store.list_keys(key.rstrip("/") + "/"):
            download_dir(self.store, key, target)
            return
        try:
            self.store.download_file(key, target)
        except StepError:
            if not artifact.get("optional"):
                raise

    def _upload(self, artifact: Mapping[str, Any], source: Path) -> None:
        key = artifact["gcs"]["key"]
        if source.is_dir():
            upload_dir(self.store, source, key)
        elif source.is_file():
            self.store.upload_file(source, key)
        else:
            raise StepError(
                f"output artifact {artifact['name']!r} was not written at {artifact['path']}"
            )


def _local(workdir: Path, root: PurePosixPath, path: str) -> Path:
    """Map a container path under workingDir into this node's working folder."""
    posix = PurePosixPath(path)
    if not posix.is_absolute():
        return workdir / posix
    try:
        return workdir / posix.relative_to(root)
    except ValueError:
        raise UnsupportedFeature(
            f"the local runner needs artifact paths under workingDir {root}, got {path}"
        ) from None


def _backoff_delay(backoff: Mapping[str, Any], attempt: int) -> float:
    if not backoff:
        return 0.0
    delay = parse_duration(backoff.get("duration", "0")) * float(backoff.get("factor", 1)) ** (
        attempt - 1
    )
    if "maxDuration" in backoff:
        delay = min(delay, parse_duration(backoff["maxDuration"]))
    return delay


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _stop(process: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _check_dag(
    dependencies: dict[str, list[str]], tasks: Mapping[str, Any], templates: Mapping[str, Any]
) -> None:
    for task, needs in dependencies.items():
        if tasks[task]["template"] not in templates:
            raise WorkflowError(
                f"task {task!r} names a template that does not exist: {tasks[task]['template']!r}"
            )
        for need in needs:
            if need not in dependencies:
                raise WorkflowError(f"task {task!r} depends on {need!r}, which does not exist")
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(task: str) -> None:
        if task in done:
            return
        if task in visiting:
            raise WorkflowError(f"the DAG has a cycle through {task!r}")
        visiting.add(task)
        for need in dependencies[task]:
            visit(need)
        visiting.discard(task)
        done.add(task)

    for task in dependencies:
        visit(task)
