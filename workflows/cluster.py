"""What the pipeline needs from a Kubernetes cluster, in one place: names the manifests share, step sizing.

The names here are the contract with the cluster's manifests (namespace, ServiceAccount, WorkflowTemplate);
change them together. Step sizes come from the peak memory each step used on the full MNIST data (3 shards
of 20000 digits, 1 epoch, batch 100), with headroom for larger shards and batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from hera.workflows import Resources

NAMESPACE = "mnist"
SERVICE_ACCOUNT = "mnist-pipeline"  # the workflow pods run as this one
SUBMITTER_ACCOUNT = "mnist-submitter"  # its token submits runs and logs in to the Argo UI
TEMPLATE_NAME = "mnist-pipeline"
RUN_PREFIX = (
    "mnist-"  # runs are named like this and five characters, also those started from the template
)
APP_LABEL = "mnist-argo"

# Prometheus metrics the Argo controller exposes for every run.
ACCURACY_METRIC = "mnist_test_accuracy"
DURATION_METRIC = "mnist_run_duration_seconds"

RUN_DEADLINE_SECONDS = 6 * 3600
SUCCEEDED_RUN_TTL_SECONDS = 24 * 3600
FAILED_RUN_TTL_SECONDS = 3 * 24 * 3600
RETRY_BACKOFF = {"factor": "2", "cap": "5m"}  # the first wait is a setting: retry_backoff
READABLE_FOLDER_MODE = 0o755  # input folders the steps' non-root user must list


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
