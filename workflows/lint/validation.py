"""Argo v4.1.2's validation of a Workflow, WorkflowTemplate or ClusterWorkflowTemplate, for `dag` and
`container` templates: what `workflow/validate/validate.go` checks before a workflow may run.

The walk follows Argo's order, because the order decides what is in scope: the entrypoint first (with the
workflow's arguments), then the exit handler, then every template; a DAG's tasks in dependency order
(workflows/lint/dag.py), each task's template validated before the task's own references. Argo stops at
the first fault, and so does this. Templates of other types are named in `unchecked`, as are references to
WorkflowTemplates not given.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.lint.argo_common import tags
from workflows.lint.argo_common.numbers import atoi
from workflows.lint.argo_common.retry_strategy import RETRY_VARIABLES, policy_error
from workflows.lint.dag import DagRules
from workflows.lint.fields import (
    Invalid,
    any_string,
    as_list,
    as_map,
    as_str,
    check_names,
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
from workflows.lint.templates import (
    LEAF_TYPES,
    OPAQUE,
    POD_TYPES,
    TEMPLATE_TYPES,
    TYPE_CHOICES,
    Arguments,
    FakeArguments,
    GivenArguments,
    Holder,
    Opaque,
    add_mount_paths,
    check_artifact_path,
    check_pod_and_timeouts,
    go_ordered,
    is_reserved_container,
    output_paths,
    template_type,
)

MAX_NAME = 63
MAX_NAME_BY_KIND = {
    "Workflow": "workflow name",
    "WorkflowTemplate": "workflow template name",
    "ClusterWorkflowTemplate": "cluster workflow template name",
}
KINDS = tuple(MAX_NAME_BY_KIND)


@dataclass
class Validation(DagRules):
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
        self._expressions_in_arguments(arguments)
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

    def _expressions_in_arguments(self, arguments: Mapping[str, Any]) -> None:
        """Argo evaluates an expression tag in a workflow parameter's value, and its validation never
        looks inside one: noted as not checked (this project's settings never hold one)."""
        for parameter in as_list(arguments.get("parameters")):
            parameter = as_map(parameter)
            if tags.has_expression(as_str(parameter.get("value"))):
                self.note_unchecked(
                    f"spec.arguments.parameters.{as_str(parameter.get('name'))} holds an "
                    "expression tag ({{=…}}), which Argo evaluates"
                )

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
        name = as_str(ref.get("name"))
        reference = {"name": name, "clusterScope": cluster}
        referenced = self._library_holder(cluster, name)
        if referenced is None:
            self.note_unchecked(
                f"workflowTemplateRef '{name}' not checked: {self._library_kind(cluster)} not given"
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
        if template_type(template) == "Unknown":
            # templateresolution.ResolveTemplate (v4.1.4's context.go:252), before validateTemplate
            raise Invalid(f"template '{as_str(template.get('name'))}' type is unknown")
        retry = template.get("retryStrategy")
        if retry is not None:
            policy = as_str(as_map(retry).get("retryPolicy"))
            if fault := policy_error(policy):
                raise Invalid(fault)
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
        """The template's one type, and the pod resources that type may have (one it has: holder()
        refused a template of none, as ResolveTemplate does before validateTemplateType can)."""
        name = as_str(template.get("name"))
        kinds = [kind for key, kind in TEMPLATE_TYPES if template.get(key) is not None]
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
        text = tags.substitute(tags.go_json(go_ordered(template, "template")), values)
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
