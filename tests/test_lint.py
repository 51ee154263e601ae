"""The offline lint (workflows/lint/entry_point.py) against Argo v4.1.2's validation.

Three sources of truth: Argo's own DAG cases (tests/reference: argo-dag-cases, made from
workflow/validate/validate_dag_test.go), one small manifest per rule ported from
workflow/validate/validate.go (each names the Go function it exercises), and every spec the project compiles.
"""

from __future__ import annotations

import copy
import functools
import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reference import required
from tests.support.argo_schema import WORKFLOW_SCHEMA
from tests.support.manifests import BROKEN_LIB, ECHO, LIB, dag, manifest, only, template
from tests.support.project import run_python
from workflows.lint import schema
from workflows.lint.argo_common import tags
from workflows.lint.entry_point import check, main
from workflows.lint.schema import DAG_TASKS_MAX
from workflows.pipeline.settings import MAX_ROUNDS, PipelineSettings, dag_tasks
from workflows.pipeline.workflow import compile_template, compile_workflow

CONTINUE_ON_FAULT = (
    "templates.pipeline cannot use 'continueOn' when using 'depends'. "
    "Instead use 'dep-task.Failed'/'dep-task.Errored'"
)
FIELD_NAME_RULE = (
    "name must consist of alpha-numeric characters or '-', and must start with an alpha-numeric "
    "character (e.g. My-name1-2, 123-NAME)"
)
PARAM_NAME_RULE = (
    "Parameter/Artifact name must consist of alpha-numeric characters, '_' or '-' "
    "e.g. my_param_1, MY-PARAM-1"
)


def whale_then_echo(msg: str, b_fields: str = "") -> dict:
    """A DAG where task `a` runs `whale` and task `b` echoes `msg`, with `b_fields` (e.g. `depends: a`)."""
    fields = f"{b_fields}, " if b_fields else ""
    return dag(
        "- {name: a, template: whale}\n"
        f"- {{name: b, template: echo, {fields}arguments: {{parameters: [{{name: msg, value: '{msg}'}}]}}}}"
    )


def make_then_take(b_fields: str) -> dict:
    """A DAG where task `a` runs `make` (output artifact `m`) and task `b` runs `take` (input artifact
    `m`) with `b_fields`."""
    tasks = "- {name: a, template: make}\n- {name: b, template: take, " + b_fields + "}"
    return manifest(
        "entrypoint: main\ntemplates:\n- name: main\n  dag:\n    tasks:\n"
        + textwrap.indent(tasks, "    ")
        + "\n- {name: make, container: {image: a}, outputs: {artifacts: [{name: m, path: /m}]}}"
        + "\n- {name: take, container: {image: a}, inputs: {artifacts: [{name: m, path: /m}]}}"
    )


