"""A step run by hand (`python -m steps.<name>`) does what it does in the pipeline: each flag a step
shares with a pipeline setting (workflows/pipeline/settings.py) has that setting's default."""

from __future__ import annotations

import argparse
import importlib

import pytest

from workflows.pipeline.settings import PipelineSettings, declared, option_name

STEPS = ("split", "init", "train", "aggregate", "evaluate", "publish")


def step_parser(step: str) -> argparse.ArgumentParser:
    return importlib.import_module(f"steps.{step}").make_parser()


def shared_flags() -> list[tuple[str, str, argparse.Action]]:
    """(step, setting, the step's flag) for every step flag named as a setting is."""
    found = []
    for step in STEPS:
        flags = step_parser(step)._option_string_actions
        for name, _ in declared():
            flag = f"--{option_name(name)}"
            if flag in flags:
                found.append((step, name, flags[flag]))
    return found


def test_the_steps_share_the_settings_they_are_run_with() -> None:
    """The pairing below is by name: it finds the flags the pipeline sets from its settings."""
    pairs = {(step, name) for step, name, _ in shared_flags()}
    assert {
        ("split", "workers"),
        ("split", "source"),
        ("split", "partition"),
        ("init", "seed"),
        ("train", "epochs"),
        ("train", "batch"),
        ("train", "rounds"),
        ("train", "learning_rate"),
        ("train", "final_learning_rate"),
        ("aggregate", "min_workers"),
        ("publish", "store"),
        ("publish", "min_accuracy"),
    } <= pairs


@pytest.mark.parametrize(
    ("step", "name", "flag"), shared_flags(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_flag_a_step_shares_with_a_setting_has_its_default(
    step: str, name: str, flag: argparse.Action
) -> None:
    expected = getattr(PipelineSettings(), name)
    assert not flag.required, (
        f"{step} --{option_name(name)} is required; the pipeline's default is {expected}"
    )
    assert flag.default == expected, (step, name)
    if flag.type is not None:  # the text the pipeline passes reads back as the same value
        assert flag.type(str(expected)) == expected, (step, name)
    assert str(expected) in (flag.help or "") or name == "source", (step, name, flag.help)
