"""The Kubernetes names (shared with infra/k8s), sizes, deadlines and security the pipeline asks for."""

from __future__ import annotations

from dataclasses import dataclass

from hera.workflows import Resources
from hera.workflows import models as m

NAMESPACE = "mnist"
# The steps' pods run as this account; it reaches GCS through Workload Identity and has no Kubernetes role.
SERVICE_ACCOUNT = "mnist-pipeline"
# Argo's init and wait containers report outputs with this account's token; the steps get no token at all.
EXECUTOR_ACCOUNT = "mnist-executor"
SUBMITTER_ACCOUNT = "mnist-submitter"  # its token submits runs and logs in to the Argo UI
TEMPLATE_NAME = "mnist-pipeline"
# runs are named like this and five characters, also those started from the template
RUN_PREFIX = "mnist-"
APP_LABEL = "mnist-argo"

# Prometheus metrics the Argo controller exposes for every run.
ACCURACY_METRIC = "mnist_test_accuracy"
DURATION_METRIC = "mnist_run_duration_seconds"

RUN_DEADLINE_SECONDS = 6 * 3600
SUCCEEDED_RUN_TTL_SECONDS = 24 * 3600
FAILED_RUN_TTL_SECONDS = 3 * 24 * 3600
RETRY_BACKOFF = {"factor": "2", "cap": "5m"}  # the first wait is a setting: retry_backoff
READABLE_FOLDER_MODE = 0o755  # input folders the steps' non-root user must list
STEPS_USER = 10001  # the steps image's user and group (infra/docker/Dockerfile, USER 10001:10001)
# GKE's taint on Spot nodes (cloud.google.com/kubernetes-engine/docs/how-to/spot-vms): steps may run there,
# as their retries cover a preemption; elsewhere the toleration changes nothing.
SPOT_TAINT = ("cloud.google.com/gke-spot", "true", "NoSchedule")


def container_security_context() -> m.SecurityContext:
    """A step's own container: no privilege, no capability, a read-only root filesystem."""
    return m.SecurityContext(
        read_only_root_filesystem=True,
        run_as_non_root=True,
        allow_privilege_escalation=False,
        privileged=False,
        capabilities=m.Capabilities(drop=["ALL"]),
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
    )


def workflow_pod_fields() -> dict:
    """A step's pod has no Kubernetes token (Argo's init and wait get the executor account's), and all
    its containers, Argo's too, run as the steps' user: Pod Security `restricted`."""
    key, value, effect = SPOT_TAINT
    return {
        "service_account_name": SERVICE_ACCOUNT,
        "automount_service_account_token": False,
        "executor": m.ExecutorConfig(service_account_name=EXECUTOR_ACCOUNT),
        "security_context": m.PodSecurityContext(
            run_as_non_root=True,
            run_as_user=STEPS_USER,
            run_as_group=STEPS_USER,
            fs_group=STEPS_USER,
            seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
        ),
        "tolerations": [m.Toleration(key=key, operator="Equal", value=value, effect=effect)],
    }


@dataclass(frozen=True)
class StepSize:
    """Requests and limits of one step's container, and how long one try may run."""

    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str
    deadline_seconds: int

    def resources(self) -> Resources:
        return Resources(
            cpu_request=self.cpu_request,
            cpu_limit=self.cpu_limit,
            memory_request=self.memory_request,
            memory_limit=self.memory_limit,
        )


# Measured peak RSS: split 0.16 GB, init 0.65 GB, train 0.94 GB (20000 digits), aggregate 0.66 GB,
# evaluate 1.17 GB (10000 test digits), publish 0.65 GB. TensorFlow alone accounts for ~0.6 GB.
STEP_SIZES = {
    "split": StepSize("250m", "1", "384Mi", "768Mi", 15 * 60),
    "init": StepSize("250m", "1", "1Gi", "1536Mi", 10 * 60),
    "train": StepSize("1", "2", "1536Mi", "3Gi", 60 * 60),
    "aggregate": StepSize("250m", "1", "1Gi", "2Gi", 15 * 60),
    "evaluate": StepSize("500m", "2", "1536Mi", "2560Mi", 20 * 60),
    "publish": StepSize("250m", "1", "1Gi", "1536Mi", 10 * 60),
}