# (rule: the validate.go function or what it calls, id, manifest, Argo's error: exact, or "~part", or None)
RULES: list[tuple[str, str, dict, str | None]] = [
    # --- Workflow / WorkflowTemplate / ClusterWorkflowTemplate: the document ---
    (
        "Workflow",
        "name-over-63",
        only("container: {image: alpine}", metadata="{name: " + "n" * 64 + "}"),
        'workflow name "' + "n" * 64 + '" must not be more than 63 characters long (currently 64)',
    ),
    (
        "WorkflowTemplate",
        "template-name-over-63",
        template(
            "templates: [{name: a, container: {image: alpine}}]",
            metadata="{name: " + "t" * 64 + "}",
        ),
        'workflow template name "'
        + "t" * 64
        + '" must not be more than 63 characters long (currently 64)',
    ),
    (
        "ClusterWorkflowTemplate",
        "cluster-template-name-over-63",
        manifest(
            "templates: [{name: a, container: {image: alpine}}]",
            kind="ClusterWorkflowTemplate",
            metadata="{name: " + "c" * 64 + "}",
        ),
        'cluster workflow template name "'
        + "c" * 64
        + '" must not be more than 63 characters long (currently 64)',
    ),
    (
        "Workflow",
        "entrypoint-required",
        manifest("templates: [{name: main, container: {image: alpine}}]"),
        "spec.entrypoint is required",
    ),
    (
        "WorkflowTemplate",
        "template-entrypoint-optional",
        template("templates: [{name: a, container: {image: alpine}}]"),
        None,
    ),
    (
        "validateTemplateHolder",
        "entrypoint-undefined",
        manifest("entrypoint: nope\ntemplates: [{name: main, container: {image: alpine}}]"),
        "template name 'nope' undefined",
    ),
    (
        "validateWorkflowFieldNames",
        "template-name-rule",
        manifest("entrypoint: Main_1\ntemplates: [{name: Main_1, container: {image: alpine}}]"),
        f"spec.templates[0].name: 'Main_1' is invalid: {FIELD_NAME_RULE}",
    ),
    (
        "validateWorkflowFieldNames",
        "template-name-unique",
        manifest(
            "entrypoint: main\ntemplates: [{name: main, container: {image: a}}, {name: main, container: {image: b}}]"
        ),
        "spec.templates[1].name 'main' is not unique",
    ),
    (
        "validateWorkflowFieldNames",
        "template-name-required",
        manifest("entrypoint: main\ntemplates: [{container: {image: alpine}}]"),
        "spec.templates[0].name is required",
    ),
    (
        "validateHooks",
        "workflow-hook-needs-expression",
        manifest(
            "entrypoint: main\nhooks: {exit: {template: main}, running: {template: main}}\n"
            "templates: [{name: main, container: {image: alpine}}]"
        ),
        "hooks.running Expression required",
    ),
    (
        "Workflow (podGC)",
        "pod-gc-strategy",
        manifest(
            "entrypoint: main\npodGC: {strategy: OnPodFailure}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        "podGC.strategy unknown strategy 'OnPodFailure'",
    ),
    (
        "Workflow (podGC)",
        "pod-gc-label-selector",
        manifest(
            "entrypoint: main\npodGC: {strategy: OnPodSuccess, labelSelector: {matchExpressions: [{key: a, operator: In}]}}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "podGC.labelSelector invalid: values: Invalid value: null: for 'in', 'notin' operators, "
        "values set can't be empty",
    ),
    (
        "Workflow (podGC)",
        "pod-gc-label-selector-empty-values",
        manifest(
            "entrypoint: main\npodGC: {strategy: OnPodSuccess, labelSelector: {matchExpressions: [{key: a, operator: In, values: []}]}}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "podGC.labelSelector invalid: values: Invalid value: []: for 'in', 'notin' operators, "
        "values set can't be empty",
    ),
    (
        "validatePodResources",
        "spec-pod-resources",
        manifest(
            "entrypoint: main\npodResources: {limits: {nvidia.com/gpu: 1}}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        'spec.podResources: "nvidia.com/gpu" is not a valid pod-level resource, only cpu, memory and hugepages-* are supported',
    ),
    (
        "Workflow (workflow.priority)",
        "priority-unset",
        only("container: {image: alpine, args: ['{{workflow.priority}}']}"),
        "templates.main: failed to resolve {{workflow.priority}}",
    ),
    (
        "Workflow (workflow.priority)",
        "priority-set",
        manifest(
            "entrypoint: main\npriority: 3\ntemplates: [{name: main, container: {image: alpine, args: ['{{workflow.priority}}']}}]"
        ),
        None,
    ),
    (
        "Workflow (workflow.labels)",
        "labels-from-metadata-and-labelsFrom",
        manifest(
            """
            entrypoint: main
            workflowMetadata: {labelsFrom: {team: {expression: workflow.name}}}
            templates:
            - name: main
              container: {image: alpine, args: ['{{workflow.labels.app}} {{workflow.labels.team}} {{workflow.annotations.json}}']}
            """,
            metadata="{generateName: lint-, labels: {app: mnist}}",
        ),
        None,
    ),
    (
        "Workflow (workflow.labels)",
        "label-not-defined",
        only("container: {image: alpine, args: ['{{workflow.labels.owner}}']}"),
        "templates.main: failed to resolve {{workflow.labels.owner}}",
    ),
    (
        "Workflow (onExit)",
        "on-exit-undefined",
        manifest(
            "entrypoint: main\nonExit: cleanup\ntemplates: [{name: main, container: {image: a}}]"
        ),
        "template name 'cleanup' undefined",
    ),
    (
        "Workflow (workflow.failures)",
        "failures-only-in-exit-handler",
        only("container: {image: alpine, args: ['{{workflow.failures}}']}"),
        "templates.main: failed to resolve {{workflow.failures}}",
    ),
    (
        "Workflow (workflow.failures), addOutputsToScope (globalName)",
        "exit-handler-sees-failures-and-global-outputs",
        manifest(
            """
            entrypoint: main
            onExit: report
            templates:
            - name: main
              dag:
                tasks:
                - {name: a, template: produce}
            - name: produce
              container: {image: alpine}
              outputs: {parameters: [{name: acc, globalName: accuracy, valueFrom: {path: /tmp/acc}}]}
            - name: report
              container: {image: alpine, args: ['{{workflow.failures}} {{workflow.outputs.parameters.accuracy}} {{workflow.status}}']}
            """
        ),
        None,
    ),
    # --- workflowTemplateRef ---
    (
        "WorkflowTemplateRefFields",
        "template-ref-with-templates",
        manifest(
            "workflowTemplateRef: {name: lib}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        "Templates is invalid field in spec if workflow referred WorkflowTemplate reference",
    ),
    # --- validateArguments ---
    (
        "validateArgumentsValues",
        "workflow-argument-needs-value",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: rate}]}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.rate.value or spec.arguments.rate.valueFrom is required",
    ),
    (
        "validateArgumentsValues",
        "template-argument-may-wait-for-submit",
        template(
            "entrypoint: main\narguments: {parameters: [{name: rate}]}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        None,
    ),
    (
        "validateArgumentsValues",
        "argument-value-from-path",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: rate, valueFrom: {path: /tmp/rate}}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.rate.valueFrom only allows: default, configMapKeyRef and supplied",
    ),
    (
        "validateArgumentsValues",
        "argument-value-from-default-alone",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: rate, valueFrom: {default: '1'}}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.rate.valueFrom only allows: default, configMapKeyRef and supplied",
    ),
    (
        "validateArgumentsValues",
        "argument-value-from-supplied",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: rate, valueFrom: {supplied: {}}}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        None,
    ),
    (
        "validateArgumentsValues",
        "enum-empty",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: mode, value: iid, enum: []}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.mode.enum should contain at least one value",
    ),
    (
        "validateArgumentsValues",
        "enum-without-the-value",
        manifest(
            "entrypoint: main\narguments: {parameters: [{name: mode, value: iid, enum: [dirichlet]}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.mode.value should be present in spec.arguments.mode.enum list",
    ),
    (
        "validateArgumentsValues",
        "template-enum-without-value",
        template(
            "entrypoint: main\narguments: {parameters: [{name: mode, enum: [iid, dirichlet]}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        None,
    ),
    (
        "validateArgumentsValues",
        "argument-artifact-without-source",
        manifest(
            "entrypoint: main\narguments: {artifacts: [{name: data}]}\ntemplates: [{name: main, container: {image: a}}]"
        ),
        "spec.arguments.data.from, artifact location, or key is required",
    ),
    (
        "validateArgumentsValues (HasLocationOrKey)",
        "argument-artifact-key-only",
        manifest(
            "entrypoint: main\narguments: {artifacts: [{name: data, gcs: {key: runs/x.npz}}]}\n"
            "templates: [{name: main, container: {image: a}}]"
        ),
        None,
    ),
    (
        "validateArgumentsValues",
        "task-artifact-from-and-expression",
        make_then_take(
            "depends: a, arguments: {artifacts: [{name: m, from: '{{tasks.a.outputs.artifacts.m}}', fromExpression: 'true'}]}"
        ),
        "templates.main.tasks.b.arguments.m shouldn't have both `from` and `fromExpression` in Artifact",
    ),
    (
        "validateArgumentsFieldNames",
        "task-argument-name",
        dag("- {name: a, template: echo, arguments: {parameters: [{name: 'm s g', value: x}]}}"),
        f"templates.main.tasks.a.arguments.parameters[0].name: 'm s g' is invalid: {PARAM_NAME_RULE}",
    ),
    # --- validateTemplate ---
    (  # v4.1.4's workflow/templateresolution/context.go:252, before validateTemplateType looks
        "templateresolution.ResolveTemplate (GetType)",
        "no-template-type",
        only("inputs: {}"),
        "template 'main' type is unknown",
    ),
    (
        "templateresolution.ResolveTemplate (GetType)",
        "task-template-without-type",
        manifest(
            "entrypoint: main\ntemplates:\n- {name: main, dag: {tasks: [{name: a, template: empty}]}}\n"
            "- {name: empty, inputs: {}}"
        ),
        "templates.main.tasks.a template 'empty' type is unknown",
    ),
    (
        "validateTemplateType",
        "two-template-types",
        only("container: {image: alpine}\ndag: {tasks: [{name: a, template: whale}]}"),
        "~templates.main multiple template types specified.",
    ),
    (
        "validatePodResources",
        "template-pod-resource-claims",
        only("container: {image: alpine}\npodResources: {claims: [{name: gpu}]}"),
        "templates.main.podResources.claims is not supported for pod-level resources",
    ),
    (
        "validateInitContainers",
        "init-container-name",
        only("container: {image: alpine}\ninitContainers: [{image: busybox}]"),
        "initContainers must all have container name",
    ),
    (
        "validateTemplate (resourceClaims)",
        "dag-resource-claims",
        only("dag: {tasks: [{name: a, template: whale}]}\nresourceClaims: [{name: gpu}]"),
        "templates.main.resourceClaims is not supported for DAG templates, which do not create a pod",
    ),
    (
        "validateTemplate (timeout)",
        "dag-timeout",
        only("dag: {tasks: [{name: a, template: whale}]}\ntimeout: 10m"),
        "DAG template doesn't support timeout field",
    ),
    (
        "validateTemplate (timeout)",
        "timeout-without-unit",
        only("container: {image: alpine}\ntimeout: '600'"),
        "main has invalid duration format in timeout",
    ),
    (
        "validateTemplate (timeout)",
        "timeout-with-unit",
        only("container: {image: alpine}\ntimeout: 10m"),
        None,
    ),
    (
        "validateTemplate (pendingTimeout)",
        "dag-pending-timeout",
        only("dag: {tasks: [{name: a, template: whale}]}\npendingTimeout: 10m"),
        "DAG template doesn't support pendingTimeout field",
    ),
    (
        "validateTemplateHolder (retryStrategy)",
        "retry-policy-entrypoint",
        only("container: {image: alpine}\nretryStrategy: {limit: '2', retryPolicy: OnEviction}"),
        "OnEviction is not a valid RetryPolicy",
    ),
    (
        "validateTemplateHolder (retryStrategy)",
        "retry-policy-task",
        manifest(
            """
            entrypoint: main
            templates:
            - {name: main, dag: {tasks: [{name: a, template: flaky}]}}
            - {name: flaky, retryStrategy: {retryPolicy: Never}, container: {image: alpine}}
            """
        ),
        "templates.main.tasks.a Never is not a valid RetryPolicy",
    ),
    (
        "validateArtifactLocation (archiveLocation)",
        "archive-location-git",
        only("container: {image: alpine}\narchiveLocation: {git: {revision: main}}"),
        "templates.main.archiveLocation.git.repo is required",
    ),
    (
        "metrics.IsValidMetricName",
        "metric-name",
        only(
            "container: {image: a}\nmetrics: {prometheus: [{name: 'run:seconds', help: h, gauge: {value: '1'}}]}"
        ),
        "templates.main metric name 'run:seconds' is invalid. Metric names must contain alphanumeric characters or '_'",
    ),
    (
        "metrics.ValidateMetricLabels",
        "metric-label-key",
        only(
            "container: {image: a}\nmetrics: {prometheus: [{name: runs, help: h, labels: [{key: run-id, value: x}], counter: {value: '1'}}]}"
        ),
        "metric label 'run-id' is invalid: keys may only contain alphanumeric characters or '_'",
    ),
    (
        "validateTemplate (metric help)",
        "metric-help",
        only("container: {image: a}\nmetrics: {prometheus: [{name: runs, counter: {value: '1'}}]}"),
        "templates.main metric 'runs' must contain a help string under 'help: ' field",
    ),
    (
        "metrics.ValidateMetricValues",
        "metric-counter-value",
        only("container: {image: a}\nmetrics: {prometheus: [{name: runs, help: h, counter: {}}]}"),
        "templates.main metric 'runs' error: missing counter.value",
    ),
    (
        "metrics.ValidateMetricValues",
        "metric-realtime-resources-duration",
        only(
            "container: {image: a}\nmetrics: {prometheus: [{name: cpu, help: h, gauge: {realtime: true, value: '{{resourcesDuration.cpu}}'}}]}"
        ),
        "templates.main metric 'cpu' error: 'resourcesDuration.*' metrics cannot be used in real-time",
    ),
    (
        "validateTemplate (metrics), resolveAllVariables",
        "metric-refers-to-own-outputs-and-status",
        only(
            "container: {image: a}\noutputs: {parameters: [{name: acc, valueFrom: {path: /acc}}]}\n"
            "metrics: {prometheus: [{name: acc, help: h, when: '{{status}} == Succeeded', gauge: {value: '{{outputs.parameters.acc}}'}}]}"
        ),
        None,
    ),
    # --- validateInputs ---
    (
        "validateInputs",
        "input-artifact-from",
        only("container: {image: a}\ninputs: {artifacts: [{name: data, path: /d, from: x}]}"),
        "templates.main.inputs.artifacts.data.from not valid in inputs",
    ),
    (
        "validateInputs",
        "dag-input-artifact-path",
        only(
            "dag: {tasks: [{name: a, template: whale}]}\ninputs: {artifacts: [{name: data, path: /d}]}"
        ),
        "templates.main.inputs.artifacts.data.path only valid in container/script templates",
    ),
    (
        "validateInputs (Artifact.CleanPath)",
        "input-artifact-path-traversal",
        only(
            "container: {image: a}\ninputs: {artifacts: [{name: data, path: /work/in/../../etc/passwd, optional: true}]}"
        ),
        "error in templates.main.inputs.artifacts.data: Artifact 'data' attempted to use a path containing '..'. "
        "Directory traversal is not permitted",
    ),
    (
        "validateArtifactLocation (hdfs)",
        "input-artifact-hdfs",
        only(
            "container: {image: a}\ninputs: {artifacts: [{name: data, path: /d, hdfs: {path: /x}}]}"
        ),
        "templates.main.inputs.artifacts.data.hdfs.addresses is required",
    ),
    (
        "validateWorkflowFieldNames (inputs)",
        "input-parameter-unique",
        only(
            "container: {image: a}\ninputs: {parameters: [{name: x, value: '1'}, {name: x, value: '2'}]}"
        ),
        "templates.main.inputs.parameters[1].name 'x' is not unique",
    ),
    # --- common.ProcessArgs: inputs must be supplied ---
    (
        "ProcessArgs",
        "task-omits-parameter",
        dag("- {name: a, template: echo}"),
        "templates.main.tasks.a templates.echo inputs.parameters.msg was not supplied",
    ),
    (
        "ProcessArgs",
        "input-default",
        manifest(
            """
            entrypoint: main
            templates:
            - {name: main, dag: {tasks: [{name: a, template: hello}]}}
            - {name: hello, inputs: {parameters: [{name: msg, default: hi}]}, container: {image: a, args: ['{{inputs.parameters.msg}}']}}
            """
        ),
        None,
    ),
    (
        "ProcessArgs",
        "task-omits-artifact",
        manifest(
            """
            entrypoint: main
            templates:
            - {name: main, dag: {tasks: [{name: a, template: load}]}}
            - {name: load, inputs: {artifacts: [{name: data, path: /d}]}, container: {image: a}}
            """
        ),
        "templates.main.tasks.a templates.load inputs.artifacts.data was not supplied",
    ),
    (
        "ProcessArgs",
        "optional-and-key-only-artifacts",
        manifest(
            """
            entrypoint: main
            templates:
            - {name: main, dag: {tasks: [{name: a, template: load}]}}
            - name: load
              inputs:
                artifacts:
                - {name: maybe, path: /m, optional: true}
                - {name: shard, path: /s, gcs: {key: '{{workflow.name}}/shards/0.npz'}}
              container: {image: a, args: ['{{inputs.artifacts.shard.path}}']}
            """
        ),
        None,
    ),
    (
        "ProcessArgs",
        "entrypoint-input-from-workflow-arguments",
        manifest(f"entrypoint: echo\ntemplates: [{ECHO}]"),
        "templates.echo inputs.parameters.msg was not supplied",
    ),
    (
        "ProcessArgs, SubstituteParams",
        "workflow-argument-substituted-into-deadline",
        manifest(
            """
            entrypoint: main
            arguments: {parameters: [{name: limit, value: soon}]}
            templates:
            - {name: main, inputs: {parameters: [{name: limit}]}, activeDeadlineSeconds: '{{inputs.parameters.limit}}', container: {image: a}}
            """
        ),
        "templates.main.activeDeadlineSeconds must be a positive integer > 0 or an argo variable",
    ),
    # --- validateLeaf (container templates) ---
    (
        "validateLeaf (resolveAllVariables)",
        "unknown-input",
        only("container: {image: alpine, args: ['{{inputs.parameters.nope}}']}"),
        "templates.main: failed to resolve {{inputs.parameters.nope}}",
    ),
    (
        "validateLeaf (resolveAllVariables)",
        "unknown-workflow-parameter",
        only("container: {image: alpine, args: ['{{workflow.parameters.nope}}']}"),
        "templates.main: failed to resolve {{workflow.parameters.nope}}",
    ),
    (
        "resolveAllVariables (WorkflowTemplate)",
        "template-parameters-come-from-the-workflow",
        template(
            "entrypoint: main\ntemplates: [{name: main, container: {image: a, args: ['{{workflow.parameters.nope}}']}}]"
        ),
        None,
    ),
    (
        "validateTemplate (local scope), resolveAllVariables",
        "variables-argo-defines",
        only(
            """
            retryStrategy: {limit: '1'}
            inputs: {artifacts: [{name: d, path: /d, optional: true}]}
            outputs: {parameters: [{name: p, valueFrom: {path: /p}}], artifacts: [{name: o, path: /o}]}
            container:
              image: alpine
              args:
              - '{{pod.name}} {{retries}} {{lastRetry.exitCode}} {{inputs.artifacts.d.path}} {{outputs.parameters.p.path}}'
              - '{{outputs.artifacts.o.path}} {{workflow.name}} {{workflow.uid}} {{workflow.creationTimestamp.Y}}'
              - '{{workflow.duration}} {{node.name}} {{=asInt(1) + 1}} {{user.defined}} {{ workflow.namespace }}'
            """
        ),
        None,
    ),
    (
        "validateLeaf (resolveAllVariables over the template's JSON, in Go's field order)",
        "first-unresolved-in-go-order",
        only(
            "container: {image: a, args: ['{{inputs.parameters.second}}']}\n"
            "metadata: {annotations: {note: '{{inputs.parameters.first}}'}}"
        ),
        "templates.main: failed to resolve {{inputs.parameters.first}}",
    ),
    (
        "template.Validate (fasttemplate)",
        "unclosed-tag",
        dag("- {name: a, template: whale}", extra="target: '{{a'"),
        'templates.main.targets Cannot find end tag="}}" in the template="{{a" starting from "a"',
    ),
    (
        "template.Validate (fasttemplate over the template's JSON)",
        "unclosed-tag-closed-by-json",
        only("container: {image: alpine, args: ['{{inputs.parameters.x']}"),
        # Go's JSON of the template always holds the container's `resources` (a struct, not a pointer)
        'templates.main: failed to resolve {{inputs.parameters.x"],"resources":{}}',
    ),
    (
        "template.Validate (fasttemplate over the template's JSON)",
        "unclosed-tag-in-a-sidecar-closed-by-its-json",
        only(
            "container: {image: a}\nsidecars: [{name: s, image: b, args: ['{{inputs.parameters.x']}]"
        ),
        'templates.main: failed to resolve {{inputs.parameters.x"],"resources":{}}',
    ),
    (
        "validateLeaf (volume mounts)",
        "mount-path-twice",
        only(
            "container: {image: a, volumeMounts: [{name: a, mountPath: /data}, {name: b, mountPath: /data}]}"
        ),
        "templates.main.container.volumeMounts[1].mountPath '/data' already mounted in container.volumeMounts.a",
    ),
    (
        "validateLeaf (volume mounts)",
        "artifact-over-mount",
        only(
            "container: {image: a, volumeMounts: [{name: work, mountPath: /work}]}\n"
            "inputs: {artifacts: [{name: data, path: /work, optional: true}]}"
        ),
        "templates.main.inputs.artifacts[0].path '/work' already mounted in container.volumeMounts.work",
    ),
    (
        "validateLeaf (image)",
        "image-required",
        only("container: {command: [echo]}"),
        "templates.main.container.image may not be empty",
    ),
    (
        "validateLeaf (image)",
        "image-from-template-defaults",
        manifest(
            "entrypoint: main\ntemplateDefaults: {container: {image: alpine}}\ntemplates: [{name: main, container: {command: [echo]}}]"
        ),
        None,
    ),
    (
        "validateLeaf (sidecars)",
        "reserved-sidecar-name",
        only("container: {image: a}\nsidecars: [{name: artifact-plugin-gcs, image: b}]"),
        'templates.main.sidecars: "artifact-plugin-gcs" is a reserved Argo container name',
    ),
    (
        "validateLeaf (intstr.IsValidIntOrArgoVariable)",
        "deadline-not-a-number",
        only("container: {image: a}\nactiveDeadlineSeconds: ten"),
        "templates.main.activeDeadlineSeconds must be a positive integer > 0 or an argo variable",
    ),
    (
        "validateLeaf (intstr.Int)",
        "deadline-negative",
        only("container: {image: a}\nactiveDeadlineSeconds: '-5'"),
        "templates.main.activeDeadlineSeconds must be a positive integer > 0 or an argo variable",
    ),
    (
        "validateLeaf (activeDeadlineSeconds)",
        "deadline-string-and-number",
        manifest(
            """
            entrypoint: main
            templates:
            - {name: main, dag: {tasks: [{name: a, template: s}, {name: b, template: n}]}}
            - {name: s, activeDeadlineSeconds: '600', container: {image: a}}
            - {name: n, activeDeadlineSeconds: 0, container: {image: a}}
            """
        ),
        None,
    ),
    (
        "validateLeaf (parallelism)",
        "container-parallelism",
        only("container: {image: a}\nparallelism: 2"),
        "templates.main.parallelism is only valid for steps and dag templates",
    ),
    # --- validateOutputs, validateOutputParameter ---
    (
        "validateOutputParameter",
        "value-and-value-from",
        only(
            "container: {image: a}\noutputs: {parameters: [{name: n, value: '1', valueFrom: {path: /n}}]}"
        ),
        "templates.main.outputs.parameters.n has both valueFrom and value specified, choose one",
    ),
    (
        "validateOutputParameter",
        "value-from-empty",
        only(
            "container: {image: a}\noutputs: {parameters: [{name: n, valueFrom: {default: '0'}}]}"
        ),
        "valueFrom type unspecified. choose one of: path, jqFilter, jsonPath, parameter, raw, expression",
    ),
    (
        "validateOutputs",
        "container-output-needs-path",
        only(
            "container: {image: a}\noutputs: {parameters: [{name: n, valueFrom: {expression: '1'}}]}"
        ),
        "templates.main.outputs.parameters.n.path must be specified for Container templates",
    ),
    (
        "validateOutputs",
        "dag-output-needs-parameter",
        only(
            "dag: {tasks: [{name: a, template: whale}]}\noutputs: {parameters: [{name: n, valueFrom: {path: /n}}]}"
        ),
        "templates.main.outputs.parameters.n.parameter or expression must be specified for DAG templates",
    ),
    (
        "validateOutputParameter",
        "dag-output-parameter-and-expression",
        only(
            "dag: {tasks: [{name: a, template: whale}]}\n"
            "outputs: {parameters: [{name: n, valueFrom: {parameter: '{{tasks.a.outputs.parameters.out}}', expression: '1'}}]}"
        ),
        "multiple valueFrom types specified. choose one of: path, jqFilter, jsonPath, parameter, raw",
    ),
    (
        "validateOutputs",
        "dag-output-artifact-path",
        only(
            "dag: {tasks: [{name: a, template: whale}]}\noutputs: {artifacts: [{name: m, path: /m}]}"
        ),
        "templates.main.outputs.artifacts.m.path only valid in container/script templates",
    ),
    (
        "validateOutputs (globalName)",
        "global-name-rule",
        only(
            "container: {image: a}\noutputs: {parameters: [{name: n, globalName: 'model uri', valueFrom: {path: /n}}]}"
        ),
        f"templates.main.outputs.parameters.n.globalName: {PARAM_NAME_RULE}",
    ),
    (
        "validateOutputs (resolveAllVariables)",
        "dag-output-unknown-task",
        only(
            "dag: {tasks: [{name: a, template: whale}]}\n"
            "outputs: {parameters: [{name: n, valueFrom: {parameter: '{{tasks.b.outputs.parameters.out}}'}}]}"
        ),
        "templates.main.outputs failed to resolve {{tasks.b.outputs.parameters.out}}",
    ),
    (
        "validateOutputs, addOutputsToScope (aggregate)",
        "dag-output-aggregated",
        only(
            "dag: {tasks: [{name: fan, template: whale, withItems: [1, 2]}]}\n"
            "outputs: {parameters: [{name: all, valueFrom: {parameter: '{{tasks.fan.outputs.parameters}}'}}]}"
        ),
        None,
    ),
    # --- validateDAG ---
    (
        "validateDAG",
        "no-tasks",
        only("dag: {tasks: []}"),
        "templates.main must have at least one task",
    ),
    (
        "validateNonLeaf",
        "dag-deadline",
        only("dag: {tasks: [{name: a, template: whale}]}\nactiveDeadlineSeconds: 60"),
        "templates.main.activeDeadlineSeconds is only valid for leaf templates",
    ),
    (
        "sortDAGTasks",
        "duplicate-task",
        dag("- {name: a, template: whale}\n- {name: a, template: whale}"),
        "templates.main sorting failed: duplicated nodeName a",
    ),
    (
        "sortDAGTasks",
        "unknown-dependency",
        dag("- {name: a, template: whale, dependencies: [ghost]}"),
        "templates.main sorting failed: invalid dependency ghost",
    ),
    (
        "sortDAGTasks (GetTaskDependencies)",
        "unknown-task-in-depends",
        dag(
            "- {name: a, template: whale}\n- {name: b, template: whale, depends: a.Succeeded || ghost.Failed}"
        ),
        "templates.main sorting failed: invalid dependency ghost",
    ),
    (
        "sortDAGTasks",
        "cycle",
        dag(
            "- {name: a, template: whale, depends: c}\n- {name: b, template: whale, depends: a}\n- {name: c, template: whale, depends: b}"
        ),
        "templates.main sorting failed: graph with cycle",
    ),
    (
        "validateWorkflowFieldNames (tasks)",
        "task-name-rule",
        dag("- {name: train_1, template: whale}"),
        f"templates.main.tasks[0].name: 'train_1' is invalid: {FIELD_NAME_RULE}",
    ),
    (
        "validateDAG (digit names)",
        "digit-name-with-depends",
        dag("- {name: a, template: whale}\n- {name: 2b, template: whale, depends: a}"),
        "templates.main.tasks.2b name cannot begin with a digit when using either 'depends' or 'dependencies'",
    ),
    (
        "validateDAG",
        "depends-and-dependencies",
        dag(
            "- {name: a, template: whale}\n- {name: b, template: whale, depends: a}\n- {name: c, template: whale, dependencies: [b]}"
        ),
        "templates.main cannot use both 'depends' and 'dependencies' in the same DAG template",
    ),
    (
        "validateDAG",
        "depends-and-continue-on",
        dag(
            "- {name: a, template: whale, continueOn: {failed: true}}\n- {name: b, template: whale, depends: a.Succeeded || a.Failed}"
        ),
        "templates.main cannot use 'continueOn' when using 'depends'. Instead use 'dep-task.Failed'/'dep-task.Errored'",
    ),
    (
        "validateDAG",
        "dependencies-and-continue-on",
        dag(
            "- {name: a, template: whale, continueOn: {failed: true}}\n- {name: b, template: whale, dependencies: [a]}"
        ),
        None,
    ),
    (
        "common.ValidateTaskResults",
        "unknown-task-result",
        dag("- {name: a, template: whale}\n- {name: b, template: whale, depends: a.Finished}"),
        "templates.main.tasks.b task result 'Finished' for task 'a' is invalid",
    ),
    (
        "validateDAG (DependencyTypeItems)",
        "items-result-without-items",
        dag("- {name: a, template: whale}\n- {name: b, template: whale, depends: a.AnySucceeded}"),
        "templates.main.tasks.a dependency 'a' uses an items-based condition such as .AnySucceeded or .AllFailed "
        "but does not contain any items",
    ),
    (
        "validateDAG (DependencyTypeItems)",
        "items-result-with-sequence",
        dag(
            "- {name: a, template: whale, withSequence: {count: '3'}}\n- {name: b, template: whale, depends: a.AllFailed}"
        ),
        None,
    ),
    (
        "validateDAGTargets",
        "target-undefined",
        dag("- {name: a, template: whale}", extra="target: a z"),
        "templates.main.targets: target 'z' is not defined",
    ),
    (
        "validateDAGTargets, SubstituteParams",
        "target-from-workflow-parameter",
        manifest(
            """
            entrypoint: main
            arguments: {parameters: [{name: last, value: b}]}
            templates:
            - {name: main, dag: {target: '{{workflow.parameters.last}}', tasks: [{name: a, template: w}, {name: b, template: w, depends: a}]}}
            - {name: w, container: {image: a}}
            """
        ),
        None,
    ),
    (
        "validateDAG (ancestry scope)",
        "ancestor-status-and-outputs",
        dag(
            """
            - {name: a, template: whale}
            - {name: b, template: echo, depends: a, arguments: {parameters: [{name: msg, value: '{{tasks.a.status}} {{tasks.a.outputs.result}} {{tasks.a.exitCode}}'}]}}
            - {name: c, template: echo, depends: b, arguments: {parameters: [{name: msg, value: '{{tasks.a.outputs.parameters.out}}'}]}}
            """
        ),
        None,
    ),
    (
        "validateDAG (ancestry scope)",
        "status-of-a-non-ancestor",
        whale_then_echo("{{tasks.a.status}}"),
        "templates.main.tasks.b failed to resolve {{tasks.a.status}}",
    ),
    (
        "validateDAGTaskArgumentDependency",
        "parameter-from-a-non-ancestor",
        whale_then_echo("{{tasks.a.outputs.parameters.out}}"),
        "templates.main.tasks.b missing dependency 'a' for parameter 'msg'",
    ),
    (
        "validateDAGTaskArgumentDependency",
        "artifact-from-a-non-ancestor",
        make_then_take(
            "arguments: {artifacts: [{name: m, from: '{{tasks.a.outputs.artifacts.m}}'}]}"
        ),
        "templates.main.tasks.b missing dependency 'a' for artifact 'm'",
    ),
    (
        "addOutputsToScope (HasOutput)",
        "result-of-a-dag-task",
        manifest(
            """
            entrypoint: main
            templates:
            - name: main
              dag:
                tasks:
                - {name: inner, template: inner}
                - {name: b, template: echo, depends: inner, arguments: {parameters: [{name: msg, value: '{{tasks.inner.outputs.result}}'}]}}
            - {name: inner, dag: {tasks: [{name: x, template: w}]}}
            - {name: w, container: {image: a}}
            """
            + f"- {ECHO}"
        ),
        "templates.main.tasks.b failed to resolve {{tasks.inner.outputs.result}}",
    ),
    (
        "addItemsToScope (withItems maps)",
        "item-keys",
        dag(
            "- {name: a, template: echo, withItems: [{os: debian}, {os: alpine}], arguments: {parameters: [{name: msg, value: '{{item.os}}'}]}}"
        ),
        None,
    ),
    (
        "addItemsToScope (withItems maps)",
        "item-key-not-in-items",
        dag(
            "- {name: a, template: echo, withItems: [{os: debian}], arguments: {parameters: [{name: msg, value: '{{item.arch}}'}]}}"
        ),
        "templates.main.tasks.a failed to resolve {{item.arch}}",
    ),
    (
        "addItemsToScope (withItems lists)",
        "item-index",
        dag(
            "- {name: a, template: echo, withItems: [[x, y]], arguments: {parameters: [{name: msg, value: '{{item.[1]}}'}]}}"
        ),
        None,
    ),
    (
        "addItemsToScope (withParam)",
        "with-param-any-key",
        whale_then_echo("{{item.anything}}", "depends: a, withParam: '{{tasks.a.outputs.result}}'"),
        None,
    ),
    (
        "addItemsToScope",
        "two-loop-kinds",
        dag("- {name: a, template: whale, withItems: [1], withSequence: {count: '2'}}"),
        "templates.main.tasks.a only one of withItems, withParam, withSequence can be specified",
    ),
    (
        "addItemsToScope",
        "sequence-count-and-end",
        dag("- {name: a, template: whale, withSequence: {count: '2', end: '5'}}"),
        "templates.main.tasks.a only one of count or end can be defined in withSequence",
    ),
    (
        "addOutputsToScope (aggregate)",
        "aggregate-of-a-single-task",
        whale_then_echo("{{tasks.a.outputs.parameters}}", "depends: a"),
        "templates.main.tasks.b failed to resolve {{tasks.a.outputs.parameters}}",
    ),
    (
        "validateDAG (inline)",
        "inline-template-inputs",
        dag(
            "- {name: a, arguments: {parameters: [{name: x, value: '1'}]}, "
            "inline: {inputs: {parameters: [{name: x}]}, container: {image: a, args: ['{{inputs.parameters.x}}']}}}"
        ),
        None,
    ),
    (
        "validateTemplateHolder",
        "template-and-template-ref",
        dag("- {name: a, template: whale, templateRef: {name: lib, template: echo}}"),
        "templates.main.tasks.a template name cannot be specified with templateRef",
    ),
    (
        "validateTemplateHolder",
        "template-ref-without-template",
        dag("- {name: a, templateRef: {name: lib}}"),
        "templates.main.tasks.a template name is required",
    ),
    (
        "validateTemplateHolder (GetTemplate)",
        "task-without-template",
        dag("- {name: a}"),
        "templates.main.tasks.a failed to get a template",
    ),
    (
        "validateTemplateHolder",
        "task-template-undefined",
        dag("- {name: a, template: nope}"),
        "templates.main.tasks.a template name 'nope' undefined",
    ),
    (
        "validateDAG (hooks)",
        "hook-sees-its-task-status",
        dag(
            "- {name: a, template: whale, hooks: {exit: {template: echo, arguments: {parameters: [{name: msg, value: '{{tasks.a.status}}'}]}}}}"
        ),
        None,
    ),
]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(document, expected, id=f"{rule}:{name}")
        for rule, name, document, expected in RULES
    ],
)
def test_rule(document: dict, expected: str | None) -> None:
    report = check(document, crd=False)  # validate.go's verdict alone, as Argo's own tests give it
    if expected is None:
        assert report.errors == []
    elif expected.startswith("~"):
        assert len(report.errors) == 1 and expected[1:] in report.errors[0], report.errors
    else:
        assert report.errors == [expected]


