"""What the Kubernetes API server enforces on a Workflow or WorkflowTemplate before Argo sees it: the
constraints of the full CRD that Argo v4.1.2 installs (manifests/base/crds/full/), which controller-gen
makes from the `+kubebuilder:validation` markers in pkg/apis/workflow/v1alpha1/workflow_types.go. Each
rule below names its marker's type and field; faults are worded as the API server words them.

validate.go (workflows/lint/validation.py) does not apply these: a spec can pass `argo lint` and still be
refused at create, e.g. a DAG of more than 200 tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.lint.metadata import metadata_faults

# workflow_types.go, DAGTemplate.Tasks: +kubebuilder:validation:MaxItems=200 (and WorkflowSpec.Templates)
DAG_TASKS_MAX = 200
TEMPLATES_MAX = 200
INPUT_PARAMETERS_MAX = 500  # Inputs.Parameters
METRICS_MAX = 100  # Metrics.Prometheus
NAME_MAX = 128  # Template.Name, DAGTask.Name, WorkflowStep.Name
FIELD_NAME = r"^[a-zA-Z0-9][-a-zA-Z0-9]*$"
PARAMETER_NAME = r"^[-a-zA-Z0-9_]+$"  # Parameter.Name
ARTIFACT_NAME = r"^[-a-zA-Z0-9_{}.]+$"  # Artifact.Name
METRIC_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"  # Prometheus.Name, MetricLabel.Key
# ArtifactLocation's locations, each with the fields its type requires (S3Artifact none).
LOCATION_REQUIRED = {
    "s3": (),
    "git": ("repo",),  # GitArtifact.Repo
    "http": ("url",),  # HTTPArtifact.URL
    "artifactory": ("url",),  # ArtifactoryArtifact.URL
    "hdfs": ("path",),  # HDFSArtifact.Path
    "raw": ("data",),  # RawArtifact.Data
    "oss": ("key",),  # OSSArtifact.Key
    "gcs": ("key",),  # GCSArtifact.Key
    "azure": ("blob", "container", "endpoint"),  # AzureArtifact: Endpoint, Container, Blob
    "plugin": ("key",),  # PluginArtifact.Key
}
ARTIFACT_LOCATIONS = tuple(LOCATION_REQUIRED)
TEMPLATE_TYPES = (
    "container",
    "script",
    "dag",
    "steps",
    "resource",
    "suspend",
    "containerSet",
    "data",
    "http",
    "plugin",
)

Check = Callable[[str, Any], str | None]  # (path, value) → the fault, or None


@dataclass(frozen=True)
class Rule:
    """One CRD constraint: where it applies (`[]` every item, `.` a field) and what it checks."""

    path: str
    check: Check


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def max_items(limit: int) -> Check:
    def check(path: str, value: Any) -> str | None:
        if isinstance(value, list) and len(value) > limit:
            return f"{path}: Too many: {len(value)}: must have at most {limit} items"
        return None

    return check


def min_items(limit: int) -> Check:
    def check(path: str, value: Any) -> str | None:
        if isinstance(value, list) and len(value) < limit:
            return (
                f"{path}: Invalid value: {len(value)}: {path} in body should have at least "
                f"{limit} items"
            )
        return None

    return check


def length(low: int = 0, high: int | None = None) -> Check:
    def check(path: str, value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if high is not None and len(value.encode()) > high:
            return f"{path}: Too long: may not be more than {high} bytes"
        if len(value) < low:
            return (
                f"{path}: Invalid value: {_quoted(value)}: {path} in body should be at least "
                f"{low} chars long"
            )
        return None

    return check


def pattern(regex: str) -> Check:
    compiled = re.compile(regex)

    def check(path: str, value: Any) -> str | None:
        if isinstance(value, str) and compiled.search(value) is None:
            return f"{path}: Invalid value: {_quoted(value)}: {path} in body should match '{regex}'"
        return None

    return check


def enum(*allowed: str) -> Check:
    def check(path: str, value: Any) -> str | None:
        if value not in allowed:
            supported = ", ".join(f'"{choice}"' for choice in allowed)
            return f"{path}: Unsupported value: {_quoted(value)}: supported values: {supported}"
        return None

    return check


def between(low: int, high: int | None = None) -> Check:
    def check(path: str, value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if value < low:
            return (
                f"{path}: Invalid value: {value}: {path} in body should be greater than or "
                f"equal to {low}"
            )
        if high is not None and value > high:
            return (
                f"{path}: Invalid value: {value}: {path} in body should be less than or "
                f"equal to {high}"
            )
        return None

    return check


def required(name: str) -> Check:
    def check(path: str, value: Any) -> str | None:
        if not isinstance(value, Mapping) or name in value:
            return None
        return f"{path}.{name}: Required value" if path else f"{name}: Required value"

    return check


def requires(where: str, *names: str) -> list[Rule]:
    """A type's required fields: each missing one is a fault of its own, as the API server lists them."""
    return [Rule(where, required(name)) for name in names]


