"""Argo v4.1.2's field-level validation rules: names, arguments, artifacts, output parameters, metrics, pod
settings. Each function cites the Go function in `workflow/validate/validate.go` (or what it calls) whose rule
it applies, and raises `Invalid` with Argo's wording.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from workflows.lint.argo_common import tags


class Invalid(Exception):
    """A rule Argo enforces is broken; the message is worded as Argo words it."""

    def within(self, prefix: str, separator: str = " ") -> Invalid:
        """The same fault reported from an enclosing object, as Argo prefixes its errors."""
        return Invalid(f"{prefix}{separator}{self}")


# Reading loosely typed manifests: a wrong shape reads as absent, never as a crash.


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    """A string field; a missing one reads as "" as it does in Go."""
    if value is None:
        return ""
    return value if isinstance(value, str) else any_string(value)


def any_string(value: Any) -> str:
    """wfv1.AnyString: a parameter value written as a string, number or boolean."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# validate.go:validateWorkflowFieldNames and its name rules.

PARAM_OR_ARTIFACT_NAME = re.compile(r"[-a-zA-Z0-9_]+")
FIELD_NAME = re.compile(r"[a-zA-Z0-9][-a-zA-Z0-9]*")
FIELD_NAME_MAX = 128
PARAM_NAME_ERROR = (
    "Parameter/Artifact name must consist of alpha-numeric characters, '_' or '-' "
    "e.g. my_param_1, MY-PARAM-1"
)
FIELD_NAME_ERROR = (
    "name must consist of alpha-numeric characters or '-', and must start with an alpha-numeric "
    "character (e.g. My-name1-2, 123-NAME)"
)


def param_or_artifact_name_errors(name: str) -> list[str]:
    """validate.go:isValidParamOrArtifactName."""
    return [] if PARAM_OR_ARTIFACT_NAME.fullmatch(name) else [PARAM_NAME_ERROR]


def field_name_errors(name: str) -> list[str]:
    """validate.go:isValidWorkflowFieldName: template, task and step names."""
    errors = []
    if len(name) > FIELD_NAME_MAX:
        errors.append(f"must be no more than {FIELD_NAME_MAX} characters")
    if FIELD_NAME.fullmatch(name) is None:
        errors.append(FIELD_NAME_ERROR)
    return errors


def check_names(items: list[Any], *, parameters_or_artifacts: bool) -> None:
    """validate.go:validateWorkflowFieldNames: every name present, well formed and unique.

    Raises Invalid with the index suffix Argo appends to the list's path, e.g. `[1].name is required`.
    """
    rule = param_or_artifact_name_errors if parameters_or_artifacts else field_name_errors
    seen = set()
    for index, item in enumerate(items):
        name = as_str(as_map(item).get("name"))
        if not name:
            raise Invalid(f"[{index}].name is required")
        if errors := rule(name):
            raise Invalid(f"[{index}].name: '{name}' is invalid: {';'.join(errors)}")
        if name in seen:
            raise Invalid(f"[{index}].name '{name}' is not unique")
        seen.add(name)


def named_parameters_and_artifacts(
    block: Mapping[str, Any], prefix: str, separator: str
) -> tuple[list[Any], list[Any]]:
    """The parameters and artifacts of an inputs, outputs or arguments block, each list's names
    checked; a fault is reported under `prefix` and the list's field."""
    parameters, artifacts = as_list(block.get("parameters")), as_list(block.get("artifacts"))
    for field, items in (("parameters", parameters), ("artifacts", artifacts)):
        try:
            check_names(items, parameters_or_artifacts=True)
        except Invalid as fault:
            raise fault.within(f"{prefix}{field}", separator) from None
    return parameters, artifacts


# Artifacts: wfv1.Artifact.HasLocationOrKey and CleanPath, validate.go:validateArtifactLocation.

# Each location kind, the fields that make it a full location, and the field that is its key.
ARTIFACT_LOCATIONS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "artifactory": (("url",), "url"),
    "azure": (("endpoint", "container", "blob"), "blob"),
    "gcs": (("bucket", "key"), "key"),
    "git": (("repo",), None),
    "hdfs": (("addresses",), "path"),
    "http": (("url",), "url"),
    "oss": (("endpoint", "bucket", "key"), "key"),
    "plugin": (("name", "key"), "key"),
    "raw": ((), None),
    "s3": (("endpoint", "bucket", "key"), "key"),
}