# --- Argo's own DAG cases ---


def conformance_cases() -> list[dict]:
    return json.loads(required("argo-dag-cases").read_text())


@pytest.mark.parametrize(
    "case", conformance_cases(), ids=lambda case: f"{case['test']}-{case['fixture']}"
)
def test_agrees_with_argo_on_its_dag_cases(case: dict) -> None:
    """validate_dag_test.go: the same verdict, and the fault Argo's test names where it names one."""
    report = check(yaml.safe_load(case["yaml"]), crd=False)  # validate.go only, as its tests
    assert report.ok == case["valid"], report.errors
    if case["error"]:
        assert any(case["error"] in error for error in report.errors), report.errors


# --- WorkflowTemplates: templateRef and workflowTemplateRef (templateresolution, validateTemplateHolder) ---


def test_template_ref_is_checked_inside_the_given_workflow_template() -> None:
    workflow = dag(
        "- {name: a, templateRef: {name: lib, template: echo}, arguments: {parameters: [{name: msg, value: hi}]}}"
    )
    report = check(workflow, [LIB])
    assert (report.errors, report.unchecked) == ([], [])
    broken = dag("- {name: a, templateRef: {name: lib, template: broken}}")
    assert check(broken, [BROKEN_LIB]).errors == [
        "templates.main.tasks.a templates.broken: failed to resolve {{inputs.parameters.nope}}"
    ]
    missing = dag("- {name: a, templateRef: {name: lib, template: nope}}")
    assert check(missing, [LIB]).errors == [
        "templates.main.tasks.a template reference lib.nope not found"
    ]
    passes_no_msg = dag("- {name: a, templateRef: {name: lib, template: echo}}")
    assert check(passes_no_msg, [LIB]).errors == [
        "templates.main.tasks.a templates.echo inputs.parameters.msg was not supplied"
    ]