def rule(message: str, holds: Callable[[Mapping[str, Any]], bool]) -> Check:
    """An x-kubernetes-validations (CEL) rule on an object."""

    def check(path: str, value: Any) -> str | None:
        if isinstance(value, Mapping) and not holds(value):
            return f'{path}: Invalid value: "object": {message}'
        return None

    return check


def every_template(message: str, holds: Callable[[Mapping[str, Any]], bool]) -> Check:
    """A CEL rule `self.all(t, ...)` on the templates list."""

    def check(path: str, value: Any) -> str | None:
        if isinstance(value, list) and not all(holds(t) for t in value if isinstance(t, Mapping)):
            return f'{path}: Invalid value: "array": {message}'
        return None

    return check


def _one_type(template: Mapping[str, Any]) -> bool:
    return sum(kind in template for kind in TEMPLATE_TYPES) <= 1


def _not_on_steps_or_dag(field: str) -> Callable[[Mapping[str, Any]], bool]:
    def holds(template: Mapping[str, Any]) -> bool:
        present = field in template and (field != "timeout" or template[field] != "")
        return not (present and ("steps" in template or "dag" in template))

    return holds


def _location_rules(where: str) -> list[Rule]:
    """ArtifactLocation (an Artifact's, or a template's archiveLocation): at most one location (CEL),
    and the fields each location's type requires."""
    return [
        Rule(
            where,
            rule(
                "at most one artifact location can be specified",
                lambda a: sum(kind in a for kind in ARTIFACT_LOCATIONS) <= 1,
            ),
        ),
        *(
            rule
            for kind, names in LOCATION_REQUIRED.items()
            for rule in requires(f"{where}.{kind}", *names)
        ),
    ]


def _artifact_rules(where: str) -> list[Rule]:
    """Artifact (workflow_types.go): Name pattern, Mode 0..511, its location, ArtifactGC.Strategy."""
    return [
        Rule(f"{where}[]", required("name")),
        Rule(f"{where}[].name", pattern(ARTIFACT_NAME)),
        Rule(f"{where}[].mode", between(0, 511)),
        *_location_rules(f"{where}[]"),
        Rule(
            f"{where}[].artifactGC.strategy",
            enum("", "OnWorkflowCompletion", "OnWorkflowDeletion", "Never"),
        ),
    ]


def _parameter_rules(where: str) -> list[Rule]:
    """Parameter (workflow_types.go): Name required and patterned, Enum MinItems=1."""
    return [
        Rule(f"{where}[]", required("name")),
        Rule(f"{where}[].name", pattern(PARAMETER_NAME)),
        Rule(f"{where}[].enum", min_items(1)),
    ]


def _metrics_rules(where: str) -> list[Rule]:
    """Metrics.Prometheus MaxItems=100; Prometheus.Name pattern, Help MinLength=1; Gauge.Value 1..256,
    Counter.Value and Histogram.Value MinLength=1; MetricLabel.Key pattern; no `resourcesDuration.*` in
    a real-time gauge."""
    each = f"{where}.prometheus[]"
    return [
        Rule(where, required("prometheus")),
        Rule(f"{where}.prometheus", max_items(METRICS_MAX)),
        *requires(each, "help", "name"),
        Rule(f"{each}.name", pattern(METRIC_NAME)),
        Rule(f"{each}.help", length(low=1)),
        *requires(f"{each}.labels[]", "key", "value"),
        Rule(f"{each}.labels[].key", pattern(METRIC_NAME)),
        *requires(f"{each}.gauge", "realtime", "value"),
        Rule(f"{each}.gauge.value", length(1, 256)),
        Rule(f"{each}.gauge.operation", enum("Set", "Add", "Sub")),
        Rule(
            f"{each}.gauge",
            rule(
                "'resourcesDuration.*' metrics cannot be used in real-time gauges",
                lambda g: not g.get("realtime") or "resourcesDuration." not in str(g.get("value")),
            ),
        ),
        Rule(f"{each}.counter", required("value")),
        Rule(f"{each}.counter.value", length(low=1)),
        *requires(f"{each}.histogram", "buckets", "value"),
        Rule(f"{each}.histogram.value", length(low=1)),
    ]


def _block_rules(where: str) -> list[Rule]:
    """An arguments, inputs or outputs block."""
    return [*_parameter_rules(f"{where}.parameters"), *_artifact_rules(f"{where}.artifacts")]


