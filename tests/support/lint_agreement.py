"""The lint against the real servers: each case (tests/support/lint_cases.py) put to the Argo Server and
to the Kubernetes API server (tests/support/lint_judges.py), each answer compared with the lint's own.

Two comparisons a case, one a judge:

- the Argo Server against `check(document, library, crd=False)` (validate.go's rules): for a Workflow,
  what its create's validation answers (the lint checks as create does), and the lint endpoint must
  answer the same but where it lets the workflow's arguments wait for values (validate.go:205,
  `Opts{Lint: true}` at server/workflow/workflow_server.go:716); for a template, its lint endpoint,
  whose validation is its create's (validate.go:205 allows empty values for templates either way);
- the API server's dry-run create against `crd_faults(document)` (the CRD's constraints, the metadata).

They agree when both accept, or both refuse naming the same field: the same message, or the same field
path it starts with (`spec.templates[0].name`, `templates.main.tasks.a`), else the same quoted names; for
the API server, the field of the lint's first fault among the fields of the server's causes. Each
disagreement must be a named upstream quirk (QUIRKS, with the line of Argo v4.1.4 that makes it) or a case
outside what the lint checks (OUTSIDE, with the reason). What the guard (tests/support/lint_guard.py)
withholds, and kinds the lint does not check, are not sent.

    python -m tests.support.lint_agreement      # on an up cluster: the table, then each disagreement
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.lint_cases import (
    Case,
    Manifest,
    all_cases,
    argo_module,
    canonical,
    recorded,
)
from tests.support.lint_guard import withheld
from tests.support.lint_judges import (
    ApiServer,
    ArgoServer,
    JudgeError,
    Verdict,
    api_fields,
    named_fields,
)
from workflows.lint.entry_point import check
from workflows.lint.schema import crd_faults
from workflows.lint.validation import KINDS

THREADS = 4
TEST_LABEL = "mnist-argo/lint-agrees"  # on the namespace and the ClusterWorkflowTemplates it makes
SEEN_TIMEOUT = 30  # seconds for the Argo Server's informers to see a template made or deleted
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
    argo: Verdict | None = (
        None  # create's validation for a Workflow, the lint endpoint for a template
    )
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


# --- what is sent ------------------------------------------------------------------------------------


def for_namespace(document: Manifest, namespace: str) -> Manifest:
    """DOCUMENT as sent: a namespaced kind in NAMESPACE (Argo's Workflow lint looks templateRefs up in
    the workflow's own namespace, workflow_server.go:711), a cluster-scoped one in none."""
    sent = copy.deepcopy(document)
    metadata = sent.setdefault("metadata", {})
    if isinstance(metadata, dict):
        if sent.get("kind") in ("Workflow", "WorkflowTemplate"):
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
    return sent


def renamed_cluster_templates(case: Case, suffix: str) -> Case:
    """The case with its ClusterWorkflowTemplates named uniquely (they are cluster-scoped and made for
    real), and its references to them renamed alike."""
    names = {
        str(template["metadata"]["name"])
        for template in case.library
        if template.get("kind") == "ClusterWorkflowTemplate"
    }
    if not names:
        return case

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            renamed = {key: rename(item) for key, item in value.items()}
            for key in ("templateRef", "workflowTemplateRef"):
                ref = renamed.get(key)
                if (
                    isinstance(ref, dict)
                    and ref.get("clusterScope") is True
                    and ref.get("name") in names
                ):
                    renamed[key] = {**ref, "name": f"{ref['name']}-{suffix}"}
            return renamed
        if isinstance(value, list):
            return [rename(item) for item in value]
        return value

    library = []
    for template in map(rename, case.library):
        if template.get("kind") == "ClusterWorkflowTemplate":
            template["metadata"] = {
                **template["metadata"],
                "name": f"{template['metadata']['name']}-{suffix}",
            }
            template["metadata"].setdefault("labels", {})[TEST_LABEL] = "true"
        library.append(template)
    return replace(case, document=rename(case.document), library=tuple(library))


# --- the run ---------------------------------------------------------------------------------------


@dataclass
class Judges:
    """The two servers, the namespace the cases are judged in, and a suffix for cluster-wide names."""

    argo: ArgoServer
    api: ApiServer
    namespace: str
    suffix: str
    made: list[str] = field(default_factory=list)  # API paths of what was made, deleted at the end

    def judge(self, case: Case) -> Judged:
        sent = for_namespace(case.document, self.namespace)
        lint = self.argo.lint(sent, self.namespace)
        argo = self.argo.create_dry_run(sent, self.namespace) if case.kind == "Workflow" else lint
        api = self.api.dry_run(sent, self.namespace)
        report = check(sent, case.library, crd=False)
        return Judged(
            case,
            argo=argo,
            lint=lint,
            api=api,
            offline_argo=offline_verdict(report.errors, named_fields),
            offline_api=offline_verdict(crd_faults(sent), api_fields),
            unchecked=tuple(report.unchecked),
        )

    def template_seen(self, template: Manifest) -> bool:
        """Whether the Argo Server's informer holds TEMPLATE (validate.go finds templates through it,
        server/apiserver/argoserver.go:270-278): a Workflow referring to it is not refused as missing."""
        name = str(template["metadata"]["name"])
        cluster = template.get("kind") == "ClusterWorkflowTemplate"
        probe = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"generateName": "probe-", "namespace": self.namespace},
            "spec": {"workflowTemplateRef": {"name": name, "clusterScope": cluster}},
        }
        verdict = self.argo.lint(probe, self.namespace)
        return not any(f'"{name}" not found' in message for message in verdict.messages)

    def wait_seen(self, templates: Iterable[Manifest], seen: bool) -> None:
        for template in templates:
            deadline = time.monotonic() + SEEN_TIMEOUT
            while self.template_seen(template) != seen:
                if time.monotonic() > deadline:
                    state = "made" if seen else "deleted"
                    raise JudgeError(
                        f"the Argo Server did not see {template['kind']} "
                        f"{template['metadata']['name']} {state} within {SEEN_TIMEOUT} s"
                    )
                time.sleep(0.2)

    @contextmanager
    def library(self, templates: tuple[Manifest, ...]) -> Iterator[None]:
        """The templates made for real while the cases that reference them are judged."""
        paths = []
        try:
            for template in templates:
                kind = str(template["kind"])
                made = for_namespace(template, self.namespace)
                self.api.create(self.api.path(kind, self.namespace), made)
                paths.append(self.api.path(kind, self.namespace, made["metadata"]["name"]))
                self.made.append(paths[-1])
            self.wait_seen(templates, seen=True)
            yield
        finally:
            for path in paths:
                self.api.delete(path)
                self.made.remove(path)
            self.wait_seen(templates, seen=False)


