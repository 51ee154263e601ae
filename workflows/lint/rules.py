"""Argo v4.1.2's validation of a Workflow, WorkflowTemplate or ClusterWorkflowTemplate, for `dag` and
`container` templates: what `workflow/validate/validate.go` checks before a workflow may run.

The walk follows Argo's order, because the order decides what is in scope: the entrypoint first (with the
workflow's arguments), then the exit handler, then every template; a DAG's tasks in dependency order, each
task's template validated before the task's own references. Argo stops at the first fault, and so does this.
Templates of other types are named in `unchecked`, as are references to WorkflowTemplates not given.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.common import tags
from workflows.lint.fields import (
    Invalid,
    any_string,
    as_list,
    as_map,
    as_str,
    atoi,
    check_names,
    clean_path_error,
    has_location_or_key,
    named_parameters_and_artifacts,
    param_or_artifact_name_errors,
    validate_arguments,
    validate_artifact_location,
    validate_hooks,
    validate_metrics,
    validate_output_parameter,
    validate_pod_gc,
    validate_pod_resources,
)

# wfv1.Template.GetType, in its order, and the groups Argo puts the types in.
TEMPLATE_TYPES = (
    ("container", "Container"),
    ("containerSet", "ContainerSet"),
    ("steps", "Steps"),
    ("dag", "DAG"),
    ("script", "Script"),
    ("resource", "Resource"),
    ("data", "Data"),
    ("suspend", "Suspend"),
    ("http", "HTTP"),
    ("plugin", "Plugin"),
)
CHECKED_TYPES = {"Container", "DAG"}
LEAF_TYPES = {"Container", "ContainerSet", "Script", "Resource", "Data", "HTTP", "Plugin"}
POD_TYPES = {"Container", "ContainerSet", "Script", "Resource", "Data"}
TYPE_CHOICES = "choose one of: container, containerSet, steps, script, resource, dag, suspend, template, template ref"
RETRY_POLICIES = {"", "Always", "OnError", "OnFailure", "OnTransientError"}
RETRY_VARIABLES = (
    "retries",
    "lastRetry.exitCode",
    "lastRetry.status",
    "lastRetry.duration",
    "lastRetry.message",
)
# workflow/common/common.go:IsArgoSidecar: the controller's own containers.
RESERVED_CONTAINERS = {"wait", "supervisor"}
RESERVED_CONTAINER_PREFIX = "artifact-plugin-"
MAX_NAME = 63
MAX_NAME_BY_KIND = {
    "Workflow": "workflow name",
    "WorkflowTemplate": "workflow template name",
    "ClusterWorkflowTemplate": "cluster workflow template name",
}
KINDS = tuple(MAX_NAME_BY_KIND)

# The order Go's encoding/json writes these objects in (wfv1.Template, wfv1.DAGTask, corev1.Container): the
# order Argo meets their `{{…}}` tags in, so the first unresolved one is the one Argo names.
# fmt: off
GO_FIELD_ORDER = {
    "template": (
        "name", "inputs", "outputs", "nodeSelector", "affinity", "metadata", "daemon", "steps",
        "container", "containerSet", "script", "resource", "dag", "suspend", "data", "http",
        "plugin", "volumes", "initContainers", "sidecars", "archiveLocation",
        "activeDeadlineSeconds", "retryStrategy", "parallelism", "failFast", "tolerations",
        "schedulerName", "priorityClassName", "serviceAccountName", "automountServiceAccountToken",
        "executor", "hostAliases", "securityContext", "podSpecPatch", "metrics", "synchronization",
        "memoize", "timeout",
    ),
    "task": (
        "name", "template", "inline", "arguments", "templateRef", "dependencies", "withItems",
        "withParam", "withSequence", "when", "continueOn", "onExit", "depends", "hooks",
    ),
    "container": (
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
        "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe",
        "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
        "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
        "tty",
    ),
}
# fmt: on


def go_ordered(value: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """`value` with its fields in Go's order (fields Go does not know last, as written)."""
    order = {name: index for index, name in enumerate(GO_FIELD_ORDER[kind])}
    ordered = dict(sorted(value.items(), key=lambda item: order.get(item[0], len(order))))
    if kind == "template" and isinstance(ordered.get("container"), Mapping):
        ordered["container"] = go_ordered(ordered["container"], "container")
    return ordered


# workflow/common/ancestry.go: task names and `task.Result` terms in a depends expression.
TASK_NAME_RE = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)")
TASK_RESULT_RE = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)")
TASK_RESULTS = {
    "Succeeded",
    "Failed",
    "Errored",
    "Skipped",
    "Omitted",
    "Daemoned",
    "AnySucceeded",
    "AllFailed",
}
ITEMS_RESULTS = {"AnySucceeded", "AllFailed"}


def template_type(template: Mapping[str, Any]) -> str:
    for key, name in TEMPLATE_TYPES:
        if template.get(key) is not None:
            return name
    return "Unknown"


def has_output(template: Mapping[str, Any]) -> bool:
    """wfv1.Template.HasOutput: the template has a `result` (and an exit code) to refer to."""
    kind = template_type(template)
    if kind == "ContainerSet":
        containers = as_list(as_map(template.get("containerSet")).get("containers"))
        return any(as_map(container).get("name") == "main" for container in containers)
    return kind in {"Container", "Script", "Data", "HTTP", "Plugin"}


def is_reserved_container(name: str) -> bool:
    return name in RESERVED_CONTAINERS or name.startswith(RESERVED_CONTAINER_PREFIX)