def _spec_rules(spec: str) -> list[Rule]:
    """Every constraint under a WorkflowSpec at `spec`."""
    template = f"{spec}.templates[]"
    task = f"{template}.dag.tasks[]"
    return [
        # WorkflowSpec.Templates: MaxItems=200 and three CEL rules
        Rule(f"{spec}.templates", max_items(TEMPLATES_MAX)),
        Rule(
            f"{spec}.templates",
            every_template("template must have at most one template type", _one_type),
        ),
        Rule(
            f"{spec}.templates",
            every_template(
                "timeout cannot be applied to steps or dag templates",
                _not_on_steps_or_dag("timeout"),
            ),
        ),
        Rule(
            f"{spec}.templates",
            every_template(
                "activeDeadlineSeconds is only valid for leaf templates",
                _not_on_steps_or_dag("activeDeadlineSeconds"),
            ),
        ),
        Rule(f"{spec}.parallelism", between(1)),  # WorkflowSpec.Parallelism Minimum=1
        Rule(
            f"{spec}.podGC.strategy",
            enum(
                "", "OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess"
            ),
        ),
        Rule(
            f"{spec}.artifactGC.strategy",
            enum("", "OnWorkflowCompletion", "OnWorkflowDeletion", "Never"),
        ),
        Rule(f"{spec}.retryStrategy.retryPolicy", RETRY_POLICY),
        Rule(f"{spec}.workflowMetadata.labelsFrom{{}}", required("expression")),
        *_block_rules(f"{spec}.arguments"),
        *_metrics_rules(f"{spec}.metrics"),
        # Template: Name MaxLength=128 and pattern, Parallelism Minimum=1, Inputs.Parameters MaxItems=500
        Rule(f"{template}.name", length(high=NAME_MAX)),
        Rule(f"{template}.name", pattern(FIELD_NAME)),
        Rule(f"{template}.parallelism", between(1)),
        Rule(f"{template}.inputs.parameters", max_items(INPUT_PARAMETERS_MAX)),
        Rule(f"{template}.retryStrategy.retryPolicy", RETRY_POLICY),
        *_location_rules(f"{template}.archiveLocation"),  # Template.ArchiveLocation
        *_block_rules(f"{template}.inputs"),
        *_block_rules(f"{template}.outputs"),
        *_metrics_rules(f"{template}.metrics"),
        Rule(f"{template}.steps", min_items(1)),  # Template.Steps MinItems=1
        # DAGTemplate.Tasks: MinItems=1, MaxItems=200
        Rule(f"{template}.dag", required("tasks")),
        Rule(f"{template}.dag.tasks", min_items(1)),
        Rule(f"{template}.dag.tasks", max_items(DAG_TASKS_MAX)),
        # DAGTask: Name required, MaxLength=128 and pattern, three CEL rules
        Rule(task, required("name")),
        Rule(f"{task}.name", length(high=NAME_MAX)),
        Rule(f"{task}.name", pattern(FIELD_NAME)),
        Rule(
            task,
            rule(
                "cannot use both 'depends' and 'dependencies'",
                lambda t: "depends" not in t or "dependencies" not in t,
            ),
        ),
        Rule(
            task,
            rule(
                "cannot use 'continueOn' when using 'depends'",
                lambda t: "depends" not in t or "continueOn" not in t,
            ),
        ),
        Rule(
            task,
            rule(
                "task name cannot begin with a digit when using 'depends' or 'dependencies'",
                lambda t: (
                    not ("depends" in t or "dependencies" in t)
                    or not re.match(r"^[0-9]", str(t.get("name", "")))
                ),
            ),
        ),
        Rule(
            f"{task}.withSequence",
            rule(
                "only one of count or end can be defined",
                lambda s: not ("count" in s and "end" in s),
            ),
        ),
        *_block_rules(f"{task}.arguments"),
    ]


RETRY_POLICY = enum("Always", "OnFailure", "OnError", "OnTransientError")  # RetryPolicy
# The document's `metadata` the API server checks as it checks every object's (workflows/lint/metadata.py).
RULES = [Rule("", required("spec")), *_spec_rules("spec")]


def _walk(value: Any, parts: list[str], path: str) -> Iterator[tuple[str, Any]]:
    """Every (path, value) the rule's path reaches in the document; absent fields reach nothing."""
    if not parts:
        yield path, value
        return
    head, rest = parts[0], parts[1:]
    if head == "[]":
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _walk(item, rest, f"{path}[{index}]")
    elif head == "{}":
        if isinstance(value, Mapping):
            for key, item in value.items():  # a map's entry, as the API server names it: path.key
                yield from _walk(item, rest, f"{path}.{key}")
    elif isinstance(value, Mapping) and head in value:
        yield from _walk(value[head], rest, f"{path}.{head}" if path else head)


def _parts(path: str) -> list[str]:
    return [part for part in re.split(r"\.|(\[\]|\{\})", path) if part]


def crd_faults(document: Mapping[str, Any]) -> list[str]:
    """The API server's refusals of `document`: its metadata, then the full CRD, in the CRD's order."""
    faults = metadata_faults(document)
    for each in RULES:
        for path, value in _walk(document, _parts(each.path), ""):
            fault = each.check(path, value)
            if fault:
                faults.append(fault)
    return faults
