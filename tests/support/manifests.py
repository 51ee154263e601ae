"""Argo manifests written small, as the lint's tests write them: a manifest from a few lines of YAML, a
WorkflowTemplate, and Workflows whose entrypoint is one template or a DAG beside the `echo` and `whale`
templates."""

from __future__ import annotations

import textwrap
from typing import Any

import yaml


def manifest(spec: str, kind: str = "Workflow", metadata: str = "{generateName: lint-}") -> dict:
    """A manifest of `kind` whose spec is the (dedented) YAML `spec`."""
    head = f"apiVersion: argoproj.io/v1alpha1\nkind: {kind}\nmetadata: {metadata}\nspec:\n"
    return yaml.safe_load(head + textwrap.indent(textwrap.dedent(spec).strip("\n"), "  "))


def template(spec: str, metadata: str = "{name: lib}") -> dict:
    return manifest(spec, kind="WorkflowTemplate", metadata=metadata)


ECHO = "{name: echo, inputs: {parameters: [{name: msg}]}, container: {image: alpine, args: ['{{inputs.parameters.msg}}']}}"
WHALE = "{name: whale, container: {image: alpine}, outputs: {parameters: [{name: out, valueFrom: {path: /tmp/out}}]}}"
LIB = template(f"templates: [{ECHO}]")
BROKEN_LIB = template(
    """
    templates:
    - name: broken
      container: {image: alpine, args: ['{{inputs.parameters.nope}}']}
    """
)


def only(spec: str, **kwargs: Any) -> dict:
    """A Workflow whose entrypoint `main` is the given template body, beside `echo` and `whale`."""
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    return manifest(
        f"entrypoint: main\ntemplates:\n- name: main\n{body}\n- {ECHO}\n- {WHALE}", **kwargs
    )


def dag(tasks: str, extra: str = "") -> dict:
    """A Workflow whose entrypoint is a DAG of the given tasks (templates `echo` and `whale` exist) and
    the given other fields of the DAG."""
    tasks = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    return only(f"dag:\n  tasks:\n{tasks}\n{textwrap.indent(textwrap.dedent(extra), '  ')}")
