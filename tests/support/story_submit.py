"""workflows/submit.py with a story's fault in the workflow it compiles, so that the real submit.py, its
--watch and all, meets the story's failure on a real cluster:

    python -m tests.support.story_submit SHARD COMMAND [submit.py's flags ...]

SHARD's trainer runs the shell COMMAND first (tests/support/faults.py, with_failing_shard); everything
else is submit.py's own.
"""

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