def has_location_or_key(artifact: Mapping[str, Any]) -> bool:
    """An artifact saying where it lives: a full location, or just a key in the default repository."""
    for kind, (required, key_field) in ARTIFACT_LOCATIONS.items():
        location = artifact.get(kind)
        if location is None:
            continue
        location = as_map(location)
        if all(location.get(field) for field in required):
            return True
        if key_field and location.get(key_field):
            return True
    return False


def clean_path_error(artifact: Mapping[str, Any]) -> str | None:
    """wfv1.Artifact.CleanPath: a path may not climb out of the folder before its `..`."""
    path = as_str(artifact.get("path"))
    if not path:
        return None
    safe_dir = ""
    if "/../" in path:
        safe_dir = path[: path.index("/../")]
    elif match := re.search(r"/..$", path):  # Argo's pattern: any two characters after the last /
        safe_dir = path[: match.start()]
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    if safe_dir and not cleaned.startswith(safe_dir):
        name = as_str(artifact.get("name"))
        return (
            f"Artifact '{name}' attempted to use a path containing '..'. "
            "Directory traversal is not permitted"
        )
    return None


def validate_artifact_location(prefix: str, artifact: Mapping[str, Any]) -> None:
    """validate.go:validateArtifactLocation (git needs a repo; hdfs as artifacts/hdfs ValidateArtifact)."""
    if artifact.get("git") is not None and not as_map(artifact["git"]).get("repo"):
        raise Invalid(f"{prefix}.git.repo is required")
    if artifact.get("hdfs") is not None:
        _validate_hdfs(f"{prefix}.hdfs", as_map(artifact["hdfs"]))


def _validate_hdfs(prefix: str, hdfs: Mapping[str, Any]) -> None:
    if not as_list(hdfs.get("addresses")):
        raise Invalid(f"{prefix}.addresses is required")
    path = as_str(hdfs.get("path"))
    if not path:
        raise Invalid(f"{prefix}.path is required")
    if not path.startswith("/"):
        raise Invalid(f"{prefix}.path must be a absolute file path")
    ccache, keytab = (
        hdfs.get("krbCCacheSecret") is not None,
        hdfs.get("krbKeytabSecret") is not None,
    )
    if not hdfs.get("hdfsUser") and not ccache and not keytab:
        raise Invalid(
            f"either {prefix}.hdfsUser, {prefix}.krbCCacheSecret or {prefix}.krbKeytabSecret is required"
        )
    principal, config = hdfs.get("krbServicePrincipalName"), hdfs.get("krbConfigConfigMap")
    if keytab and not (
        principal and config is not None and hdfs.get("krbUsername") and hdfs.get("krbRealm")
    ):
        raise Invalid(
            f"{prefix}.krbServicePrincipalName, {prefix}.krbConfigConfigMap, {prefix}.krbUsername "
            f"and {prefix}.krbRealm are required with {prefix}.krbKeytabSecret"
        )
    if ccache and not (principal and config is not None):
        raise Invalid(
            f"{prefix}.krbServicePrincipalName and {prefix}.krbConfigConfigMap are required "
            f"with {prefix}.krbCCacheSecret"
        )


# Arguments: validate.go:validateArguments, validateArgumentsFieldNames, validateArgumentsValues.

ARGUMENT_VALUE_FROM_ERROR = "valueFrom only allows: default, configMapKeyRef and supplied"


