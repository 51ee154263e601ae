"""submit.py, its --watch and all, with SHARD's trainer running the shell COMMAND first (a story's fault,
tests/support/faults.py): python -m tests.support.story_submit SHARD COMMAND [submit.py's flags ...]"""

from __future__ import annotations

import sys

from tests.support.faults import with_failing_shard
from workflows import submit


def main(argv: list[str]) -> int:
    shard, command, *flags = argv
    compile_workflow = submit.compile_workflow

    def with_fault(settings: submit.PipelineSettings, name: str | None = None) -> dict:
        return with_failing_shard(compile_workflow(settings, name), shard, command)

    submit.compile_workflow = with_fault
    return submit.main(flags)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
