"""Taking up a local run that failed or was cut short, its succeeded nodes reused, as `argo retry` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workflows.errors import WorkflowError
from workflows.local.outcome import SUMMARY_FILE, WORKFLOW_FILE, RunResult
from workflows.local.plan import Node
from workflows.local.runner import LocalRunner


def retry_locally(runner: LocalRunner, run: str) -> RunResult:
    """Run `run` again, reusing its succeeded nodes; WorkflowError for a run that succeeded or is not there."""
    folder = runner.logs_dir / run
    try:
        workflow = json.loads((folder / WORKFLOW_FILE).read_text())
        summary = json.loads((folder / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        raise WorkflowError(f"no local run {run} to retry in {runner.logs_dir}") from None
    if summary["phase"] == "Succeeded":
        raise WorkflowError(f"run {run} succeeded: there is nothing to retry")
    fields = ("name", "task", "template", "arguments", "outputs")
    reused: dict[str, Any] = {"phase": "Succeeded", "message": "it succeeded before"}
    done = [
        Node(**{key: node[key] for key in fields}, log=Path(node["log"]), **reused)
        for node in summary["nodes"]
        if node["phase"] == "Succeeded"
    ]
    return runner.run(workflow, done=done)