def validate_arguments(prefix: str, arguments: Mapping[str, Any], allow_empty_values: bool) -> None:
    """Names, then values: every parameter has a value or an allowed valueFrom, enums hold the value,
    every artifact says where it comes from."""
    parameters, artifacts = named_parameters_and_artifacts(arguments, prefix, separator="")
    for parameter in map(as_map, parameters):
        name = as_str(parameter.get("name"))
        value, value_from = parameter.get("value"), parameter.get("valueFrom")
        if value_from is None and value is None and not allow_empty_values:
            raise Invalid(f"{prefix}{name}.value or {prefix}{name}.valueFrom is required")
        if value_from is not None:
            source = as_map(value_from)
            allowed = (
                source.get("configMapKeyRef") is not None
                or source.get("event")
                or source.get("supplied") is not None
            )
            forbidden = any(
                source.get(key) for key in ("path", "jsonPath", "parameter", "expression")
            )
            if not allowed or forbidden:
                raise Invalid(f"{prefix}{name}.{ARGUMENT_VALUE_FROM_ERROR}")
        if parameter.get("enum") is not None:
            enum = [any_string(choice) for choice in as_list(parameter.get("enum"))]
            if not enum:
                raise Invalid(f"{prefix}{name}.enum should contain at least one value")
            if value is None:
                if allow_empty_values:
                    return  # Argo stops checking the remaining arguments here
                raise Invalid(f"{prefix}{name}.value is required")
            if any_string(value) not in enum:
                raise Invalid(f"{prefix}{name}.value should be present in {prefix}{name}.enum list")
    for artifact in map(as_map, artifacts):
        name = as_str(artifact.get("name"))
        if not artifact.get("from") and not has_location_or_key(artifact):
            raise Invalid(f"{prefix}{name}.from, artifact location, or key is required")
        if artifact.get("from") and artifact.get("fromExpression"):
            raise Invalid(
                f"{prefix}{name} shouldn't have both `from` and `fromExpression` in Artifact"
            )


# Output parameters: validate.go:validateOutputParameter and the per-type rules of validateOutputs.

VALUE_FROM_KINDS = ("path", "jqFilter", "jsonPath", "parameter", "expression")


def validate_output_parameter(ref: str, parameter: Mapping[str, Any], template_type: str) -> None:
    """One of value or valueFrom; one kind of valueFrom, and the kind the template type can produce."""
    value, value_from = parameter.get("value"), parameter.get("valueFrom")
    if value_from is not None and value is not None:
        raise Invalid(f"{ref} has both valueFrom and value specified, choose one")
    if value is not None:
        return
    if value_from is None:
        raise Invalid(f"{ref} does not have valueFrom or value specified")
    source = as_map(value_from)
    kinds = sum(1 for kind in VALUE_FROM_KINDS if source.get(kind))
    kinds += source.get("supplied") is not None
    if kinds == 0:
        raise Invalid(
            "valueFrom type unspecified. choose one of: path, jqFilter, jsonPath, parameter, raw, expression"
        )
    if kinds > 1:
        raise Invalid(
            "multiple valueFrom types specified. choose one of: path, jqFilter, jsonPath, parameter, raw"
        )
    if template_type in ("Container", "ContainerSet", "Script") and not source.get("path"):
        raise Invalid(f"{ref}.path must be specified for {template_type} templates")
    if template_type == "Resource" and not (source.get("jqFilter") or source.get("jsonPath")):
        raise Invalid(
            f"{ref} .jqFilter or jsonPath must be specified for {template_type} templates"
        )
    if template_type in ("DAG", "Steps"):
        if not (source.get("parameter") or source.get("expression")):
            raise Invalid(
                f"{ref}.parameter or expression must be specified for {template_type} templates"
            )
        if source.get("parameter") and source.get("expression"):
            raise Invalid(
                f"{ref} shouldn't have both `from` and `expression` specified in `ValueFrom` "
                f"for {template_type} templates"
            )


# Metrics: the checks of validate.go:validateTemplate, with workflow/metrics/util.go's rules.

METRIC_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")  # Prometheus' legacy names, without ':'


def validate_metrics(template_name: str, metrics: Mapping[str, Any]) -> None:
    for metric in map(as_map, as_list(metrics.get("prometheus"))):
        name = as_str(metric.get("name"))
        if not METRIC_NAME.fullmatch(name):
            raise Invalid(
                f"templates.{template_name} metric name '{name}' is invalid. "
                "Metric names must contain alphanumeric characters or '_'"
            )
        for label in map(as_map, as_list(metric.get("labels"))):
            key = as_str(label.get("key"))
            if not METRIC_NAME.fullmatch(key):
                raise Invalid(
                    f"metric label '{key}' is invalid: keys may only contain alphanumeric characters or '_'"
                )
        if not metric.get("help"):
            raise Invalid(
                f"templates.{template_name} metric '{name}' must contain a help string under 'help: ' field"
            )
        if fault := _metric_value_fault(metric):
            raise Invalid(f"templates.{template_name} metric '{name}' error: {fault}")