def test_a_workflow_template_not_given_is_reported_as_not_checked() -> None:
    workflow = dag(
        """
        - {name: a, templateRef: {name: elsewhere, template: train}}
        - {name: b, template: echo, depends: a, arguments: {parameters: [{name: msg, value: '{{tasks.a.outputs.parameters.anything}}'}]}}
        """
    )
    report = check(workflow)
    assert report.ok
    assert report.unchecked == [
        "templateRef 'elsewhere.train' not checked: WorkflowTemplate 'elsewhere' not given"
    ]
    assert report.line().startswith("ok (not checked: templateRef 'elsewhere.train'")


def test_template_refs_named_at_run_time() -> None:
    """validateTemplateHolder: a reference still holding a tag is skipped, as Argo skips it; a name taken
    from a variable with no value before the run names no WorkflowTemplate Argo can find."""
    looped = dag("- {name: a, templateRef: {name: lib, template: '{{item}}'}, withItems: [echo]}")
    report = check(looped)
    assert report.ok
    assert report.unchecked == [
        'templateRef {"name":"lib","template":"{{item}}"} not checked: it is resolved at run time'
    ]
    named = dag("- {name: a, templateRef: {name: '{{workflow.name}}', template: train}}")
    errors = check(named).errors
    assert len(errors) == 1
    assert errors[0].startswith(
        "templates.main.tasks.a template reference __argo__internal__placeholder-"
    )


