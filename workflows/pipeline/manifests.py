"""The committed manifests beside workflow.py, the defaults with `--artifacts gs://BUCKET` as `submit.py
--render` prints them; `python -m workflows.pipeline.manifests` (make manifests) writes them again."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from steps.lib.staged_outputs import atomic_path
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template, compile_workflow

HERE = Path(__file__).resolve().parent
STORE = "gs://BUCKET"  # as the docs write it; a cluster's runs take their bucket's name
SETTINGS = PipelineSettings(store=STORE)
WORKFLOW_FILE = HERE / "workflow.yaml"
TEMPLATE_FILE = HERE / "workflow-template.yaml"


def to_yaml(document: dict) -> str:
    """A manifest as submit.py --render prints it: the fields in the order Hera writes them."""
    return yaml.safe_dump(document, sort_keys=False)


def rendered() -> dict[Path, str]:
    """Each committed manifest's path and the text the code renders for it now."""
    return {
        WORKFLOW_FILE: to_yaml(compile_workflow(SETTINGS)),
        TEMPLATE_FILE: to_yaml(compile_template(SETTINGS)),
    }


def main() -> int:
    for path, text in rendered().items():
        with atomic_path(path) as temporary:
            temporary.write_text(text)
        print(f"wrote {path.relative_to(HERE.parents[1])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
