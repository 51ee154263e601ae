"""Faults a test puts into a compiled workflow, the same for the local runner and a cluster."""

from __future__ import annotations

import copy


def with_failing_shard(workflow: dict, shard: str, how: str, python: str = "python") -> dict:
    """The workflow with its train template's command wrapped so that one shard's trainer runs `how`
    (a shell command) first; `python`: the interpreter that then runs the step (the image's, or this
    machine's for the local runner's processes). `{{retries}}` in `how` is the try's number (0 first)."""
    altered = copy.deepcopy(workflow)
    train = next(t for t in altered["spec"]["templates"] if t["name"] == "train")
    container = train["container"]
    script = f'if [ "$0" = "{shard}" ]; then {how}; fi; exec "{python}" -m steps.train "$@"'
    container["args"] = ["{{inputs.parameters.shard}}", *container["args"]]
    container["command"] = ["sh", "-c", script]
    return altered