def test_workflow_template_ref() -> None:
    """Workflow(): the referenced template's entrypoint, arguments (the workflow's first) and templates."""
    library = template(
        """
        entrypoint: main
        arguments: {parameters: [{name: msg}]}
        templates:
        - {name: main, inputs: {parameters: [{name: msg}]}, container: {image: a, args: ['{{inputs.parameters.msg}}']}}
        """,
        metadata="{name: greet}",
    )
    supplied = manifest(
        "workflowTemplateRef: {name: greet}\narguments: {parameters: [{name: msg, value: hi}]}"
    )
    assert check(supplied, [library]).errors == []
    unsupplied = manifest("workflowTemplateRef: {name: greet}")
    assert check(unsupplied, [library]).errors == [
        "spec.arguments.msg.value or spec.arguments.msg.valueFrom is required"
    ]
    alone = check(supplied)
    assert alone.ok and alone.unchecked == [
        "workflowTemplateRef 'greet' not checked: WorkflowTemplate not given"
    ]


def test_other_template_types_and_kinds_are_not_checked() -> None:
    """The lint covers dag and container templates; the rest is named, not judged."""
    workflow = manifest(
        """
        entrypoint: main
        templates:
        - {name: main, dag: {tasks: [{name: a, template: say}, {name: b, template: wait}]}}
        - {name: say, script: {image: python, source: 'print({{bad.reference}})'}}
        - {name: wait, suspend: {duration: '10'}}
        """
    )
    report = check(workflow)
    assert report.ok
    assert report.unchecked == [
        "template 'say' (script) not checked",
        "template 'wait' (suspend) not checked",
    ]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert check(config_map).unchecked == ["kind 'ConfigMap' not checked"]


