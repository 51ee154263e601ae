"""How the lint's verdicts and the real servers' compare (tests/cluster/test_lint_agrees.py): two
comparisons a case, one a judge, and the disagreements named as upstream quirks or as outside the lint.

- The Argo Server against `check(document, library, crd=False)` (validate.go's rules): for a Workflow,
  what its create's validation answers (the lint checks as create does), and the lint endpoint must
  answer the same but where it lets the workflow's arguments wait for values (validate.go:205,
  `Opts{Lint: true}` at server/workflow/workflow_server.go:716); for a template, its lint endpoint,
  whose validation is its create's (validate.go:205 allows empty values for templates either way).
- The API server's dry-run create against `crd_faults(document)` (the CRD's constraints, the metadata).

They agree when both accept, or both refuse naming the same field: the same message, or the same field
path it starts with (`spec.templates[0].name`, `templates.main.tasks.a`), else the same quoted names; for
the API server, the field of the lint's first fault among the fields of the server's causes. Each
disagreement must be a named upstream quirk (QUIRKS, with the line of Argo v4.1.4 that makes it) or a case
outside what the lint checks (OUTSIDE, with the reason).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.lint_cases import Case
from tests.support.lint_judges import Verdict, api_fields

# validate.go:205: the lint endpoint lets a Workflow's arguments wait for values; create does not.
ARGUMENTS_WAIT = re.compile(
    r"^spec\.arguments\.\S+\.value or spec\.arguments\.\S+\.valueFrom is required$"
)


@dataclass(frozen=True)
class Quirk:
    """A disagreement Argo itself makes: the line of v4.1.4 that decides it, and why."""

    source: str
    why: str


# Case name → the upstream behaviour that makes the real server answer otherwise than the lint.
QUIRKS: dict[str, Quirk] = {
    "tests/test_lint.py::test_rule[validateArgumentsValues:enum-empty]": Quirk(
        "server/apiserver/argoserver.go:437-452, validate.go:1036",
        "the REST gateway hands the request to the gRPC service as protobuf, where an empty list is "
        "no list (generated.proto:1358, `repeated string enum`): `enum: []` reaches validate.go as "
        "no enum, and `param.Enum != nil` never refuses it. `argo lint --offline` reads the file "
        "with encoding/json and refuses it, as the lint does; the API server refuses it too "
        "(Parameter.Enum MinItems=1), so it is never stored either way",
    ),
}
NOT_GIVEN = (
    "the WorkflowTemplate it references was not given to the lint, which says so (not checked); "
    "the Argo Server looks for it on the cluster and finds none"
)
KUBERNETES_TYPE = (
    "a constraint of Kubernetes' own Container type, which the CRD embeds and the lint does not "
    "apply (docs/lint.md); validate.go refuses the same manifest first, in the lint's words"
)
# Case name → why the case lies outside what the lint checks (docs/lint.md, What it does not check).
OUTSIDE: dict[str, str] = {
    "tests/test_lint.py::test_a_workflow_template_not_given_is_reported_as_not_checked": NOT_GIVEN,
    "tests/test_lint.py::test_workflow_template_ref#3": NOT_GIVEN,
    "tests/test_lint.py::test_cli_multi_document_files_and_references_across_files#2": NOT_GIVEN,
    # Container.Name is required
    "tests/test_lint.py::test_rule[validateInitContainers:init-container-name]": KUBERNETES_TYPE,
    # Container.VolumeMounts: a list-map keyed by mountPath
    "tests/test_lint.py::test_rule[validateLeaf (volume mounts):mount-path-twice]": KUBERNETES_TYPE,
}


@dataclass(frozen=True)
class Judged:
    """One case and every answer about it; `withheld` says why it was not sent."""

    case: Case
    withheld: str = ""
    # the Argo Server: create's validation for a Workflow, the lint endpoint for a template
    argo: Verdict | None = None
    lint: Verdict | None = None  # the lint endpoint
    api: Verdict | None = None  # the API server's dry-run create
    offline_argo: Verdict | None = None  # check(crd=False)
    offline_api: Verdict | None = None  # crd_faults
    unchecked: tuple[str, ...] = ()

    @property
    def argo_agreement(self) -> str:
        assert self.argo is not None and self.offline_argo is not None
        return compared(self.offline_argo, self.argo, lambda v: v.fields)

    @property
    def api_agreement(self) -> str:
        assert self.api is not None and self.offline_api is not None
        return compared(self.offline_api, self.api, lambda v: api_fields(v.messages[0]))

    @property
    def lint_differs(self) -> bool:
        """The lint endpoint answers otherwise than create, and not only by letting arguments wait."""
        if self.lint is None or self.argo is None or self.lint.ok == self.argo.ok:
            return False
        return not (self.lint.ok and ARGUMENTS_WAIT.match(self.argo.messages[0]))

    @property
    def agrees(self) -> bool:
        good = ("both accept", "same message", "same field")
        return self.argo_agreement in good and self.api_agreement in good and not self.lint_differs

    @property
    def outcome(self) -> str:
        if self.withheld:
            return "not sent"
        if self.agrees:
            return "agree"
        if self.case.name in QUIRKS:
            return "upstream quirk"
        if self.case.name in OUTSIDE:
            return "outside the lint"
        return "disagree"

    def describe(self) -> str:
        """The case's answers, in a few lines."""

        def said(verdict: Verdict | None) -> str:
            return "-" if verdict is None else ("ok" if verdict.ok else verdict.message[:400])

        lines = [
            f"{self.case.name}:",
            f"  Argo Server: {said(self.argo)} | lint: {said(self.offline_argo)} ({self.argo_agreement})",
            f"  API server:  {said(self.api)} | lint: {said(self.offline_api)} ({self.api_agreement})",
        ]
        if self.lint_differs:
            lines.append(f"  the lint endpoint: {said(self.lint)}")
        if self.unchecked:
            lines.append(f"  not checked: {'; '.join(self.unchecked)}")
        if quirk := QUIRKS.get(self.case.name):
            lines.append(f"  upstream quirk ({quirk.source}): {quirk.why}")
        if reason := OUTSIDE.get(self.case.name):
            lines.append(f"  outside the lint: {reason}")
        return "\n".join(lines)


