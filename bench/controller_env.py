"""Set the workflow controller's DEFAULT_REQUEUE_TIME for a measurement, and always put back what was there.

The controller reads the variable once, at its start (workflow/controller/rate_limiters.go,
envRequeueTime), so a change is a new controller pod: `kubectl set env` on its Deployment, the rollout,
then the new pod holding the leader lease (it is named by LEADER_ELECTION_IDENTITY, the pod's name, in
Argo's manifests) before anything is submitted. `changed_controller` restores the value found on entry
(or its absence) on the way out, also after an error or Ctrl-C, with SIGINT ignored while it restores.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

VARIABLE = "DEFAULT_REQUEUE_TIME"
NAMESPACE = "argo"
DEPLOYMENT = "workflow-controller"
CONTAINER = "workflow-controller"
LEASE = "workflow-controller"  # workflow/controller/controller.go: the leader election's lock name
ROLLOUT_TIMEOUT = "180s"
LEADER_TIMEOUT = 120.0


class Kubectl(Protocol):
    def __call__(self, *args: str, check: bool = True, timeout: float = 120) -> Any: ...


class ControllerError(RuntimeError):
    """The controller could not be changed or put back as asked."""


def deployment(kubectl: Kubectl) -> dict[str, Any]:
    done = kubectl("-n", NAMESPACE, "get", "deployment", DEPLOYMENT, "-o", "json")
    return json.loads(done.stdout)


def current_value(kubectl: Kubectl) -> str | None:
    """The variable's value on the controller's container; None when it is not set (Argo's 10 s)."""
    containers = deployment(kubectl)["spec"]["template"]["spec"]["containers"]
    (container,) = [c for c in containers if c["name"] == CONTAINER]
    for variable in container.get("env") or []:
        if variable["name"] == VARIABLE:
            if "value" not in variable:
                raise ControllerError(
                    f"{VARIABLE} comes from {variable.get('valueFrom')}: not changed"
                )
            return str(variable["value"])
    return None


def leader(kubectl: Kubectl) -> str | None:
    """The lease's holder; None when the controller elects no leader (no lease)."""
    done = kubectl("-n", NAMESPACE, "get", "lease", LEASE, "-o", "json", check=False)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout)["spec"].get("holderIdentity")


def running_pods(kubectl: Kubectl) -> list[str]:
    selector = deployment(kubectl)["spec"]["selector"]["matchLabels"]
    labels = ",".join(f"{key}={value}" for key, value in selector.items())
    done = kubectl("-n", NAMESPACE, "get", "pods", "-l", labels, "-o", "json")
    return [
        pod["metadata"]["name"]
        for pod in json.loads(done.stdout)["items"]
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    ]


def apply(kubectl: Kubectl, value: str | None) -> None:
    """Set (or, for None, remove) the variable, wait for the rollout and for the one controller left
    to lead."""
    change = f"{VARIABLE}={value}" if value is not None else f"{VARIABLE}-"
    kubectl("-n", NAMESPACE, "set", "env", f"deployment/{DEPLOYMENT}", "-c", CONTAINER, change)
    kubectl(
        "-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}",
        f"--timeout={ROLLOUT_TIMEOUT}", timeout=240,
    )  # fmt: skip
    deadline = time.monotonic() + LEADER_TIMEOUT
    while True:
        pods, holder = running_pods(kubectl), leader(kubectl)
        if len(pods) == 1 and holder in (pods[0], None):
            return
        if time.monotonic() > deadline:
            raise ControllerError(
                f"after {LEADER_TIMEOUT:.0f} s: controllers {pods}, leader {holder}"
            )
        time.sleep(1)


@contextmanager
def changed_controller(kubectl: Kubectl) -> Iterator[Any]:
    """Yields set(value): the controller runs with DEFAULT_REQUEUE_TIME=value from then on. On exit
    the value found on entry is put back, if it was changed."""
    before = current_value(kubectl)
    now = before

    def set_value(value: str | None) -> None:
        nonlocal now
        if value != now:
            now = value  # even if apply fails half-way, the exit puts `before` back
            apply(kubectl, value)

    try:
        yield set_value
    finally:
        if now != before:
            interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                apply(kubectl, before)
            finally:
                signal.signal(signal.SIGINT, interrupt)