# --- Template tags (util/template, as resolveAllVariables and SubstituteParams read them) ---


def test_tags_are_found_as_fasttemplate_finds_them() -> None:
    assert tags.tags("a {{x}} b {{ y.z }} {{=1 + 1}}") == ["x", " y.z ", "=1 + 1"]
    assert tags.tags("{{{a}}}") == ["{a"]  # the first }} closes the tag
    # fasttemplate v1.2.2, template.go:260: the whole text, then what follows the unclosed {{
    unclosed = (
        'Cannot find end tag="}}" in the template="{{a}} {{b\\"c\\n" starting from "b\\"c\\n"'
    )
    with pytest.raises(tags.TagError) as raised:
        tags.tags('{{a}} {{b"c\n')
    assert str(raised.value) == unclosed


def test_substitution_escapes_values_and_leaves_the_rest() -> None:
    text = tags.go_json(
        {"args": ["{{inputs.parameters.q}}", "{{tasks.a.id}}", "{{=inputs.parameters.q}}"]}
    )
    replaced = json.loads(tags.substitute(text, {"inputs.parameters.q": 'say "hi" <b>'}))
    assert replaced == {"args": ['say "hi" <b>', "{{tasks.a.id}}", "{{=inputs.parameters.q}}"]}
    assert tags.go_json("<&>") == '"\\u003c\\u0026\\u003e"'


def test_resolution_prefixes() -> None:
    """resolveAllVariables: only Argo's own prefixes are checked; run-time ones always pass."""
    scope = {"inputs.parameters.a", "item.*"}
    assert (
        tags.unresolved(
            "{{inputs.parameters.a}} {{item.x.y}} {{custom.v}} {{retries}}", scope, {}, False
        )
        is None
    )
    assert (
        tags.unresolved("{{tasks.name}} {{workflow.duration}} {{outputs.result}}", set(), {}, False)
        is None
    )
    assert tags.unresolved("{{steps.s.id}}", set(), {}, False) == "failed to resolve {{steps.s.id}}"


# --- The project's own specs ---


@pytest.mark.parametrize("rounds", [1, 2, 3, 4, 5])
def test_every_spec_the_project_compiles_passes(rounds: int) -> None:
    """Every Workflow (workers 1..8) and the WorkflowTemplate would be accepted by Argo."""
    faults = {}
    for workers in range(1, 9):
        settings = PipelineSettings(workers=workers, rounds=rounds)
        for kind, document in (
            ("Workflow", compile_workflow(settings)),
            ("WorkflowTemplate", compile_template(settings)),
        ):
            report = check(document)
            assert report.unchecked == []
            if report.errors:
                faults[f"{kind} workers={workers}"] = report.errors
    assert faults == {}


def _train_tasks(workflow: dict) -> list[dict]:
    pipeline = next(t for t in workflow["spec"]["templates"] if t["name"] == "pipeline")
    return [task for task in pipeline["dag"]["tasks"] if task["name"].startswith("train-")]