def _metric_value_fault(metric: Mapping[str, Any]) -> str | None:
    """metrics.ValidateMetricValues."""
    gauge = metric.get("gauge")
    if gauge is not None:
        gauge = as_map(gauge)
        if not gauge.get("value"):
            return "missing gauge.value"
        if gauge.get("realtime") is True and "resourcesDuration." in as_str(gauge.get("value")):
            return "'resourcesDuration.*' metrics cannot be used in real-time"
    for kind in ("counter", "histogram"):
        if metric.get(kind) is not None and not as_map(metric[kind]).get("value"):
            return f"missing {kind}.value"
    return None


# Pods and the workflow: validatePodResources, validateHooks, the podGC checks of Workflow().

POD_GC_STRATEGIES = {
    "",
    "OnPodCompletion",
    "OnPodSuccess",
    "OnWorkflowCompletion",
    "OnWorkflowSuccess",
}
SELECTOR_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def validate_pod_resources(prefix: str, resources: Any) -> None:
    """Pod-level resources: cpu, memory and hugepages-* only, and no claims."""
    if resources is None:
        return
    resources = as_map(resources)
    if as_list(resources.get("claims")):
        raise Invalid(f"{prefix}.claims is not supported for pod-level resources")
    for field in ("limits", "requests"):
        for name in as_map(resources.get(field)):
            if name not in ("cpu", "memory") and not str(name).startswith("hugepages-"):
                raise Invalid(
                    f'{prefix}: "{name}" is not a valid pod-level resource, '
                    "only cpu, memory and hugepages-* are supported"
                )


def validate_hooks(hooks: Any, base: str) -> None:
    """Every lifecycle hook but `exit` needs an expression saying when it runs."""
    for name, hook in as_map(hooks).items():
        if name != "exit" and not as_map(hook).get("expression"):
            raise Invalid(f"{base}.{name} Expression required")


def validate_pod_gc(pod_gc: Any) -> None:
    """A known strategy, and a label selector Kubernetes can parse."""
    if pod_gc is None:
        return
    pod_gc = as_map(pod_gc)
    strategy = as_str(pod_gc.get("strategy"))
    if strategy not in POD_GC_STRATEGIES:
        raise Invalid(f"podGC.strategy unknown strategy '{strategy}'")
    if fault := _label_selector_fault(pod_gc.get("labelSelector")):
        raise Invalid(f"podGC.labelSelector invalid: {fault}")


def _label_key_fault(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not LABEL_PREFIX.fullmatch(prefix)):
        return f'key: Invalid value: "{key}": prefix part must be a lowercase RFC 1123 subdomain'
    if not name or len(name) > 63 or not LABEL_NAME.fullmatch(name):
        return f'key: Invalid value: "{key}": name part must be a valid label name'
    return None


def _label_selector_fault(selector: Any) -> str | None:
    """metav1.LabelSelectorAsSelector's complaints, worded briefly."""
    if selector is None:
        return None
    selector = as_map(selector)
    for key, value in as_map(selector.get("matchLabels")).items():
        if fault := _label_key_fault(str(key)):
            return fault
        text = as_str(value)
        if text and (len(text) > 63 or not LABEL_NAME.fullmatch(text)):
            return f'values[0][{key}]: Invalid value: "{text}": must be a valid label value'
    for requirement in map(as_map, as_list(selector.get("matchExpressions"))):
        key, operator = as_str(requirement.get("key")), as_str(requirement.get("operator"))
        values = as_list(requirement.get("values"))
        if operator not in SELECTOR_OPERATORS:
            return f'"{operator}" is not a valid label selector operator'
        if fault := _label_key_fault(key):
            return fault
        # labels.NewRequirement's field.Invalid prints the values as JSON: absent ones as null
        shown = "null" if requirement.get("values") is None else tags.go_json(values)
        if operator in ("In", "NotIn") and not values:
            return (
                f"values: Invalid value: {shown}: for 'in', 'notin' operators, values set can't be "
                "empty"
            )
        if operator in ("Exists", "DoesNotExist") and values:
            return (
                f"values: Invalid value: {shown}: values set must be empty for exists and does not "
                "exist"
            )
    return None
