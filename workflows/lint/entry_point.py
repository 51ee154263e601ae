"""The lint's entry point, an offline `argo lint`: Argo v4.1.2's validation rules for Workflows and
WorkflowTemplates, in Python (`check` for code, `main` for the command line).

    python -m workflows.lint FILE...

Reads YAML or JSON manifests (several documents per file are fine) and prints one line per file: `FILE: ok`,
or `FILE: <the fault, worded as Argo words it>`. Exit 0 when every file is valid, 1 when any is invalid,
2 when a file cannot be read or parsed. The rules are those of Argo's `workflow/validate/validate.go` for
`dag` and `container` templates, then the constraints of the full CRD the API server applies
(workflows/lint/schema.py: limits, enums, patterns, required fields); templates of other types, other kinds of manifest and references to
WorkflowTemplates that were not given are reported as not checked. WorkflowTemplates and
ClusterWorkflowTemplates among the files are used to resolve `templateRef`s, as `argo lint --offline` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workflows.lint.schema import crd_faults
from workflows.lint.validation import KINDS, validate_document

TEMPLATE_KINDS = ("WorkflowTemplate", "ClusterWorkflowTemplate")
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_NODES = (
    1_000_000  # values in a file once YAML aliases are expanded: stops "billion laughs" files
)
SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class LintReport:
    """Argo's verdict on one manifest: its fault (empty when valid) and what was not checked."""

    errors: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def line(self) -> str:
        """The report in a few words: the faults, or `ok` with what was not checked."""
        if self.errors:
            return "; ".join(self.errors)
        if self.unchecked:
            return f"ok (not checked: {'; '.join(self.unchecked)})"
        return "ok"


def template_library(documents: Iterable[Any]) -> dict[tuple[bool, str], Mapping[str, Any]]:
    """The WorkflowTemplates and ClusterWorkflowTemplates among `documents`, as templateRefs name them."""
    library = {}
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") in TEMPLATE_KINDS:
            metadata = document.get("metadata")
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            if isinstance(name, str) and name:
                library[(document["kind"] == "ClusterWorkflowTemplate", name)] = document
    return library


def check(
    document: Mapping[str, Any], library: Iterable[Mapping[str, Any]] = (), crd: bool = True
) -> LintReport:
    """Apply Argo's validation to a Workflow, WorkflowTemplate or ClusterWorkflowTemplate.

    `library`: WorkflowTemplates (and ClusterWorkflowTemplates) that `templateRef`s may name; the
    document itself counts when it is one. Checks as the Argo Server does when it creates the object,
    then (`crd`) as the API server does when it stores it.
    """
    kind = document.get("kind")
    if kind not in KINDS:
        return LintReport(unchecked=[f"kind '{kind}' not checked"])
    try:
        errors, unchecked = validate_document(document, template_library([*library, document]))
    except RecursionError:
        errors, unchecked = ["templates nest too deeply to check"], []
    # The Argo Server validates first (validate.go) and refuses at its first fault; only a spec it passes
    # reaches the Kubernetes API server, which applies the CRD.
    if crd and not errors:
        errors = crd_faults(document)
    return LintReport(errors=errors, unchecked=unchecked)


class Unreadable(ValueError):
    """A file that cannot be read or parsed as YAML or JSON manifests."""


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it into JSON: timestamps stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_plain(documents: list[Any]) -> None:
    """Only JSON-like values, and not too many of them once aliases are expanded."""
    pending, seen = list(documents), 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > MAX_NODES:
            raise Unreadable(f"more than {MAX_NODES} values once YAML aliases are expanded")
        if isinstance(value, Mapping):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif not isinstance(value, SCALARS):
            raise Unreadable(f"a {type(value).__name__} value, which JSON cannot hold")


def load_documents(path: Path) -> list[Any]:
    """Every document in a YAML or JSON file (a JSON array counts as a list of documents)."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as problem:
        raise Unreadable(problem.strerror or str(problem)) from None
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    try:
        if text.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
                documents = parsed if isinstance(parsed, list) else [parsed]
            except json.JSONDecodeError:
                documents = list(yaml.load_all(text, Loader=_Loader))
        else:
            documents = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as problem:
        raise Unreadable(f"not valid YAML or JSON: {' '.join(str(problem).split())}") from None
    except RecursionError:
        raise Unreadable("nested too deeply") from None
    documents = [document for document in documents if document is not None]
    _check_plain(documents)
    if not documents:
        raise Unreadable("no manifest in the file")
    for number, document in enumerate(documents, 1):
        if not isinstance(document, Mapping):
            raise Unreadable(f"document {number} is not a manifest (a mapping with a kind)")
    return documents


def _label(document: Mapping[str, Any], number: int) -> str:
    metadata = document.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    name = metadata.get("name") or metadata.get("generateName") or f"#{number}"
    return f"{document.get('kind')}/{name}"


def file_line(
    documents: Sequence[Mapping[str, Any]], library: Iterable[Mapping[str, Any]]
) -> tuple[str, bool]:
    """The verdict on a file's documents, and whether any is invalid."""
    reports = [check(document, library) for document in documents]
    if len(reports) == 1:
        return reports[0].line(), not reports[0].ok
    labels = [_label(document, number) for number, document in enumerate(documents, 1)]
    errors = [
        f"{label}: {error}"
        for label, report in zip(labels, reports, strict=True)
        for error in report.errors
    ]
    if errors:
        return "; ".join(errors), True
    merged = LintReport(
        unchecked=[
            f"{label}: {what}"
            for label, report in zip(labels, reports, strict=True)
            for what in report.unchecked
        ]
    )
    return merged.line(), False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workflows.lint",
        description="Check Argo Workflows manifests against Argo v4.1.2's validation rules, offline.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML or JSON manifests")
    args = parser.parse_args(argv)
    loaded: list[tuple[str, list[Any] | Unreadable]] = []
    for name in args.files:
        try:
            loaded.append((name, load_documents(Path(name))))
        except Unreadable as problem:
            loaded.append((name, problem))
    library = [
        document for _, documents in loaded if isinstance(documents, list) for document in documents
    ]
    status = 0
    for name, documents in loaded:
        if isinstance(documents, Unreadable):
            print(f"{name}: cannot read: {documents}")
            status = 2
            continue
        line, invalid = file_line(documents, library)
        print(f"{name}: {line}")
        if invalid:
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