def test_continue_on_with_depends_is_flagged_on_the_compiled_spec() -> None:
    """issue 10, point 1: the train fan-out's continueOn in a DAG that uses depends (validateDAG)."""
    workflow = copy.deepcopy(compile_workflow(PipelineSettings(workers=3, rounds=2)))
    for task in _train_tasks(workflow):
        task.setdefault("continueOn", {"failed": True})
    assert check(workflow).errors == [CONTINUE_ON_FAULT]
    for task in _train_tasks(workflow):
        del task["continueOn"]
    assert check(workflow).errors == []


# --- The command line ---


def write(tmp_path: Path, name: str, content: Any) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else yaml.safe_dump_all(content))
    return path


def run(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, list[str]]:
    status = main([str(file) for file in files])
    return status, capsys.readouterr().out.splitlines()


def test_cli_valid_invalid_and_unreadable_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    valid = write(tmp_path, "valid.yaml", [only("container: {image: alpine}")])
    invalid = write(tmp_path, "invalid.yaml", [dag("- {name: a, template: echo}")])
    as_json = write(tmp_path, "wf.json", json.dumps(only("container: {image: alpine}")))
    assert run(capsys, valid, as_json) == (0, [f"{valid}: ok", f"{as_json}: ok"])
    assert run(capsys, valid, invalid) == (
        1,
        [
            f"{valid}: ok",
            f"{invalid}: templates.main.tasks.a templates.echo inputs.parameters.msg was not supplied",
        ],
    )
    missing, broken = tmp_path / "missing.yaml", write(tmp_path, "broken.yaml", "spec: [unclosed")
    status, lines = run(capsys, invalid, missing, broken)
    assert status == 2
    assert lines[0].startswith(f"{invalid}: templates.main")
    assert lines[1].startswith(f"{missing}: cannot read: ")
    assert lines[2].startswith(f"{broken}: cannot read: not valid YAML or JSON")


def test_cli_multi_document_files_and_references_across_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uses_lib = dag(
        "- {name: a, templateRef: {name: lib, template: echo}, arguments: {parameters: [{name: msg, value: hi}]}}"
    )
    both = write(tmp_path, "both.yaml", [LIB, uses_lib])
    assert run(capsys, both) == (0, [f"{both}: ok"])
    workflow_only = write(tmp_path, "workflow.yaml", [uses_lib])
    library = write(tmp_path, "library.yaml", [LIB])
    assert run(capsys, workflow_only, library) == (0, [f"{workflow_only}: ok", f"{library}: ok"])
    status, lines = run(capsys, workflow_only)
    assert status == 0
    assert lines == [
        f"{workflow_only}: ok (not checked: templateRef 'lib.echo' not checked: WorkflowTemplate 'lib' not given)"
    ]
    broken = write(
        tmp_path,
        "broken-multi.yaml",
        [BROKEN_LIB, dag("- {name: a, templateRef: {name: lib, template: broken}}")],
    )
    status, lines = run(capsys, broken)
    assert status == 1
    fault = "templates.broken: failed to resolve {{inputs.parameters.nope}}"
    assert lines == [
        f"{broken}: WorkflowTemplate/lib: templates.broken {fault}; "
        f"Workflow/lint-: templates.main.tasks.a {fault}"
    ]


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("", "no manifest in the file"),
        ("- just\n- a list\n", "document 1 is not a manifest"),
        ("a: !!binary aGVsbG8=\n", "JSON cannot hold"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
            "once YAML aliases are expanded",
        ),
        (b"\xff\xfe".decode("latin-1"), "not UTF-8"),
    ],
    ids=["empty", "not-a-mapping", "binary", "alias-bomb", "not-utf8"],
)
def test_cli_refuses_what_is_not_a_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, complaint: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content.encode("latin-1"))
    status, lines = run(capsys, path)
    assert status == 2
    assert (
        len(lines) == 1 and lines[0].startswith(f"{path}: cannot read: ") and complaint in lines[0]
    )


def test_cli_runs_as_a_module_without_the_project(tmp_path: Path) -> None:
    """`python -m workflows.lint` works, and loads neither Hera nor TensorFlow."""
    path = write(tmp_path, "wf.yaml", [dag("- {name: a, template: echo}")])
    probe = (
        "import runpy, sys; sys.argv = ['lint', sys.argv[1]]\n"
        "try:\n    runpy.run_module('workflows.lint', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as done:\n"
        "    heavy = sorted({m.split('.')[0] for m in sys.modules} & {'hera', 'tensorflow', 'numpy'})\n"
        "    print('loaded:', heavy); sys.exit(done.code)\n"
    )
    result = run_python(probe, str(path))
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"{path}: templates.main.tasks.a templates.echo inputs.parameters.msg was not supplied",
        "loaded: []",
    ]


# --- the full CRD: what the Kubernetes API server refuses after validate.go passed (lint/schema.py) ---


def pipeline_tasks(document: dict) -> list:
    [dag] = [t for t in document["spec"]["templates"] if "dag" in t]
    return dag["dag"]["tasks"]


def test_the_most_rounds_settings_allow_fill_one_dag_and_one_more_is_refused() -> None:
    """DAGTemplate.Tasks: +kubebuilder:validation:MaxItems=200 (workflow_types.go). validate.go passes
    a DAG of any size; `--rounds 99` made 202 tasks, which the API server refuses."""
    most = PipelineSettings(rounds=MAX_ROUNDS)
    document = compile_workflow(most)  # the WorkflowTemplate has the same spec (test_argo_spec.py)
    assert len(pipeline_tasks(document)) == dag_tasks(MAX_ROUNDS) == DAG_TASKS_MAX
    assert check(document).ok, check(document).errors
    beyond = compile_workflow(replace(most, rounds=MAX_ROUNDS + 1))  # past the settings' own check
    assert check(beyond, crd=False).ok
    [fault] = check(beyond).errors
    assert fault.endswith(".dag.tasks: Too many: 202: must have at most 200 items")


def crd_case(change: Any) -> dict:
    """The compiled workflow with one change the CRD forbids."""
    document = compile_workflow(PipelineSettings(rounds=1))
    change(document["spec"], {t["name"]: t for t in document["spec"]["templates"]})
    return document


def relocated(artifact: dict, **location: Any) -> None:
    """ARTIFACT kept at LOCATION instead of its GCS key."""
    del artifact["gcs"]
    artifact.update(location)


