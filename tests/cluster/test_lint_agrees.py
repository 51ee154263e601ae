"""The lint (workflows/lint/) against the real Argo Server and Kubernetes API server: every manifest the
lint's tests use, the project's own specs and Argo's examples, each put to the Argo Server's validation
and to the API server's dry-run create (tests/support/lint_on_cluster.py), each answer compared with the
lint's (tests/support/lint_agreement.py). A disagreement must be a named upstream quirk or a case outside
the lint; the numbers are those docs/lint.md gives (Against the real servers). Costly expression tags are
never sent (tests/support/lint_guard.py)."""

from __future__ import annotations

import pytest
import urllib3  # noqa: F401  (its warning is filtered by name)

from tests.support.cluster import Cluster
from tests.support.lint_agreement import OUTSIDE, QUIRKS, Judged, table
from tests.support.lint_cases import Case, CasesUnavailable
from tests.support.lint_on_cluster import collect, on_cluster
from tests.support.project import ROOT

# The Argo Server's certificate is self-signed; ARGO_INSECURE_SKIP_VERIFY accepts it on purpose.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]
# The API server's last cause when a schema error stopped its CEL rules: not a fault of its own.
ONLY_IF_VALID = "<nil>: Invalid value: null: some validation rules were not checked"
COSTLY = (
    "tests/test_lint.py::test_an_expression_tag_in_a_workflow_argument_is_flagged_as_not_checked"
)


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """The cases; without Go or Argo's module (for its examples) this fails in one line."""
    missing = ""
    try:
        return collect()
    except CasesUnavailable as problem:
        missing = str(problem)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="module")
def judged(cluster: Cluster, cases: list[Case]) -> list[Judged]:
    return on_cluster(cluster, cases)


def test_every_disagreement_is_an_upstream_quirk_or_outside_the_lint(judged: list[Judged]) -> None:
    disagreements = [item for item in judged if item.outcome == "disagree"]
    assert not disagreements, "\n".join(item.describe() for item in disagreements)


def test_every_named_quirk_and_case_outside_the_lint_still_disagrees(judged: list[Judged]) -> None:
    outcomes = {item.case.name: item.outcome for item in judged}
    stale = sorted(name for name in {*QUIRKS, *OUTSIDE} if outcomes.get(name) in (None, "agree"))
    assert not stale, f"named as disagreeing, but agree now or are no longer cases: {stale}"


def test_the_lint_names_every_cause_the_api_server_gives(judged: list[Judged]) -> None:
    """Stricter than agreeing on the first fault: each of the API server's causes is one of the lint's
    faults, but for those of a case outside the lint and the name the server generates from a
    generateName (metadata.py cannot know it)."""
    unnamed = {}
    for item in judged:
        if item.api is None or item.api.ok or item.offline_api is None:
            continue
        if item.case.name in OUTSIDE:
            continue
        generated = "generateName" in item.case.document.get("metadata", {})
        missed = [
            cause
            for cause in item.api.messages
            if cause not in item.offline_api.messages
            and not cause.startswith(ONLY_IF_VALID)
            and not (generated and cause.startswith("metadata.name: "))
        ]
        if missed:
            unnamed[item.case.name] = missed
    assert unnamed == {}


def test_the_costly_expression_is_not_sent(judged: list[Judged]) -> None:
    [costly] = [item for item in judged if item.case.name == COSTLY]
    assert costly.outcome == "not sent" and "sprig.repeat" in costly.withheld


def test_docs_give_the_measured_numbers(judged: list[Judged]) -> None:
    """docs/lint.md's table is this run's: the cases are the lint tests', which change with them."""
    measured = table(judged)
    assert measured in (ROOT / "docs" / "lint.md").read_text(), (
        f"docs/lint.md, Against the real servers, should give:\n{measured}"
    )
