"""Argo's published schemas (tests/reference: argo-workflow-schema, argo-server-openapi): a strict
validator of Workflows (unknown fields refused, as the Argo Server does) and the server's OpenAPI."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import jsonschema

from tests.reference import required

WORKFLOW_SCHEMA = "argo-workflow-schema"  # names in tests/reference/files.toml
SERVER_OPENAPI = "argo-server-openapi"
V1 = "io.argoproj.workflow.v1alpha1"


def _close_objects(node: Any) -> None:
    """Set additionalProperties: false on every object schema that lists properties and says nothing."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)


@cache
def _definitions(name: str) -> dict[str, Any]:
    definitions = copy.deepcopy(json.loads(required(name).read_text())["definitions"])
    _close_objects(definitions)
    return definitions


@cache
def openapi() -> dict[str, Any]:
    """The Argo Server's Swagger document, as published."""
    return json.loads(required(SERVER_OPENAPI).read_text())


def workflow_validator(kind: str) -> jsonschema.protocols.Validator:
    """Validates a Workflow or WorkflowTemplate against workflow-schema.json (draft 2020-12)."""
    schema = {"definitions": _definitions(WORKFLOW_SCHEMA), "$ref": f"#/definitions/{V1}.{kind}"}
    return jsonschema.Draft202012Validator(schema)


def first_error(validator: jsonschema.protocols.Validator, document: Any) -> str | None:
    """The most relevant validation error as one line, or None when the document conforms."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(top)"
    return f"{where}: {error.message}"
