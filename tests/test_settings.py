"""Each setting is declared once (workflows/pipeline/settings.py); the flags, the workflow parameters and the README's
table are made from that declaration."""

from __future__ import annotations

from argparse import ArgumentTypeError
from pathlib import Path

import pytest

from tests.support.project import ROOT, run_submit
from workflows import submit
from workflows.pipeline.settings import (
    DAG_TASKS_MAX,
    MAX_ROUNDS,
    PipelineSettings,
    declared,
    defaults,
    duration,
    flag_of,
    option_name,
)
from workflows.pipeline.workflow import compile_workflow


def settings_table() -> str:
    """The README's settings table: every pipeline setting, then the local runner's own options."""
    rows = ["| flag | env | default | meaning |", "| --- | --- | --- | --- |"]
    start = PipelineSettings()
    for name, spec in declared():
        value = spec.shown_default or f"`{getattr(start, name)}`"
        env = f"`{spec.env}`" if spec.env else ""
        meaning = spec.help.replace("|", r"\|")  # a | inside a cell
        rows.append(f"| `{flag_of(name, spec)}` | {env} | {value} | {meaning} |")
    for flag, (meaning, shown, _) in submit.LOCAL_OPTIONS.items():
        rows.append(f"| `{flag}` | | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def test_the_readme_table_is_the_declared_settings() -> None:
    table = settings_table()
    assert table in (ROOT / "README.md").read_text(), f"the README's table, to paste:\n{table}"


def test_every_setting_is_a_flag_with_its_default() -> None:
    start = PipelineSettings()
    args = submit.make_parser(start).parse_args([])
    for name, _ in declared():
        expected = getattr(start, name)
        if name in ("store", "source") and "://" not in str(expected):
            expected = str(Path(expected).resolve())  # a path is made absolute
        assert getattr(args, name) == expected, name


def test_workflow_parameters_carry_the_declared_meaning_and_choices() -> None:
    parameters = {
        p["name"]: p
        for p in compile_workflow(PipelineSettings())["spec"]["arguments"]["parameters"]
    }
    for name, spec in declared():
        if not spec.parameter:
            assert option_name(name) not in parameters, name
            continue
        parameter = parameters[option_name(name)]
        assert parameter["description"] == spec.help
        pinned = [parameter["value"]] if spec.pinned else []
        assert parameter.get("enum", []) == (list(spec.choices) or pinned)


def test_environment_variables_set_defaults() -> None:
    start = defaults({"WORKER_NUMBER": "5", "EPOCH": "1", "BATCH": "64", "ROUNDS": "3"})
    assert (start.workers, start.epochs, start.batch, start.rounds) == (5, 1, 64, 3)
    args = submit.make_parser(start).parse_args(["--workers", "2"])
    assert (args.workers, args.epochs) == (2, 1), "a flag wins over the environment"


# An Argo expression tag, which Argo's substitution would evaluate (common/util.go SubstituteParams).
EXPRESSION = '/data/{{=sprig.repeat(2000000000, "x")}}/m.npz'


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("WORKER_NUMBER", "three", "three"),
        ("EPOCH", "0", "0"),
        ("MNIST_SOURCE", EXPRESSION, "Argo"),
    ],
)
def test_a_bad_environment_value_is_one_line_and_exit_2(
    variable: str,
    value: str,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    assert submit.main(["--render"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"submit: error: {variable}=") and said in line, line


def test_rounds_beyond_what_one_dag_holds_are_refused_naming_the_limit() -> None:
    """A DAG holds at most 200 tasks (the CRD's MaxItems on DAGTemplate.Tasks): 98 rounds make 200."""
    with pytest.raises(SystemExit) as refused:
        submit.make_parser(PipelineSettings()).parse_args(["--rounds", "99"])
    assert refused.value.code == 2
    with pytest.raises(ValueError, match=r"ROUNDS='100000': at most 98, got 100000: .* 200 tasks"):
        defaults({"ROUNDS": "100000"})
    workflow = compile_workflow(PipelineSettings(rounds=MAX_ROUNDS))
    [dag] = [t["dag"]["tasks"] for t in workflow["spec"]["templates"] if "dag" in t]
    assert len(dag) == DAG_TASKS_MAX == 200


@pytest.mark.parametrize("seconds", ["nan", "inf", "0", "-1"])
def test_a_poll_interval_is_a_finite_number_of_seconds_above_0(
    seconds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        submit.make_parser(PipelineSettings()).parse_args(["--poll-seconds", seconds])
    assert refused.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "argument --poll-seconds: must be a finite number above 0" in line, line


def test_a_retry_backoff_is_seconds_or_hours_minutes_and_seconds() -> None:
    for wait in ("15s", "1m30s", "2h", "30", "0s"):
        assert duration(wait) == wait
    for wait in ("", "s", "1.5m", "-1s", "1s1m", "15 s", "1d", "m5"):
        with pytest.raises(ArgumentTypeError, match="is not a duration"):
            duration(wait)


def test_the_default_store_is_the_projects_wherever_a_run_starts(tmp_path: Path) -> None:
    """Started from another folder, a run wrote a second .runs there, one the page never read."""
    import yaml

    from ui.model_source import default_model_uri

    result = run_submit("--render", env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    workflow = yaml.safe_load(result.stdout)
    parameters = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert parameters["store"] == str(ROOT / ".runs")
    assert default_model_uri({}) == f"{ROOT / '.runs'}/models/mnist/LATEST"
    args = submit.make_parser(PipelineSettings()).parse_args([])
    assert submit.logs_folder(args) == ROOT / ".runs" / "logs"
    args = submit.make_parser(PipelineSettings()).parse_args(["--artifacts", str(tmp_path)])
    assert submit.logs_folder(args) == tmp_path / "logs", "a folder store keeps its runs' logs"


def test_every_settings_default_is_declared_in_the_steps_defaults() -> None:
    """The page tells a card's settings from the defaults by these names (learning-rate → LEARNING_RATE)."""
    from steps.lib import defaults as step_defaults
    from steps.lib.published import default_of

    for name, _ in declared():
        assert default_of(option_name(name)) == getattr(PipelineSettings(), name), name
        assert hasattr(step_defaults, name.upper()), name


TEXT_SETTINGS = [
    name for name, _ in declared() if isinstance(getattr(PipelineSettings(), name), str)
]


@pytest.mark.parametrize("value", [EXPRESSION, "{{workflow.name}}", "a}}b", "{{"])
@pytest.mark.parametrize("name", TEXT_SETTINGS)
def test_no_text_setting_may_hold_an_argo_tag(
    name: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = dict(declared())[name]
    with pytest.raises(SystemExit) as refused:
        submit.make_parser(PipelineSettings()).parse_args([flag_of(name, spec), value])
    assert refused.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert f"argument {flag_of(name, spec)}: " in line and "Argo" in line, line
