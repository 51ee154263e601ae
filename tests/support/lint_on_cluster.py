"""The lint against the real servers of a cluster: each case (tests/support/lint_cases.py) put to the
Argo Server and to the Kubernetes API server (tests/support/lint_judges.py) in a namespace of its own,
with the templates it references made for real while it is judged, and each answer set beside the lint's
(tests/support/lint_agreement.py). What the guard (tests/support/lint_guard.py) withholds, and kinds the
lint does not check, are not sent.

    python -m tests.support.lint_on_cluster     # on an up cluster: the tables, then each case that does not agree
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.cluster import Cluster, from_environment, opened
from tests.support.lint_agreement import Judged, offline_verdict, table
from tests.support.lint_cases import Case, Manifest, all_cases, argo_module, canonical, recorded
from tests.support.lint_guard import withheld
from tests.support.lint_judges import (
    ApiServer,
    ArgoServer,
    Http,
    JudgeError,
    api_fields,
    named_fields,
)
from tests.support.project import free_port, wait_for_port
from workflows.lint.entry_point import check
from workflows.lint.schema import crd_faults
from workflows.lint.validation import KINDS

THREADS = 4
TEST_LABEL = "mnist-argo/lint-agrees"  # on the namespace and the ClusterWorkflowTemplates it makes
SEEN_TIMEOUT = 30  # seconds for the Argo Server's informers to see a template made or deleted


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


def api_server(cluster: Cluster, proxy: bool = False) -> ApiServer:
    """The API server as the kubeconfig's user: straight, with its client certificate or token; or
    through `kubectl proxy` (stopped with the cluster) for a user kubectl authenticates otherwise, such
    as GKE's exec plugin, or when PROXY."""
    config = json.loads(
        cluster.kubectl("config", "view", "--raw", "--minify", "--flatten", "-o", "json").stdout
    )
    user = config["users"][0]["user"]
    if not proxy and (user.get("token") or user.get("client-certificate-data")):
        return ApiServer.from_config(config)
    port = free_port()
    context = ["--context", cluster.context] if cluster.context else []
    cluster.processes.append(
        subprocess.Popen(
            ["kubectl", *context, "proxy", f"--port={port}", "--address=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=cluster.process_env(),
        )
    )
    wait_for_port(port, timeout=60)
    return ApiServer(Http(f"http://127.0.0.1:{port}"))


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


def collect() -> list[Case]:
    """The cases: the project's specs, the lint tests' manifests, Argo's examples."""
    return all_cases(recorded(), argo_module())


def measure(api: ApiServer, argo_url: str, insecure: bool, cases: list[Case]) -> list[Judged]:
    """Every case judged by the two servers."""
    with judges_in_a_namespace(api, argo_url, insecure) as judges:
        return judge_all(cases, judges)


def on_cluster(cluster: Cluster, cases: list[Case]) -> list[Judged]:
    """Every case judged on CLUSTER: its API server, and its Argo Server as its environment gives it."""
    api = api_server(cluster)
    try:
        insecure = cluster.env.get("ARGO_INSECURE_SKIP_VERIFY") == "true"
        return measure(api, cluster.env["ARGO_SERVER"], insecure, cases)
    finally:
        api.close()


def main() -> None:
    with opened(from_environment()) as cluster:
        started = time.monotonic()
        judged = on_cluster(cluster, collect())
    print(table(judged))
    print(f"{time.monotonic() - started:.0f} s")
    for item in judged:
        if item.withheld:
            print(f"{item.case.name}: not sent: {item.withheld}")
        elif item.outcome != "agree":
            print(f"[{item.outcome}] {item.describe()}")


if __name__ == "__main__":
    main()