@dataclass(frozen=True)
class Holder:
    """What templates are looked up in: the workflow being checked, or a referenced WorkflowTemplate."""

    kind: str
    name: str
    spec: Mapping[str, Any]

    def template(self, name: str) -> Mapping[str, Any] | None:
        for template in as_list(self.spec.get("templates")):
            if as_map(template).get("name") == name:
                return as_map(template)
        return None

    def has_default_image(self, field_name: str) -> bool:
        """validateLeaf: an empty image is allowed when templateDefaults supplies one (not for a
        ClusterWorkflowTemplate reached by reference, whose defaults Argo does not consult)."""
        if self.kind == "ClusterWorkflowTemplate":
            return False
        defaults = as_map(self.spec.get("templateDefaults"))
        return bool(as_map(defaults.get(field_name)).get("image"))


class Opaque:
    """A template in a WorkflowTemplate that was not given: whatever it outputs may be referenced."""


OPAQUE = Opaque()


class FakeArguments:
    """validate.go:FakeArguments: every input is supplied, with a value known only at run time."""

    def __init__(self, placeholders: tags.Placeholders) -> None:
        self._placeholders = placeholders

    def parameter(self, name: str) -> Mapping[str, Any]:
        return {"name": name, "value": self._placeholders.next()}

    def artifact(self, name: str) -> Mapping[str, Any]:
        return {"name": name}


class GivenArguments:
    """The arguments a task (or the workflow) actually passes."""

    def __init__(self, arguments: Any) -> None:
        self._arguments = as_map(arguments)

    def _find(self, field_name: str, name: str) -> Mapping[str, Any] | None:
        for item in as_list(self._arguments.get(field_name)):
            if as_map(item).get("name") == name:
                return as_map(item)
        return None

    def parameter(self, name: str) -> Mapping[str, Any] | None:
        return self._find("parameters", name)

    def artifact(self, name: str) -> Mapping[str, Any] | None:
        return self._find("artifacts", name)


Arguments = FakeArguments | GivenArguments


class DagGraph:
    """A DAG's tasks and what each depends on (workflow/common/ancestry.go)."""

    def __init__(self, tasks: list[Mapping[str, Any]]) -> None:
        self.tasks = {as_str(task.get("name")): task for task in tasks}
        self._dependencies: dict[str, dict[str, bool]] = {}

    def task(self, name: str) -> Mapping[str, Any]:
        return self.tasks.get(name, {})

    def depends_logic(self, task: Mapping[str, Any]) -> str:
        """The task's `depends`, or its `dependencies` written as the depends expression they mean."""
        if depends := as_str(task.get("depends")):
            return depends
        return " && ".join(self._expand(as_str(name)) for name in as_list(task.get("dependencies")))

    def _expand(self, name: str) -> str:
        continue_on = as_map(self.task(name).get("continueOn"))
        results = ["Succeeded", "Skipped", "Daemoned"]
        if continue_on.get("error") is True:
            results.append("Errored")
        if continue_on.get("failed") is True:
            results.append("Failed")
        return "(" + " || ".join(f"{name}.{result}" for result in results) + ")"

    def dependencies_of(self, task: Mapping[str, Any]) -> dict[str, bool]:
        """Each task named in the expression, and whether it is named by an items-based result."""
        dependencies: dict[str, bool] = {}
        for match in TASK_NAME_RE.finditer(self.depends_logic(task)):
            if match.group(1):
                name, result = match.group(1).split(".")
                if result in ITEMS_RESULTS:
                    dependencies[name] = True
                else:
                    dependencies.setdefault(name, False)
            else:
                dependencies[match.group(2)] = False
        return dependencies

    def dependencies(self, name: str) -> dict[str, bool]:
        if name not in self._dependencies:
            self._dependencies[name] = self.dependencies_of(self.task(name))
        return self._dependencies[name]

    def ancestry(self, name: str) -> list[str]:
        """Every task `name` depends on, directly or not."""
        found: dict[str, None] = {}

        def visit(current: str) -> None:
            if current in found:
                return
            for dependency in self.dependencies(current):
                visit(dependency)
            if current != name:
                found.setdefault(current, None)

        visit(name)
        return list(found)


def sort_tasks(tasks: list[Mapping[str, Any]], graph: DagGraph) -> list[Mapping[str, Any]]:
    """util/sorting TopologicalSorting, as validateDAG sorts the tasks before anything else."""
    names = [as_str(task.get("name")) for task in tasks]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise Invalid(f"duplicated nodeName {name}")
        seen.add(name)
    waiting = {}
    followers: dict[str, list[str]] = {name: [] for name in names}
    for task, name in zip(tasks, names, strict=True):
        dependencies = graph.dependencies_of(task)
        waiting[name] = len(dependencies)
        for dependency in dependencies:
            if dependency not in followers:
                raise Invalid(f"invalid dependency {dependency}")
            followers[dependency].append(name)
    order = [name for name in names if waiting[name] == 0]
    for name in order:  # grows while it is walked
        for follower in followers[name]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                order.append(follower)
    if len(order) < len(names):
        raise Invalid("graph with cycle")
    by_name = dict(zip(names, tasks, strict=True))
    return [by_name[name] for name in order]


def validate_task_results(task: Mapping[str, Any]) -> None:
    """ancestry.go:ValidateTaskResults: each `task.Result` names a result Argo knows."""
    for match in TASK_RESULT_RE.finditer(as_str(task.get("depends"))):
        name, result = match.group(1).split(".")
        if result not in TASK_RESULTS:
            raise Invalid(f"task result '{result}' for task '{name}' is invalid")


