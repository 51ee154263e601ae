"""Record a run's pods while it runs: `kubectl get pods --watch` on the run's label, each pod's last state.

A succeeded run's pods are deleted by its podGC a few seconds after it ends (the pipeline's
`OnWorkflowSuccess`), so their times must be read while they exist: the watch keeps the last version of
each pod it saw, the one in the DELETED event included, trimmed to what bench/cluster_levels.py reads.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

WORKFLOW_LABEL = "workflows.argoproj.io/workflow"  # workflow/common/common.go: LabelKeyWorkflow
NODE_ID = "workflows.argoproj.io/node-id"  # common.AnnotationKeyNodeID, the Pod node's ID
KEPT_ANNOTATIONS = (NODE_ID,)
TIMES = ("startedAt", "finishedAt")  # of a container's running or terminated state


def trimmed(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What bench/cluster_levels.py reads of a pod: its name, creation and node's ID, its
    PodScheduled condition and each container's state with its times."""
    metadata, status = pod.get("metadata", {}), pod.get("status", {})
    annotations = metadata.get("annotations") or {}

    def state(container: Mapping[str, Any]) -> dict[str, Any]:
        return {
            kind: {key: value for key, value in times.items() if key in TIMES}
            for kind, times in (container.get("state") or {}).items()
        }

    def containers(key: str) -> list[dict[str, Any]]:
        return [{"name": c["name"], "state": state(c)} for c in status.get(key) or []]

    return {
        "metadata": {
            "name": metadata.get("name"),
            "creationTimestamp": metadata.get("creationTimestamp"),
            "annotations": {k: annotations[k] for k in KEPT_ANNOTATIONS if k in annotations},
        },
        "status": {
            "phase": status.get("phase"),
            "conditions": [
                {key: c.get(key) for key in ("type", "status", "lastTransitionTime")}
                for c in status.get("conditions") or []
                if c.get("type") == "PodScheduled"
            ],
            "initContainerStatuses": containers("initContainerStatuses"),
            "containerStatuses": containers("containerStatuses"),
        },
    }


def json_objects(buffer: str) -> tuple[list[Any], str]:
    """The complete JSON values at the start of `buffer` (kubectl prints one after another), and the rest."""
    decoder, at = json.JSONDecoder(), 0
    found: list[Any] = []
    while True:
        while at < len(buffer) and buffer[at].isspace():
            at += 1
        try:
            value, at = decoder.raw_decode(buffer, at)
        except json.JSONDecodeError:
            return found, buffer[at:]
        found.append(value)


class PodWatch:
    """`kubectl get pods -l workflows.argoproj.io/workflow=RUN --watch` in a thread; `pods` maps each pod's
    name to its last state seen (trimmed). Started before the run is submitted, it sees every pod from its
    creation; should kubectl end before stop() (an API server restart), it is started again."""

    def __init__(
        self, kubectl: list[str], env: Mapping[str, str], namespace: str, run: str
    ) -> None:
        self.command = [
            *kubectl, "get", "pods", "-n", namespace, "-l", f"{WORKFLOW_LABEL}={run}",
            "--watch", "--output-watch-events", "-o", "json",
        ]  # fmt: skip
        self.env = dict(env)
        self.pods: dict[str, dict[str, Any]] = {}
        self.restarts = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PodWatch:
        self._start()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start(self) -> bool:
        """Start kubectl, unless stop() was called; whether it started."""
        with self._lock:
            if self._stopping.is_set():
                return False
            self._process = subprocess.Popen(
                self.command,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=self.env,
            )
            return True

    def _loop(self) -> None:
        while True:
            process = self._process
            assert process is not None and process.stdout is not None
            pending = ""
            for line in process.stdout:
                events, pending = json_objects(pending + line)
                for event in events:
                    self.take(event)
            process.wait()
            if self._stopping.wait(1.0) or not self._start():
                return
            self.restarts += 1

    def take(self, event: Mapping[str, Any]) -> None:
        pod = event.get("object") or {}
        name = (pod.get("metadata") or {}).get("name")
        if name:
            with self._lock:
                self.pods[name] = trimmed(pod)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [self.pods[name] for name in sorted(self.pods)]

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
