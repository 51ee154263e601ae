"""infra/docker/Dockerfile read as its stages: what each image target holds, its own instructions and those
of the stages it is built FROM. Parsed with dockerfile-parse; nothing is built."""

from __future__ import annotations

from pathlib import Path

from dockerfile_parse import DockerfileParser

from tests.support.project import ROOT

DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"


def instructions(dockerfile: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, value) in order, comments left out."""
    structure = DockerfileParser(path=str(dockerfile)).structure
    return [
        (item["instruction"], item["value"])
        for item in structure
        if item["instruction"] != "COMMENT"
    ]


def stages(dockerfile: Path = DOCKERFILE) -> dict[str, list[tuple[str, str]]]:
    """Each named stage's instructions, FROM included."""
    named: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for instruction, value in instructions(dockerfile):
        if instruction == "FROM":
            current = [(instruction, value)]
            named[value.split()[-1]] = current
        else:
            current.append((instruction, value))
    return named


def lineage(name: str, dockerfile: Path = DOCKERFILE) -> list[str]:
    """The stage and those it is built FROM, nearest first (the base image ends the chain)."""
    named, chain = stages(dockerfile), [name]
    while True:
        parent = dict(named[chain[-1]])["FROM"].split()[0]
        if parent not in named:
            return chain
        chain.append(parent)


def effective(name: str, dockerfile: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """A stage's instructions with those of the stages it is built on, in build order."""
    named = stages(dockerfile)
    return [item for stage in reversed(lineage(name, dockerfile)) for item in named[stage]]


def image_user(target: str, dockerfile: Path = DOCKERFILE) -> str | None:
    """The user a target's containers run as: its last USER, its own or inherited; None (root) without one."""
    users = [value for instruction, value in effective(target, dockerfile) if instruction == "USER"]
    return users[-1] if users else None