def add_items_to_scope(task: Mapping[str, Any], scope: set[str]) -> None:
    """validate.go:addItemsToScope: one loop kind at most, and the `item` references it defines."""
    items, param, sequence = (
        as_list(task.get("withItems")),
        as_str(task.get("withParam")),
        task.get("withSequence"),
    )
    if bool(items) + bool(param) + (sequence is not None) > 1:
        raise Invalid("only one of withItems, withParam, withSequence can be specified")
    if items:
        for item in items:
            if isinstance(item, list):
                scope.update(f"item.[{index}]" for index in range(len(item)))
            elif isinstance(item, Mapping):
                scope.update(f"item.{key}" for key in item)
            elif item is not None:
                scope.add("item")
    elif param:
        scope.update({"item", "item" + tags.ANY_SUFFIX})
    elif sequence is not None:
        sequence = as_map(sequence)
        if sequence.get("count") is not None and sequence.get("end") is not None:
            raise Invalid("only one of count or end can be defined in withSequence")
        scope.add("item")


def check_argument_dependencies(arguments: Any, ancestry: list[str]) -> None:
    """validate.go:validateDAGTaskArgumentDependency: a value taken from a task needs that task upstream."""
    arguments = as_map(arguments)
    for parameter in map(as_map, as_list(arguments.get("parameters"))):
        value = parameter.get("value")
        if value is not None and any_string(value).startswith("{{tasks."):
            task = any_string(value).split(".")[1]
            if task not in ancestry:
                name = as_str(parameter.get("name"))
                raise Invalid(f"missing dependency '{task}' for parameter '{name}'")
    for artifact in map(as_map, as_list(arguments.get("artifacts"))):
        source = as_str(artifact.get("from"))
        if source.startswith("{{tasks."):
            task = source.split(".")[1]
            if task not in ancestry:
                name = as_str(artifact.get("name"))
                raise Invalid(f"missing dependency '{task}' for artifact '{name}'")


def check_artifact_path(ref: str, artifact: Mapping[str, Any], kind: str) -> None:
    """validateInputs, validateOutputs: a leaf template's artifact path is clean; no other template
    type may give one."""
    if kind in LEAF_TYPES:
        if fault := clean_path_error(artifact):
            raise Invalid(f"error in {ref}: {fault}")
    elif artifact.get("path"):
        raise Invalid(f"{ref}.path only valid in container/script templates")


def add_mount_paths(
    mounted: dict[str, str], name: str, group: str, items: list[Any], path_field: str
) -> None:
    """validateLeaf: no path mounted twice, by volume mounts or input artifacts; `mounted` maps each
    path to what mounts it."""
    for index, item in enumerate(map(as_map, items)):
        path = as_str(item.get(path_field))
        if path in mounted:
            raise Invalid(
                f"templates.{name}.{group}[{index}].{path_field} '{path}' "
                f"already mounted in {mounted[path]}"
            )
        mounted[path] = f"{group}.{as_str(item.get('name'))}"


def check_dependency_style(name: str, task: Mapping[str, Any], using_depends: bool) -> None:
    """validateDAG: a DAG uses `depends` or `dependencies`, not both, and `depends` without
    `continueOn`; task names that either uses begin with a letter."""
    task_name = as_str(task.get("name"))
    if (using_depends or as_list(task.get("dependencies"))) and task_name[0].isdigit():
        raise Invalid(
            f"templates.{name}.tasks.{task_name} name cannot begin with a digit when using either "
            "'depends' or 'dependencies'"
        )
    if using_depends and as_list(task.get("dependencies")):
        raise Invalid(
            f"templates.{name} cannot use both 'depends' and 'dependencies' in the same "
            "DAG template"
        )
    if using_depends and task.get("continueOn") is not None:
        raise Invalid(
            f"templates.{name} cannot use 'continueOn' when using 'depends'. "
            "Instead use 'dep-task.Failed'/'dep-task.Errored'"
        )


def output_paths(template: Mapping[str, Any], kind: str) -> set[str]:
    """The `outputs.….path` variables a leaf template's outputs define."""
    if kind not in LEAF_TYPES:
        return set()
    outputs = as_map(template.get("outputs"))
    paths = {
        f"outputs.artifacts.{as_str(artifact.get('name'))}.path"
        for artifact in map(as_map, as_list(outputs.get("artifacts")))
        if artifact.get("path")
    }
    return paths | {
        f"outputs.parameters.{as_str(parameter.get('name'))}.path"
        for parameter in map(as_map, as_list(outputs.get("parameters")))
        if as_map(parameter.get("valueFrom")).get("path")
    }


def check_pod_and_timeouts(
    template: Mapping[str, Any], processed: Mapping[str, Any], processed_kind: str
) -> None:
    """validateTemplate, on the template with its arguments given: resource claims need a pod,
    timeouts a leaf template, and a timeout a duration."""
    if as_list(template.get("resourceClaims")) and processed_kind not in POD_TYPES:
        raise Invalid(
            f"templates.{as_str(template.get('name'))}.resourceClaims is not supported for "
            f"{processed_kind} templates, which do not create a pod"
        )
    if timeout := as_str(processed.get("timeout")):
        if processed_kind not in LEAF_TYPES:
            raise Invalid(f"{processed_kind} template doesn't support timeout field")
        if atoi(timeout) is not None:
            raise Invalid(f"{as_str(processed.get('name'))} has invalid duration format in timeout")
    if as_str(processed.get("pendingTimeout")) and processed_kind not in LEAF_TYPES:
        raise Invalid(f"{processed_kind} template doesn't support pendingTimeout field")