def compared(offline: Verdict, real: Verdict, fields: Callable[[Verdict], tuple[str, ...]]) -> str:
    """How the lint's verdict and a server's compare: both accept, the same message, the same field,
    or they differ (in verdict, or in the field named)."""
    if offline.ok and real.ok:
        return "both accept"
    if offline.ok != real.ok:
        return "verdicts differ"
    if offline.messages[0] in real.messages:
        return "same message"
    named = fields(offline)
    if named and set(named) <= set(real.fields):
        return "same field"
    return "fields differ"


def offline_verdict(errors: list[str], fields: Callable[[str], tuple[str, ...]]) -> Verdict:
    return Verdict.refused(*errors, fields=fields(errors[0])) if errors else Verdict(True)


# --- the tables ------------------------------------------------------------------------------------

OUTCOMES = ("agree", "upstream quirk", "outside the lint", "disagree")
COMPARISONS = {  # how a judge's verdict and the lint's compare → the column that counts it
    "both accept": "both accept",
    "same message": "both refuse: the same message",
    "same field": "both refuse: the same field",
    "fields differ": "both refuse: other fields",
}


def _markdown(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]


def _alone(judged: Judged, offline: Verdict | None) -> str:
    return (
        "the lint refuses alone"
        if offline is not None and not offline.ok
        else "the server refuses alone"
    )


def table(judged: list[Judged]) -> str:
    """The agreement as two markdown tables: the cases by source and outcome, then each judge's
    verdicts against the lint's."""
    sources: dict[str, Counter[str]] = {}
    for item in judged:
        counts = sources.setdefault(item.case.source, Counter())
        counts["cases"] += 1
        if item.withheld:
            counts["guard" if not item.withheld.startswith("kind ") else "kind"] += 1
        else:
            counts["sent"] += 1
            counts[item.outcome] += 1
    sources["all"] = sum(sources.values(), Counter())
    columns = ["cases", "sent", *OUTCOMES, "not sent: the guard", "not sent: another kind"]
    keys = ["cases", "sent", *OUTCOMES, "guard", "kind"]
    first = _markdown(
        ["cases from", *columns],
        [[source, *(counts[key] for key in keys)] for source, counts in sources.items()],
    )
    sent = [item for item in judged if not item.withheld]
    judges: dict[str, Counter[str]] = {"Argo Server": Counter(), "API server": Counter()}
    for item in sent:
        for name, agreement, offline in (
            ("Argo Server", item.argo_agreement, item.offline_argo),
            ("API server", item.api_agreement, item.offline_api),
        ):
            judges[name][COMPARISONS.get(agreement) or _alone(item, offline)] += 1
    columns = [*COMPARISONS.values(), "the lint refuses alone", "the server refuses alone"]
    second = _markdown(
        ["judge (cases sent)", *columns],
        [
            [f"{name} ({len(sent)})", *(counts[c] for c in columns)]
            for name, counts in judges.items()
        ],
    )
    return "\n".join([*first, "", *second])