CRD_CASES = [
    (  # WorkflowSpec.Templates MaxItems=200
        lambda spec, _: spec["templates"].extend(
            {"name": f"t{i}", "container": {"image": "a"}} for i in range(200)
        ),
        "spec.templates: Too many: 207: must have at most 200 items",
    ),
    (  # MetricLabel.Key Pattern
        lambda spec, _: spec["metrics"]["prometheus"][0]["labels"][0].update(key="run-status"),
        'spec.metrics.prometheus[0].labels[0].key: Invalid value: "run-status": '
        "spec.metrics.prometheus[0].labels[0].key in body should match '^[a-zA-Z_][a-zA-Z0-9_]*$'",
    ),
    (  # Gauge.Operation Enum
        lambda _, t: t["evaluate"]["metrics"]["prometheus"][0]["gauge"].update(operation="Mul"),
        'gauge.operation: Unsupported value: "Mul": supported values: "Set", "Add", "Sub"',
    ),
    (  # Artifact.Mode Maximum=511
        lambda _, t: t["aggregate"]["inputs"]["artifacts"][0].update(mode=0o1777),
        "inputs.artifacts[0].mode: Invalid value: 1023: ",
    ),
    (  # Gauge: Realtime required (no omitempty)
        lambda _, t: t["evaluate"]["metrics"]["prometheus"][0]["gauge"].pop("realtime"),
        "metrics.prometheus[0].gauge.realtime: Required value",
    ),
    (  # Gauge.Value MaxLength=256
        lambda _, t: t["evaluate"]["metrics"]["prometheus"][0]["gauge"].update(value="1" * 257),
        "metrics.prometheus[0].gauge.value: Too long: may not be more than 256 bytes",
    ),
    (  # Artifact: at most one location (CEL)
        lambda _, t: t["split"]["outputs"]["artifacts"][0].update(s3={"key": "a"}),
        'outputs.artifacts[0]: Invalid value: "object": at most one artifact location can be specified',
    ),
    (  # WorkflowSpec.Parallelism Minimum=1
        lambda spec, _: spec.update(parallelism=0),
        "spec.parallelism: Invalid value: 0: spec.parallelism in body should be greater than or "
        "equal to 1",
    ),
    (  # labelsFrom values: expression required
        lambda spec, _: spec["workflowMetadata"]["labelsFrom"].update(x={}),
        "spec.workflowMetadata.labelsFrom.x.expression: Required value",
    ),
    (  # HTTPArtifact.URL required (validateArtifactLocation looks at git and hdfs only)
        lambda _, t: relocated(t["split"]["outputs"]["artifacts"][0], http={}),
        "outputs.artifacts[0].http.url: Required value",
    ),
    (  # AzureArtifact: Endpoint, Container and Blob required
        lambda _, t: relocated(t["train"]["inputs"]["artifacts"][0], azure={"blob": "b"}),
        "inputs.artifacts[0].azure.container: Required value",
    ),
    (  # Template.ArchiveLocation: RawArtifact.Data required
        lambda _, t: t["evaluate"].update(archiveLocation={"raw": {}}),
        "archiveLocation.raw.data: Required value",
    ),
    (  # Template.ArchiveLocation: at most one location (CEL)
        lambda _, t: t["evaluate"].update(
            archiveLocation={"s3": {"key": "a"}, "oss": {"key": "b"}}
        ),
        'archiveLocation: Invalid value: "object": at most one artifact location can be specified',
    ),
]


@pytest.mark.parametrize(("change", "fault"), CRD_CASES)
def test_what_the_crd_refuses_is_refused(change: Any, fault: str) -> None:
    document = crd_case(change)
    assert check(document, crd=False).ok, "validate.go passes it: only the CRD refuses it"
    errors = check(document).errors
    assert any(fault in error for error in errors), errors


def test_every_missing_required_field_is_named_as_the_api_server_names_them() -> None:
    """The API server lists each required field that is missing, not only the first (seen on the local
    cluster: an Azure location with a blob alone lacks its container and its endpoint)."""
    document = crd_case(
        lambda _, t: relocated(t["train"]["inputs"]["artifacts"][0], azure={"blob": "b"})
    )
    gauge = crd_case(lambda _, t: t["evaluate"]["metrics"]["prometheus"][0].update(gauge={}))
    assert check(document).errors == [
        "spec.templates[2].inputs.artifacts[0].azure.container: Required value",
        "spec.templates[2].inputs.artifacts[0].azure.endpoint: Required value",
    ]
    gauge_faults = [fault for fault in schema.crd_faults(gauge) if ".gauge." in fault]
    assert gauge_faults == [
        "spec.templates[4].metrics.prometheus[0].gauge.realtime: Required value",
        "spec.templates[4].metrics.prometheus[0].gauge.value: Required value",
    ]


# apimachinery v0.34's pkg/util/validation: the API server's words for names, label keys and values
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
METADATA_CASES = [  # (metadata, the API server's refusals, as a dry-run create of it gave them)
    ({}, ["metadata.name: Required value: name or generateName is required"]),
    ({"generateName": "lint-"}, []),
    ({"name": "Bad_Name"}, [f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}']),
    ({"generateName": "Bad-"}, [f'metadata.generateName: Invalid value: "Bad-": {SUBDOMAIN}']),
    (
        {"name": "a" * 254},
        [f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters'],
    ),
    (
        {"name": "ok", "labels": {"bad key!": "v", "k": "bad value-"}},
        [
            f'metadata.labels: Invalid value: "bad key!": name part {QUALIFIED}',
            f'metadata.labels: Invalid value: "bad value-": {LABEL_VALUE}',
        ],
    ),
    (
        {"name": "ok", "labels": {"a/b/c": "v", "x" * 64: "v", "Ex.com/y": "v"}},
        [
            f'metadata.labels: Invalid value: "a/b/c": a qualified name {QUALIFIED} with an '
            "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            f'metadata.labels: Invalid value: "{"x" * 64}": name part must be no more than 63 '
            "characters",
            f'metadata.labels: Invalid value: "Ex.com/y": prefix part {SUBDOMAIN}',
        ],
    ),
    (
        {"name": "ok", "annotations": {"Bad Key": "v", "Example.com/Upper": "v"}},
        [f'metadata.annotations: Invalid value: "Bad Key": name part {QUALIFIED}'],
    ),
]


@pytest.mark.parametrize(("metadata", "faults"), METADATA_CASES)
def test_what_the_api_server_refuses_in_any_objects_metadata(
    metadata: dict, faults: list[str]
) -> None:
    """apimachinery's ValidateObjectMetaAccessor, which the API server applies to every custom
    resource (apiextensions-apiserver, customresource/validator.go:53) beside the CRD's schema."""
    document = {**only("container: {image: alpine}"), "metadata": metadata}
    assert schema.crd_faults(document) == faults


def test_a_manifest_without_a_spec_is_refused_as_the_api_server_words_it() -> None:
    document = only("container: {image: alpine}")
    del document["spec"]
    assert schema.crd_faults(document) == ["spec: Required value"]


@functools.cache
def published_definitions() -> dict:
    return json.loads(required(WORKFLOW_SCHEMA).read_text())["definitions"]


def schema_at(path: str) -> dict | None:
    """The definition in Argo's published JSON schema (tests/reference: argo-workflow-schema) that a
    schema.py path reaches from a Workflow, or None where the schema does not describe it."""
    definitions = published_definitions()
    node: dict | None = definitions["io.argoproj.workflow.v1alpha1.Workflow"]
    for part in schema._parts(path):
        while node is not None and "$ref" in node:
            node = definitions.get(node["$ref"].split("/")[-1])
        if node is None:
            return None
        key = {"[]": "items", "{}": "additionalProperties"}.get(part)
        node = node.get(key) if key else node.get("properties", {}).get(part)
    while node is not None and "$ref" in node:
        node = definitions.get(node["$ref"].split("/")[-1])
    return node


def test_every_field_the_published_schema_requires_is_required_by_the_lint() -> None:
    """Generated from Argo's schema: wherever a schema.py rule looks, each field the schema lists as
    required is refused when missing (the CRD's `required` comes from the same Go types)."""
    checked = 0
    for path in sorted({rule.path for rule in schema.RULES}):
        definition = schema_at(path)
        for name in (definition or {}).get("required", []):
            if (path, name) == ("", "metadata"):  # the API server asks a name of it (metadata.py)
                assert schema.crd_faults({"spec": {}})[0].startswith("metadata.name: Required")
                continue
            others = dict.fromkeys(set(definition["required"]) - {name}, "x")
            faults = [rule.check("x", others) for rule in schema.RULES if rule.path == path]
            assert f"x.{name}: Required value" in faults, (path, name)
            checked += 1
    assert checked >= 20


# --- Expression tags where the pipeline never puts one ---


def test_an_expression_tag_in_a_workflow_argument_is_flagged_as_not_checked() -> None:
    """Argo evaluates `{{=…}}` in a workflow parameter's value and validation never looks inside it: the
    lint passes it, as Argo does, and says so. The compiled pipeline puts none there (submit.py refuses
    a setting holding one)."""
    workflow = compile_workflow(PipelineSettings())
    assert check(workflow).unchecked == []
    (source,) = [p for p in workflow["spec"]["arguments"]["parameters"] if p["name"] == "source"]
    source["value"] = '/data/{{=sprig.repeat(2000000000, "x")}}/m.npz'
    report = check(workflow)
    assert report.ok
    assert report.unchecked == [
        "spec.arguments.parameters.source holds an expression tag ({{=…}}), which Argo evaluates"
    ]
    assert report.line().startswith("ok (not checked: spec.arguments.parameters.source holds")
