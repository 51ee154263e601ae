"""workflows/server/client.py's words for the Argo Server's answers: each refusal one line naming who refused
and what to do. submit.py against the server double covers the rest (tests/test_submit.py)."""

from __future__ import annotations

import pytest
from hera.exceptions import HeraException

from workflows.server import client


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        (
            'workflows.argoproj.io "mnist-x" is forbidden: exceeded quota: mnist, requested: '
            "count/workflows.argoproj.io=1, used: count/workflows.argoproj.io=200",
            "the namespace's quota refused the run",
        ),
        (
            'workflows.argoproj.io "mnist-x" is forbidden: ValidatingAdmissionPolicy '
            "'mnist-workflows' with binding 'mnist-workflows' denied request",
            "the cluster's admission policy refused the Workflow",
        ),
        (
            'workflows.argoproj.io is forbidden: User "x" cannot create',
            "ARGO_TOKEN may not do this",
        ),
    ],
    ids=["quota", "admission-policy", "rbac"],
)
def test_a_forbidden_answer_says_who_refused(detail: str, expected: str) -> None:
    """403 is RBAC's answer, but the quota's and an admission policy's too: the line names which."""
    error = HeraException(f"Server returned status code 403 with message: `{detail}`")
    line = str(client._refusal(client.ArgoServer("https://argo:2746"), error))
    assert line.startswith(expected) or expected in line, line
    assert "\n" not in line
