"""A pytest plugin that records every manifest the lint's tests give the lint, so that the same manifests
can be put to the real servers (tests/cluster/test_lint_agrees.py) without a copy of any test's table:

    LINT_RECORD=cases.json python -m pytest -p tests.support.lint_recorder tests/test_lint.py ...

It wraps `workflows.lint.entry_point.check` (the tests' `check`, and the command line's) and
`workflows.lint.schema.crd_faults` when it is loaded, before the test modules import them, and writes at
the end of the session a JSON list of {"test": node id, "document": ..., "library": [...]}: each
manifest and the WorkflowTemplates it was given, as they were at the call.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from workflows.lint import entry_point, schema

RECORD_ENV = "LINT_RECORD"
RECORDS: list[dict[str, Any]] = []
_check = entry_point.check
_crd_faults = schema.crd_faults


def _plain(value: Any) -> Any:
    """A copy of VALUE as JSON holds it (Mappings as dicts, tuples as lists)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return copy.copy(value)


def _record(document: Any, library: list[Any]) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    RECORDS.append(
        {"test": test, "document": _plain(document), "library": [_plain(d) for d in library]}
    )


def recording_check(
    document: Mapping[str, Any], library: Iterable[Mapping[str, Any]] = (), crd: bool = True
) -> entry_point.LintReport:
    given = list(library)
    _record(document, given)
    return _check(document, given, crd)


def recording_crd_faults(document: Mapping[str, Any]) -> list[str]:
    _record(document, [])
    return _crd_faults(document)


entry_point.check = recording_check
schema.crd_faults = recording_crd_faults


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(RECORD_ENV)
    if target:
        Path(target).write_text(json.dumps(RECORDS))
