"""The manifests the lint is compared on with the real servers (tests/cluster/test_lint_agrees.py):

- the project's own: the Workflow and the WorkflowTemplate compiled for workers 1..8 and rounds 1..5;
- every manifest the lint's tests give the lint (tests/test_lint.py, tests/test_lint_dag_rules.py, Argo's
  DAG cases among them), recorded while they run (tests/support/lint_recorder.py);
- Argo's examples (`examples/` of the Argo module the local cluster is built from), each Workflow,
  WorkflowTemplate and ClusterWorkflowTemplate, with the examples' templates as its library.

Each case carries the WorkflowTemplates and ClusterWorkflowTemplates it references (transitively) among
those it was given: those must exist on the cluster when the Argo Server judges it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.project import ROOT
from workflows.lint.entry_point import Unreadable, load_documents
from workflows.lint.validation import KINDS

ARGO_MODULE = "github.com/argoproj/argo-workflows/v4"
ARGO_GO_MODULE_DIR = ROOT / "infra" / "local-cluster" / "argo"  # the go.mod that pins it
RECORDER = "tests.support.lint_recorder"
LINT_TESTS = ("tests/test_lint.py", "tests/test_lint_dag_rules.py")
TEMPLATE_KINDS = ("WorkflowTemplate", "ClusterWorkflowTemplate")
Manifest = dict[str, Any]


class CasesUnavailable(RuntimeError):
    """What the cases are made from could not be had; the text is the one line that says why."""


@dataclass(frozen=True)
class Case:
    """One manifest to judge, where it comes from, and the templates it references."""

    name: str  # "project: ...", a test's node id, or "examples/<file>#<document>"
    source: str  # "project", "lint tests" or "Argo's examples"
    document: Manifest
    library: tuple[Manifest, ...] = ()

    @property
    def kind(self) -> str:
        return str(self.document.get("kind"))

    @property
    def key(self) -> str:
        """The same manifest with the same templates is one case, wherever it comes from."""
        return json.dumps([self.document, sorted(map(canonical, self.library))], sort_keys=True)


def canonical(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True)


def template_key(document: Mapping[str, Any]) -> tuple[bool, str]:
    """How a templateRef names a template: (clusterScope, name)."""
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return document.get("kind") == "ClusterWorkflowTemplate", str(name or "")


def references(value: Any) -> Iterator[tuple[bool, str]]:
    """Every (clusterScope, name) a templateRef or workflowTemplateRef in VALUE names."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("templateRef", "workflowTemplateRef") and isinstance(item, Mapping):
                yield item.get("clusterScope") is True, str(item.get("name") or "")
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def referenced(document: Manifest, given: Iterable[Manifest]) -> tuple[Manifest, ...]:
    """The templates among GIVEN that DOCUMENT references, directly or through one another; not the
    document itself (the lint counts it anyway)."""
    library = {
        template_key(template): template
        for template in given
        if template.get("kind") in TEMPLATE_KINDS and template != document
    }
    needed: dict[tuple[bool, str], Manifest] = {}
    pending = list(references(document))
    while pending:
        key = pending.pop()
        if key in library and key not in needed:
            needed[key] = library[key]
            pending.extend(references(library[key]))
    return tuple(needed[key] for key in sorted(needed))


def project_cases() -> list[Case]:
    """The Workflow and the WorkflowTemplate the project compiles (`submit.py --render [--register]`)
    for workers 1..8 and rounds 1..5, as plain JSON."""
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_template, compile_workflow

    cases = []
    for rounds in range(1, 6):
        for workers in range(1, 9):
            settings = PipelineSettings(workers=workers, rounds=rounds)
            for kind, document in (
                ("Workflow", compile_workflow(settings)),
                ("WorkflowTemplate", compile_template(settings)),
            ):
                name = f"project: {kind} workers={workers} rounds={rounds}"
                cases.append(Case(name, "project", json.loads(json.dumps(document))))
    return cases


def recorded(tests: Iterable[str] = LINT_TESTS) -> list[dict[str, Any]]:
    """What the lint's tests give the lint, recorded by running them (tests/support/lint_recorder.py)."""
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "recorded.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                RECORDER,
                *tests,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={
                **{k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
                "LINT_RECORD": str(target),
            },
            timeout=600,
        )
        if done.returncode not in (0, 1) or not target.is_file():  # 1: a test failed, all ran
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:]
            raise CasesUnavailable(f"the lint's tests did not all run: {' '.join(tail)}")
        records: list[dict[str, Any]] = json.loads(target.read_text())
        return records


def recorded_cases(records: Iterable[Mapping[str, Any]]) -> list[Case]:
    """A case per distinct manifest a test gave the lint (with the templates it references); a test's
    second manifest is named `<node id>#2`, and so on."""
    cases, seen = [], set()
    count: dict[str, int] = {}
    for record in records:
        document, test = record["document"], record["test"]
        if not isinstance(document, dict):
            continue
        case = Case(test, "lint tests", document, referenced(document, record["library"]))
        if case.key in seen:
            continue
        seen.add(case.key)
        count[test] = count.get(test, 0) + 1
        name = test if count[test] == 1 else f"{test}#{count[test]}"
        cases.append(Case(name, case.source, case.document, case.library))
    return cases


def argo_module() -> Path:
    """The folder of the Argo module the local cluster is built from, as build.sh finds it."""
    if shutil.which("go") is None:
        raise CasesUnavailable(
            "Argo's examples are read from its Go module, and `go` is not on PATH: install Go "
            "(make cluster-up needs it too)"
        )
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", ARGO_MODULE],
        capture_output=True,
        text=True,
        cwd=ARGO_GO_MODULE_DIR,
        timeout=120,
    )
    folder = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
    if folder is None or not (folder / "examples").is_dir():
        why = done.stderr.strip().splitlines()[-1:] or ["not in the module cache"]
        raise CasesUnavailable(
            f"Argo's module {ARGO_MODULE} is not in Go's module cache ({why[0]}): run "
            "infra/local-cluster/build.sh (make cluster-up does) first"
        )
    return folder


def example_cases(module: Path) -> list[Case]:
    """Each Workflow, WorkflowTemplate and ClusterWorkflowTemplate of Argo's examples, with the
    examples' templates it references, as `argo lint examples/` would resolve them."""
    found: list[tuple[str, Manifest]] = []
    for path in sorted((module / "examples").rglob("*.yaml")):
        try:
            documents = load_documents(path)
        except Unreadable:
            continue  # not a manifest (a Helm template, a fragment): nothing to judge
        relative = path.relative_to(module).as_posix()
        for number, document in enumerate(documents, 1):
            if document.get("kind") in KINDS:
                name = relative if len(documents) == 1 else f"{relative}#{number}"
                found.append((name, dict(document)))
    library = [document for _, document in found if document.get("kind") in TEMPLATE_KINDS]
    return [
        Case(name, "Argo's examples", document, referenced(document, library))
        for name, document in found
    ]


def all_cases(records: Iterable[Mapping[str, Any]], module: Path) -> list[Case]:
    """The project's specs, then the lint tests' manifests, then Argo's examples; a manifest met
    again (with the same templates) is kept once, under its first name."""
    cases, seen = [], set()
    for case in [*project_cases(), *recorded_cases(records), *example_cases(module)]:
        if case.key not in seen:
            seen.add(case.key)
            cases.append(case)
    return cases
