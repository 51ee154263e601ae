"""Argo's own DAG validation cases as data: every `validate(ctx, fixture)` of validate_dag_test.go with
the verdict its test requires (require.NoError, require.Error or require.ErrorContains and its text).

python -m tests.reference.argo_dag_cases VALIDATE_DAG_TEST_GO > dag-cases.json

The cases are the `var name = ...` raw-string manifests of that file, in the order its tests validate them;
tests that build a WorkflowTemplate first (createWorkflowTemplate) are left out, as they need more than
validate.go. tests/test_lint.py runs each through the project's lint.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from workflows.lint.schema import TEMPLATE_TYPES

FIXTURE = re.compile(r"^var (\w+) = `(.*?)`$", re.DOTALL | re.MULTILINE)
TEST = re.compile(r"^func (Test\w+)\(t \*testing\.T\) \{\n(.*?)^\}", re.DOTALL | re.MULTILINE)
# validate(ctx, fixture), then the require that judges its err
CHECK = re.compile(
    r"validate\([^,]+, (\w+)\)\s*\n(?:\s*//[^\n]*\n)*"
    r"\s*require\.(NoError|Error|ErrorContains)\(t, err(?:, \"((?:[^\"\\]|\\.)*)\")?\)"
)


def cases(source: str) -> list[dict]:
    """The cases of validate_dag_test.go's text, in the order its tests validate them."""
    fixtures = dict(FIXTURE.findall(source))
    found = []
    for test, body in TEST.findall(source):
        for fixture, verdict, error in CHECK.findall(body):
            manifest = fixtures[fixture]
            document = yaml.safe_load(manifest)
            kinds = {kind for template in document["spec"]["templates"] for kind in template}
            found.append(
                {
                    "test": test,
                    "fixture": fixture,
                    "kind": document["kind"],
                    "template_kinds": sorted(kinds & set(TEMPLATE_TYPES)),
                    "yaml": manifest,
                    "valid": verdict == "NoError",
                    "error": json.loads(f'"{error}"') if error else None,
                }
            )
    return found


def render(source: str) -> str:
    """The cases as the JSON file the tests read."""
    return json.dumps(cases(source), indent=1)  # no newline at the end, as the CI copy has none


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reference.argo_dag_cases", description=__doc__
    )
    parser.add_argument("source", type=Path, help="Argo's workflow/validate/validate_dag_test.go")
    args = parser.parse_args(argv)
    sys.stdout.write(render(args.source.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