@dataclass
class Validation:
    """One document's validation: the workflow-wide variables, templates already checked, what was not."""

    library: Mapping[tuple[bool, str], Mapping[str, Any]]
    placeholders: tags.Placeholders = field(default_factory=tags.Placeholders)
    globals: dict[str, str] = field(default_factory=dict)
    done: set[tuple[str, str, str]] = field(default_factory=set)
    unchecked: list[str] = field(default_factory=list)

    def note_unchecked(self, what: str) -> None:
        if what not in self.unchecked:
            self.unchecked.append(what)

    # The document: validate.go Workflow, WorkflowTemplate, ClusterWorkflowTemplate.

    def document(self, document: Mapping[str, Any]) -> None:
        kind = as_str(document.get("kind"))
        metadata, spec = as_map(document.get("metadata")), as_map(document.get("spec"))
        name = as_str(metadata.get("name"))
        if len(name) > MAX_NAME:
            raise Invalid(
                f"{MAX_NAME_BY_KIND[kind]} {json.dumps(name)} must not be more than {MAX_NAME} "
                f"characters long (currently {len(name)})"
            )
        self.workflow(metadata, spec, template_validation=kind != "Workflow")

    def workflow(
        self, metadata: Mapping[str, Any], spec: Mapping[str, Any], template_validation: bool
    ) -> None:
        """Workflow(): arguments, workflow variables, entrypoint, exit handler, pod GC, every template."""
        for name in ("name", "namespace", "mainEntrypoint", "serviceAccountName", "uid"):
            self.globals[f"workflow.{name}"] = self.placeholders.next()
        base = Holder("Workflow", as_str(metadata.get("name")), spec)
        reference, referenced = self._workflow_template_ref(spec)
        if reference is not None and referenced is None:
            return
        referenced_spec = as_map(referenced.spec) if referenced else {}
        try:
            check_names(as_list(spec.get("templates")), parameters_or_artifacts=False)
        except Invalid as fault:
            raise fault.within("spec.templates", "") from None
        if spec.get("executorPlugins"):
            self.note_unchecked("spec.executorPlugins")
        arguments = self._merged_arguments(spec, referenced_spec)
        # the Argo Server's create: only a WorkflowTemplate may leave argument values to submission
        validate_arguments("spec.arguments.", arguments, allow_empty_values=template_validation)
        self._workflow_variables(metadata, spec, referenced_spec, arguments)
        # a WorkflowTemplate without an entrypoint of its own is not checked from one
        if as_str(spec.get("entrypoint")) or not template_validation:
            entrypoint = as_str(spec.get("entrypoint")) or as_str(referenced_spec.get("entrypoint"))
            if not entrypoint:
                raise Invalid("spec.entrypoint is required")
            args = (
                FakeArguments(self.placeholders)
                if template_validation
                else GivenArguments(arguments)
            )
            self.holder(self._holder_for(reference, entrypoint), base, args, template_validation)
        self._exit_handler(spec, referenced_spec, reference, base, template_validation)
        validate_hooks(spec.get("hooks"), "hooks")
        validate_pod_gc(spec.get("podGC"))
        validate_pod_resources("spec.podResources", spec.get("podResources"))
        for template in as_list((referenced_spec if referenced else spec).get("templates")):
            name = as_str(as_map(template).get("name"))
            try:
                self.holder(
                    self._holder_for(reference, name),
                    base,
                    FakeArguments(self.placeholders),
                    template_validation,
                )
            except Invalid as fault:
                raise fault.within(f"templates.{name}") from None

    @staticmethod
    def _holder_for(reference: Mapping[str, Any] | None, template: str) -> Mapping[str, Any]:
        """What runs `template`: by name, or through the workflowTemplateRef."""
        if reference is None:
            return {"template": template}
        return {"templateRef": {**reference, "template": template}}

    def _exit_handler(
        self,
        spec: Mapping[str, Any],
        referenced_spec: Mapping[str, Any],
        reference: Mapping[str, Any] | None,
        base: Holder,
        template_validation: bool,
    ) -> None:
        """The onExit template, which may also use `workflow.failures` and global output artifacts."""
        on_exit = as_str(spec.get("onExit")) or as_str(referenced_spec.get("onExit"))
        if not on_exit:
            return
        self.globals["workflow.failures"] = self.placeholders.next()
        templates = as_list(spec.get("templates")) + as_list(referenced_spec.get("templates"))
        if any(
            tags.is_parameter(as_str(as_map(artifact).get("globalName")))
            for template in templates
            for artifact in as_list(as_map(as_map(template).get("outputs")).get("artifacts"))
        ):
            self.globals["workflow.outputs.artifacts" + tags.ANY_SUFFIX] = "true"
        self.holder(
            self._holder_for(reference, on_exit),
            base,
            GivenArguments(spec.get("arguments")),
            template_validation,
        )

    def _workflow_template_ref(
        self, spec: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, Holder | None]:
        """The workflowTemplateRef (as a templateRef's name and scope) and the template it names."""
        if spec.get("workflowTemplateRef") is None:
            return None, None
        if as_list(spec.get("templates")):
            raise Invalid(
                "Templates is invalid field in spec if workflow referred WorkflowTemplate reference"
            )
        ref = as_map(spec.get("workflowTemplateRef"))
        cluster = ref.get("clusterScope") is True
        reference = {"name": as_str(ref.get("name")), "clusterScope": cluster}
        referenced = self._library_holder(cluster, reference["name"])
        if referenced is None:
            self.note_unchecked(
                f"workflowTemplateRef '{reference['name']}' not checked: "
                f"{self._library_kind(cluster)} not given"
            )
        return reference, referenced

    @staticmethod
    def _library_kind(cluster: bool) -> str:
        return "ClusterWorkflowTemplate" if cluster else "WorkflowTemplate"

    def _library_holder(self, cluster: bool, name: str) -> Holder | None:
        document = self.library.get((cluster, name))
        if document is None:
            return None
        return Holder(self._library_kind(cluster), name, as_map(document.get("spec")))

    @staticmethod
    def _merged_arguments(
        spec: Mapping[str, Any], referenced_spec: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The workflow's arguments, then the referenced template's that it does not override."""
        merged: dict[str, Any] = {}
        for field_name in ("parameters", "artifacts"):
            items, seen = [], set()
            for source in (spec, referenced_spec):
                for item in as_list(as_map(source.get("arguments")).get(field_name)):
                    name = as_map(item).get("name")
                    if name not in seen:
                        seen.add(name)
                        items.append(item)
            merged[field_name] = items
        return merged

    def _workflow_variables(
        self,
        metadata: Mapping[str, Any],
        spec: Mapping[str, Any],
        referenced_spec: Mapping[str, Any],
        arguments: Mapping[str, Any],
    ) -> None:
        """The `workflow.*` variables every template may use (Workflow(), util/variables/keys)."""
        parameters = as_list(arguments.get("parameters"))
        if parameters:
            self.globals["workflow.parameters"] = self.placeholders.next()
            self.globals["workflow.parameters.json"] = self.placeholders.next()
        for parameter in map(as_map, parameters):
            if name := as_str(parameter.get("name")):
                value = parameter.get("value")
                self.globals[f"workflow.parameters.{name}"] = (
                    any_string(value) if value is not None else self.placeholders.next()
                )
        annotations, labels = (
            set(as_map(metadata.get("annotations"))),
            set(as_map(metadata.get("labels"))),
        )
        for source in (spec, referenced_spec):
            workflow_metadata = as_map(source.get("workflowMetadata"))
            annotations |= set(as_map(workflow_metadata.get("annotations")))
            labels |= set(as_map(workflow_metadata.get("labels")))
            labels |= set(as_map(workflow_metadata.get("labelsFrom")))
        for group, keys in (("annotations", annotations), ("labels", labels)):
            for key in keys:
                self.globals[f"workflow.{group}.{key}"] = self.placeholders.next()
            self.globals[f"workflow.{group}"] = self.placeholders.next()
            self.globals[f"workflow.{group}.json"] = self.placeholders.next()
        if isinstance(spec.get("priority"), int):
            self.globals["workflow.priority"] = str(spec["priority"])
        self.globals["workflow.status"] = self.placeholders.next()

    # Templates: validateTemplateHolder, validateTemplate.

    def holder(
        self, holder: Mapping[str, Any], base: Holder, args: Arguments, template_validation: bool
    ) -> Mapping[str, Any] | Opaque | None:
        """validateTemplateHolder: find the template a task (or the entrypoint) runs, then check it.

        Returns the template, OPAQUE when it lives in a WorkflowTemplate not given, or None when its
        reference needs run-time values (Argo skips it too).
        """
        name, ref = as_str(holder.get("template")), holder.get("templateRef")
        if ref is not None:
            ref = as_map(ref)
            if name:
                raise Invalid("template name cannot be specified with templateRef")
            if not ref.get("name"):
                raise Invalid("resource name is required")
            if not ref.get("template"):
                raise Invalid("template name is required")
            if tags.has_simple_tag(tags.go_json(ref)):
                self.note_unchecked(
                    f"templateRef {tags.go_json(dict(ref))} not checked: it is resolved at run time"
                )
                return None
            cluster = ref.get("clusterScope") is True
            ref_name, ref_template = as_str(ref["name"]), as_str(ref["template"])
            referenced = self._library_holder(cluster, ref_name)
            if referenced is None and tags.PLACEHOLDER_PREFIX in ref_template:
                self.note_unchecked(
                    f"templateRef {tags.go_json(dict(ref))} not checked: it is resolved at run time"
                )
                return None
            if referenced is None and tags.PLACEHOLDER_PREFIX in ref_name:
                # a variable with no value before the run names the WorkflowTemplate: Argo finds none
                raise Invalid(f"template reference {ref_name}.{ref_template} not found")
            if referenced is None:
                self.note_unchecked(
                    f"templateRef '{ref_name}.{ref_template}' not checked: "
                    f"{self._library_kind(cluster)} '{ref_name}' not given"
                )
                return OPAQUE
            template = referenced.template(ref_template)
            if template is None:
                raise Invalid(f"template reference {ref_name}.{ref_template} not found")
            base = referenced
        elif name and base.template(name) is None:
            raise Invalid(f"template name '{name}' undefined")
        elif holder.get("inline") is not None:
            template = as_map(holder["inline"])
        elif name:
            template = as_map(base.template(name))
        else:
            raise Invalid("failed to get a template")
        retry = template.get("retryStrategy")
        if retry is not None:
            policy = as_str(as_map(retry).get("retryPolicy"))
            if policy not in RETRY_POLICIES:
                raise Invalid(f"{policy} is not a valid RetryPolicy")
        self.template(template, base, args, template_validation)
        return template

    def template(
        self, template: Mapping[str, Any], base: Holder, args: Arguments, template_validation: bool
    ) -> None:
        """validateTemplate: what every template must satisfy, then its type's own rules."""
        name = as_str(template.get("name"))
        kind = self._kind(template)
        scope = self._inputs(template, kind)
        for container in map(as_map, as_list(template.get("initContainers"))):
            if not container.get("name"):
                raise Invalid("initContainers must all have container name")
        local: dict[str, str] = {}
        if kind in POD_TYPES:
            local["pod.name"] = self.placeholders.next()
        if template.get("retryStrategy") is not None:
            local.update({variable: self.placeholders.next() for variable in RETRY_VARIABLES})
        scope |= set(local) | output_paths(template, kind)
        try:
            processed = self._process_args(template, args, local)
        except (Invalid, tags.TagError) as fault:
            raise Invalid(f"templates.{name} {fault}") from None
        processed_kind = template_type(processed)
        check_pod_and_timeouts(template, processed, processed_kind)
        key = (base.kind, base.name, name)
        if key in self.done:
            return
        self.done.add(key)
        scope |= set(self.globals)
        if processed_kind == "DAG":
            self._dag(scope, base, processed, template_validation)
        elif processed_kind == "Container":
            self._container(scope, base, processed, template_validation)
        else:
            self.note_unchecked(f"template '{name}' ({processed_kind.lower()}) not checked")
            return
        self._outputs(scope, processed, processed_kind, template_validation)
        if processed.get("archiveLocation") is not None:
            validate_artifact_location(
                f"templates.{as_str(processed.get('name'))}.archiveLocation",
                as_map(processed["archiveLocation"]),
            )
        if processed.get("metrics") is not None:
            validate_metrics(name, as_map(processed["metrics"]))

    @staticmethod
    def _kind(template: Mapping[str, Any]) -> str:
        """The template's one type, and the pod resources that type may have."""
        name = as_str(template.get("name"))
        kinds = [kind for key, kind in TEMPLATE_TYPES if template.get(key) is not None]
        if not kinds:
            raise Invalid(f"templates.{name} template type unspecified. {TYPE_CHOICES}")
        if len(kinds) > 1:
            raise Invalid(f"templates.{name} multiple template types specified. {TYPE_CHOICES}")
        kind = kinds[0]
        if template.get("podResources") is not None:
            if kind in ("HTTP", "Plugin"):
                raise Invalid(
                    f"templates.{name}.podResources is not supported for {kind} templates"
                )
            validate_pod_resources(f"templates.{name}.podResources", template["podResources"])
        return kind

    def _inputs(self, template: Mapping[str, Any], kind: str) -> set[str]:
        """validateInputs: input names, artifact paths and sources; returns the scope they define."""
        name = as_str(template.get("name"))
        parameters, artifacts = named_parameters_and_artifacts(
            as_map(template.get("inputs")), f"templates.{name}.inputs.", separator=""
        )
        scope = {f"inputs.parameters.{as_str(as_map(p).get('name'))}" for p in parameters}
        if parameters:
            scope.add("inputs.parameters")
        for artifact in map(as_map, artifacts):
            ref = f"inputs.artifacts.{as_str(artifact.get('name'))}"
            scope.add(ref)
            check_artifact_path(f"templates.{name}.{ref}", artifact, kind)
            if kind in LEAF_TYPES:
                scope.add(f"{ref}.path")
            if artifact.get("from"):
                raise Invalid(f"templates.{name}.{ref}.from not valid in inputs")
            validate_artifact_location(f"templates.{name}.{ref}", artifact)
        return scope

    def _process_args(
        self, template: Mapping[str, Any], args: Arguments, local: Mapping[str, str]
    ) -> dict[str, Any]:
        """workflow/common/util.go:ProcessArgs: give every input its value, then substitute."""
        processed = copy.deepcopy(dict(template))
        inputs = as_map(processed.get("inputs"))
        for parameter in as_list(inputs.get("parameters")):
            if not isinstance(parameter, dict):
                continue
            if parameter.get("value") is None and parameter.get("default") is not None:
                parameter["value"] = parameter["default"]
            given = args.parameter(as_str(parameter.get("name")))
            if given is not None:
                if given.get("value") is not None:
                    parameter["value"] = given["value"]
                    parameter.pop("valueFrom", None)
                else:
                    parameter["valueFrom"] = given.get("valueFrom")
                    parameter.pop("value", None)
            from_config_map = as_map(parameter.get("valueFrom")).get("configMapKeyRef") is not None
            if not from_config_map and parameter.get("value") is None:
                raise Invalid(f"inputs.parameters.{as_str(parameter.get('name'))} was not supplied")
        artifacts = as_list(inputs.get("artifacts"))
        for index, artifact in enumerate(artifacts):
            artifact = as_map(artifact)
            name = as_str(artifact.get("name"))
            given = args.artifact(name)
            required = artifact.get("optional") is not True and not has_location_or_key(artifact)
            if required and given is None:
                raise Invalid(f"inputs.artifacts.{name} was not supplied")
            if given is not None:
                supplied = dict(given)
                for kept in ("path", "mode", "recurseMode"):
                    supplied.pop(kept, None)
                    if kept in artifact:
                        supplied[kept] = artifact[kept]
                artifacts[index] = supplied
        return self._substitute(processed, local)

    def _substitute(self, template: dict[str, Any], local: Mapping[str, str]) -> dict[str, Any]:
        """workflow/common/util.go:SubstituteParams: workflow and local variables, then inputs."""
        values = {**self.globals, **local}
        text = tags.substitute(tags.go_json(template), values)
        replaced = json.loads(text)
        inputs, outputs = as_map(replaced.get("inputs")), as_map(replaced.get("outputs"))
        parameters = as_list(inputs.get("parameters"))
        for parameter in map(as_map, parameters):
            if parameter.get("value") is not None:
                values[f"inputs.parameters.{as_str(parameter.get('name'))}"] = any_string(
                    parameter["value"]
                )
        values["inputs.parameters"] = tags.go_json(parameters)
        for group, artifacts in (("inputs", inputs), ("outputs", outputs)):
            for artifact in map(as_map, as_list(artifacts.get("artifacts"))):
                if path := as_str(artifact.get("path")):
                    values[f"{group}.artifacts.{as_str(artifact.get('name'))}.path"] = path
        for parameter in map(as_map, as_list(outputs.get("parameters"))):
            if path := as_str(as_map(parameter.get("valueFrom")).get("path")):
                values[f"outputs.parameters.{as_str(parameter.get('name'))}.path"] = path
        return json.loads(tags.substitute(text, values))

    def _unresolved(self, scope: set[str], text: str, template_validation: bool) -> str | None:
        try:
            return tags.unresolved(text, scope, self.globals, template_validation)
        except tags.TagError as fault:
            return str(fault)

    # Container templates: validateLeaf.

    def _container(
        self, scope: set[str], base: Holder, template: Mapping[str, Any], template_validation: bool
    ) -> None:
        name = as_str(template.get("name"))
        text = tags.go_json(go_ordered(template, "template"))
        if fault := self._unresolved(scope, text, template_validation):
            raise Invalid(f"templates.{name}: {fault}")
        container = as_map(template.get("container"))
        mounted: dict[str, str] = {}
        mounts = as_list(container.get("volumeMounts"))
        add_mount_paths(mounted, name, "container.volumeMounts", mounts, "mountPath")
        artifacts = as_list(as_map(template.get("inputs")).get("artifacts"))
        add_mount_paths(mounted, name, "inputs.artifacts", artifacts, "path")
        if not container.get("image") and not base.has_default_image("container"):
            raise Invalid(f"templates.{name}.container.image may not be empty")
        for sidecar in map(as_map, as_list(template.get("sidecars"))):
            if is_reserved_container(as_str(sidecar.get("name"))):
                raise Invalid(
                    f'templates.{name}.sidecars: "{as_str(sidecar.get("name"))}" is a reserved '
                    "Argo container name"
                )
        deadline = template.get("activeDeadlineSeconds")
        if deadline is not None and not self._valid_deadline(deadline):
            raise Invalid(
                f"templates.{name}.activeDeadlineSeconds must be a positive integer > 0 "
                "or an argo variable"
            )
        if template.get("parallelism") is not None:
            raise Invalid(f"templates.{name}.parallelism is only valid for steps and dag templates")

    @staticmethod
    def _valid_deadline(deadline: Any) -> bool:
        """An int-or-string: a whole number not below zero, or a reference resolved at run time
        (util/intstr IsValidIntOrArgoVariable and Int)."""
        if isinstance(deadline, bool):
            return False
        if isinstance(deadline, int):
            return deadline >= 0
        text = as_str(deadline)
        number = atoi(text)
        if number is not None:
            return number >= 0
        return (text.startswith("{{") and text.endswith("}}")) or tags.is_placeholder(text)

    # Outputs: validateOutputs.

    def _outputs(
        self, scope: set[str], template: Mapping[str, Any], kind: str, template_validation: bool
    ) -> None:
        name = as_str(template.get("name"))
        parameters, artifacts = named_parameters_and_artifacts(
            as_map(template.get("outputs")), f"templates.{name}.outputs.", separator=" "
        )
        text = tags.go_json(template.get("outputs") or {})
        if fault := self._unresolved(scope, text, template_validation):
            raise Invalid(f"templates.{name}.outputs {fault}")
        for artifact in map(as_map, artifacts):
            ref = f"outputs.artifacts.{as_str(artifact.get('name'))}"
            check_artifact_path(f"templates.{name}.{ref}", artifact, kind)
            self._check_global_name(f"templates.{name}.{ref}", artifact)
        for parameter in map(as_map, parameters):
            ref = f"templates.{name}.outputs.parameters.{as_str(parameter.get('name'))}"
            validate_output_parameter(ref, parameter, kind)
            self._check_global_name(ref, parameter)

    @staticmethod
    def _check_global_name(ref: str, output: Mapping[str, Any]) -> None:
        global_name = as_str(output.get("globalName"))
        if not global_name or tags.is_parameter(global_name):
            return  # a name given as a parameter is known only at run time
        if errors := param_or_artifact_name_errors(global_name):
            raise Invalid(f"{ref}.globalName: {errors[0]}")

    # DAG templates: validateDAG.

    def _dag(
        self, scope: set[str], base: Holder, template: Mapping[str, Any], template_validation: bool
    ) -> None:
        name, dag = as_str(template.get("name")), as_map(template.get("dag"))
        tasks, graph = self._sorted_tasks(template)
        using_depends = any(as_str(task.get("depends")) for task in tasks)
        resolved: dict[str, Mapping[str, Any] | Opaque | None] = {}
        for task in tasks:
            task_name = as_str(task.get("name"))
            where = f"templates.{name}.tasks.{task_name}"
            check_dependency_style(name, task, using_depends)
            try:
                resolved[task_name] = self.holder(
                    task, base, FakeArguments(self.placeholders), template_validation
                )
                self._add_outputs(resolved[task_name], task_name, scope, self._loops(task))
                validate_task_results(task)
            except Invalid as fault:
                raise fault.within(where) from None
            self._check_items_dependencies(name, task_name, graph)
        target = as_str(dag.get("target"))
        if fault := self._unresolved(scope, target, template_validation):
            raise Invalid(f"templates.{name}.targets {fault}")
        for target_name in target.split(" ") if target else ():
            if not tags.is_parameter(target_name) and target_name not in graph.tasks:
                raise Invalid(f"templates.{name}.targets: target '{target_name}' is not defined")
        for task in tasks:
            where = f"templates.{name}.tasks.{as_str(task.get('name'))}"
            self._task_references(where, scope, base, task, graph, resolved, template_validation)

    @staticmethod
    def _sorted_tasks(template: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], DagGraph]:
        """A DAG template's tasks in dependency order, their names checked, and their graph."""
        name = as_str(template.get("name"))
        if template.get("activeDeadlineSeconds") is not None:
            raise Invalid(
                f"templates.{name}.activeDeadlineSeconds is only valid for leaf templates"
            )
        tasks = [as_map(task) for task in as_list(as_map(template.get("dag")).get("tasks"))]
        if not tasks:
            raise Invalid(f"templates.{name} must have at least one task")
        graph = DagGraph(tasks)
        try:
            tasks = sort_tasks(tasks, graph)
        except Invalid as fault:
            raise fault.within(f"templates.{name} sorting failed:") from None
        try:
            check_names(tasks, parameters_or_artifacts=False)
        except Invalid as fault:
            raise fault.within(f"templates.{name}.tasks", "") from None
        return tasks, graph

    def _check_items_dependencies(self, name: str, task_name: str, graph: DagGraph) -> None:
        """An items-based condition (`.AnySucceeded`, `.AllFailed`) needs a task that loops."""
        for dependency, items_based in graph.dependencies(task_name).items():
            upstream = graph.task(dependency)
            if items_based and not self._loops(upstream) and upstream.get("withSequence") is None:
                # Argo names the dependency in both places
                raise Invalid(
                    f"templates.{name}.tasks.{dependency} dependency '{dependency}' uses an "
                    "items-based condition such as .AnySucceeded or .AllFailed but does not "
                    "contain any items"
                )

    def _task_references(
        self,
        where: str,
        scope: set[str],
        base: Holder,
        task: Mapping[str, Any],
        graph: DagGraph,
        resolved: Mapping[str, Mapping[str, Any] | Opaque | None],
        template_validation: bool,
    ) -> None:
        """A task's references, in the scope of what its ancestors output, then its template with the
        task's arguments. Adds the task's own outputs to `scope` for the tasks after it."""
        task_name = as_str(task.get("name"))
        if task.get("hooks") is not None:
            scope.add(f"tasks.{task_name}.status")
        self._add_outputs(resolved[task_name], task_name, scope, aggregate=False)
        task_scope = set(scope)
        ancestry = graph.ancestry(task_name)
        for ancestor in ancestry:
            loops = self._loops(graph.task(ancestor))
            self._add_outputs(resolved[ancestor], ancestor, task_scope, loops, ancestor=True)
        inline_inputs = as_map(as_map(task.get("inline")).get("inputs"))
        for parameter in map(as_map, as_list(inline_inputs.get("parameters"))):
            task_scope.add(f"inputs.parameters.{as_str(parameter.get('name'))}")
        try:
            add_items_to_scope(task, task_scope)
            text = tags.go_json(go_ordered(task, "task"))
            if fault := self._unresolved(task_scope, text, template_validation):
                raise Invalid(fault)
        except Invalid as fault:
            raise fault.within(where) from None
        validate_arguments(f"{where}.arguments.", as_map(task.get("arguments")), False)
        try:
            check_argument_dependencies(task.get("arguments"), ancestry)
            self.holder(task, base, GivenArguments(task.get("arguments")), template_validation)
        except Invalid as fault:
            raise fault.within(where) from None

    @staticmethod
    def _loops(task: Mapping[str, Any]) -> bool:
        """A task expanded over withItems or withParam, whose outputs are aggregated."""
        return bool(as_list(task.get("withItems"))) or bool(as_str(task.get("withParam")))

    def _add_outputs(
        self,
        template: Mapping[str, Any] | Opaque | None,
        task: str,
        scope: set[str],
        aggregate: bool,
        ancestor: bool = False,
    ) -> None:
        """validate.go:addOutputsToScope: what `tasks.<task>.…` a task defines, and global outputs."""
        ref = f"tasks.{task}"
        scope.update(f"{ref}.{key}" for key in ("id", "startedAt", "finishedAt", "hostNodeName"))
        if template is None:
            return
        if isinstance(template, Opaque):
            scope.add(ref + tags.ANY_SUFFIX)
            return
        if template.get("daemon") is True:
            scope.add(f"{ref}.ip")
        if has_output(template):
            scope.update({f"{ref}.outputs.result", f"{ref}.exitCode"})
        outputs = as_map(template.get("outputs"))
        for group in ("parameters", "artifacts"):
            for output in map(as_map, as_list(outputs.get(group))):
                scope.add(f"{ref}.outputs.{group}.{as_str(output.get('name'))}")
                global_name = as_str(output.get("globalName"))
                if not global_name:
                    continue
                if tags.is_parameter(global_name):
                    scope.add(f"workflow.outputs.{group}" + tags.ANY_SUFFIX)
                else:
                    variable = f"workflow.outputs.{group}.{global_name}"
                    scope.add(variable)
                    self.globals[variable] = self.placeholders.next()
        if aggregate:
            if template_type(template) in ("Script", "ContainerSet"):
                scope.update({f"{ref}.outputs.result", f"{ref}.exitCode"})
            scope.add(f"{ref}.outputs.parameters")
        if ancestor:
            scope.add(f"{ref}.status")


def validate_document(
    document: Mapping[str, Any], library: Mapping[tuple[bool, str], Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """Argo's first fault in `document` (if any), and what could not be checked."""
    validation = Validation(library)
    try:
        validation.document(document)
    except Invalid as fault:
        return [str(fault)], validation.unchecked
    return [], validation.unchecked