def judge_all(cases: Iterable[Case], judges: Judges) -> list[Judged]:
    """Every case judged, in the order given; those with templates with them made, one set at a time."""
    ordered = list(cases)
    results: dict[int, Judged] = {}
    to_send: list[tuple[int, Case]] = []
    for index, case in enumerate(ordered):
        if case.kind not in KINDS:
            results[index] = Judged(case, withheld=f"kind '{case.kind}' is not one the lint checks")
        elif reason := withheld(case.document):
            results[index] = Judged(case, withheld=reason)
        else:
            to_send.append((index, renamed_cluster_templates(case, judges.suffix)))
    groups: dict[str, list[tuple[int, Case]]] = {}
    for index, case in to_send:
        groups.setdefault(json.dumps(sorted(map(canonical, case.library))), []).append(
            (index, case)
        )
    with ThreadPoolExecutor(THREADS) as pool:
        for members in sorted(groups.values(), key=lambda group: bool(group[0][1].library)):
            with judges.library(members[0][1].library):
                answers = pool.map(judges.judge, [case for _, case in members])
                for (index, _), judged in zip(members, answers, strict=True):
                    results[index] = replace(judged, case=ordered[index])
    return [results[index] for index in range(len(ordered))]


# --- the namespace ---------------------------------------------------------------------------------


def kubeconfig(kubectl: Callable[..., subprocess.CompletedProcess]) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(
        kubectl("config", "view", "--raw", "--minify", "--flatten", "-o", "json").stdout
    )
    return config


@contextmanager
def judges_in_a_namespace(api: ApiServer, argo_url: str, insecure: bool) -> Iterator[Judges]:
    """A namespace of its own (the project's `mnist` refuses most cases by its own policies), with a
    ServiceAccount whose token the Argo Server is called with. The account needs no role: the server
    reviews the token (server/auth/gatekeeper.go:110) and finds templates through its own informers
    (server/apiserver/argoserver.go:270-278), not with the caller's rights."""
    run = uuid.uuid4().hex[:6]
    namespace = f"lint-agrees-{run}"
    labels = {TEST_LABEL: "true"}
    namespace_path = f"/api/v1/namespaces/{namespace}"
    api.create(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": labels},
        },
    )
    judges = None
    try:
        api.create(
            f"{namespace_path}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "lint"}},
        )
        token = api.create(
            f"{namespace_path}/serviceaccounts/lint/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
        judges = Judges(ArgoServer.at(argo_url, token, insecure), api, namespace, run)
        yield judges
    finally:
        for path in judges.made if judges else []:
            api.delete(path)
        api.delete(namespace_path)


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


def collect() -> list[Case]:
    """The cases: the project's specs, the lint tests' manifests, Argo's examples."""
    return all_cases(recorded(), argo_module())


def measure(api: ApiServer, argo_url: str, insecure: bool, cases: list[Case]) -> list[Judged]:
    """Every case judged on the cluster the two servers belong to."""
    with judges_in_a_namespace(api, argo_url, insecure) as judges:
        return judge_all(cases, judges)


def main() -> None:
    from tests.support.cluster import from_environment, opened

    with opened(from_environment()) as cluster:
        api = ApiServer.from_config(kubeconfig(cluster.kubectl))
        try:
            started = time.monotonic()
            judged = measure(
                api,
                cluster.env["ARGO_SERVER"],
                cluster.env.get("ARGO_INSECURE_SKIP_VERIFY") == "true",
                collect(),
            )
        finally:
            api.close()
    print(table(judged))
    print(f"{time.monotonic() - started:.0f} s")
    for item in judged:
        if item.withheld:
            print(f"{item.case.name}: not sent: {item.withheld}")
        elif item.outcome != "agree":
            print(f"[{item.outcome}] {item.describe()}")


if __name__ == "__main__":
    main()
