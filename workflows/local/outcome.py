"""What a local run leaves: its result and `summary.json` beside the tasks' logs (for tools and `LocalRunner.retry`)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workflows.local.plan import Node

SUMMARY_FILE = "summary.json"
WORKFLOW_FILE = "workflow.json"  # the run's Workflow, under its name, to take the run up again
LOG_TAIL_LINES = 15


@dataclass
class RunResult:
    name: str
    phase: str
    nodes: list[Node]
    message: str = ""

    @property
    def tolerated_failures(self) -> list[Node]:
        """The nodes that failed."""
        return [node for node in self.nodes if node.phase in ("Failed", "Error")]

    def output(self, task: str, parameter: str) -> str | None:
        for node in self.nodes:
            if node.task == task and parameter in node.outputs:
                return node.outputs[parameter]
        return None


def failure_message(nodes: list[Node]) -> str:
    """The failure that decided the run (the last to end), with its log's tail."""
    failed = [node for node in nodes if node.phase in ("Failed", "Error")]
    if not failed:
        return "the run did not succeed"
    node = max(failed, key=lambda n: n.finished or 0)
    log = node.log.read_text(errors="replace").splitlines() if node.log.exists() else []
    tail = [f"  | {line}" for line in log[-LOG_TAIL_LINES:]]
    return "\n".join([f"{node.name} failed: {node.message}", *tail])


def write_summary(result: RunResult, folder: Path, engine: str, started: float) -> None:
    """Every node with its phase, tries, timings (seconds from the run's start) and outputs."""

    def timed(item: dict) -> dict:
        return item | {k: item[k] - started for k in ("started", "finished") if item[k] is not None}

    nodes = [
        timed(asdict(node))
        | {"tries": [timed(asdict(t)) for t in node.tries], "attempts": node.attempts}
        for node in result.nodes
    ]
    summary: dict[str, Any] = dict(name=result.name, phase=result.phase, message=result.message)
    summary |= {"engine": engine, "seconds": time.monotonic() - started, "nodes": nodes}
    write_json(folder / SUMMARY_FILE, summary)


def write_json(path: Path, data: Any) -> None:
    """`data` as JSON at `path`, written under a temporary name first: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=2, default=str))
    temporary.replace(path)
