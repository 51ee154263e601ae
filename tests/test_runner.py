"""The local runner behaves as Argo v4.1.2's controller and executor do, shown on tiny workflows whose steps are
one-line Python programs (no TensorFlow): how failures propagate, Failed vs Error, retries, deadlines, what a
failed try leaves in the store, how artifacts are laid out, and progress."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from steps.lib.storage import open_store
from workflows.errors import UnresolvedReference, WorkflowError
from workflows.local.runner import POD_DEADLINE_MESSAGE, LocalRunner, substitute

RUN = "{{workflow.name}}"


def step(name: str, code: str, **extra: Any) -> dict:
    """A container template running `python -c code` in /work."""
    return {
        "name": name,
        "container": {"image": "steps", "command": ["python", "-c", code], "workingDir": "/work"},
        **extra,
    }


def output(name: str, path: str, key: str) -> dict:
    return {"name": name, "path": f"/work/{path}", "gcs": {"key": key}, "archive": {"none": {}}}


def workflow(tasks: list[dict], templates: list[dict], **spec: Any) -> dict:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "test-"},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "dag": {"tasks": tasks}}, *templates],
            **spec,
        },
    }


def run(tmp_path: Path, manifest: dict, **runner: Any):
    lines: list[str] = []
    store = open_store(tmp_path / "store")
    result = LocalRunner(store, tmp_path / "logs", parallelism=4, echo=lines.append, **runner).run(
        manifest
    )
    return result, "\n".join(lines), store


def node(result, name: str):
    return next(n for n in result.nodes if n.name == name)


SLEEP_THEN_WRITE = "import time, pathlib; time.sleep(1.5); pathlib.Path('/tmp').exists()"


def test_a_failed_task_lets_running_tasks_finish_and_omits_its_dependents(tmp_path: Path) -> None:
    """dag.go: a failed task kills nothing; dependents whose depends is false are Omitted; the run's phase
    comes from the target branch (assessDAGPhase)."""
    manifest = workflow(
        [
            {"name": "fails", "template": "fail"},
            {"name": "slow", "template": "slow"},
            {"name": "after-fail", "template": "ok", "depends": "fails"},
            {"name": "after-slow", "template": "ok", "depends": "slow"},
        ],
        [step("fail", "raise SystemExit(3)"), step("slow", SLEEP_THEN_WRITE), step("ok", "pass")],
    )
    result, _, _ = run(tmp_path, manifest)
    phases = {n.name: n.phase for n in result.nodes}
    assert phases == {
        "fails": "Failed",
        "slow": "Succeeded",
        "after-fail": "Omitted",
        "after-slow": "Succeeded",
    }
    assert result.phase == "Failed"
    assert result.message.startswith("fails failed: exit code 3")


def test_a_handled_failure_does_not_fail_the_run(tmp_path: Path) -> None:
    manifest = workflow(
        [
            {"name": "fails", "template": "fail"},
            {"name": "cleanup", "template": "ok", "depends": "fails.Failed || fails.Succeeded"},
        ],
        [step("fail", "raise SystemExit(1)"), step("ok", "pass")],
    )
    result, _, _ = run(tmp_path, manifest)
    assert result.phase == "Succeeded"
    assert [n.name for n in result.tolerated_failures] == ["fails"]


def fan_out(items: list, train_code: str, fan_in: str) -> dict:
    return workflow(
        [
            {
                "name": "train",
                "template": "train",
                "withItems": items,
                "arguments": {"parameters": [{"name": "shard", "value": "{{item}}"}]},
            },
            {"name": "aggregate", "template": "ok", "depends": fan_in},
        ],
        [
            step(
                "train",
                train_code,
                inputs={"parameters": [{"name": "shard"}]},
                outputs={
                    "artifacts": [
                        output("model", "out/model.txt", f"{RUN}/m/{{{{inputs.parameters.shard}}}}")
                    ]
                },
            ),
            step("ok", "pass"),
        ],
    )


WRITE_MODEL = (
    "import pathlib; pathlib.Path('out').mkdir(); pathlib.Path('out/model.txt').write_text('m')"
)


@pytest.mark.parametrize(
    ("fan_in", "runs"),
    [
        ("train.AnySucceeded || train.AllFailed", False),  # the spec's old fan-in
        ("train.Succeeded || train.Failed || train.Errored", True),  # the spec's fan-in now
    ],
)
def test_a_trainer_ending_in_error_among_failures(tmp_path: Path, fan_in: str, runs: bool) -> None:
    """Trainer 0 fails (exit 1); trainer 1 exits 0 without writing its model, which the wait container
    reports as an Error. AllFailed needs every child exactly Failed (dag.go:evaluateDependsLogic)."""
    code = "import os, sys\nif os.environ['SHARD'] == '0': sys.exit(1)\n"
    manifest = fan_out(["0", "1"], code, fan_in)
    train = manifest["spec"]["templates"][1]
    train["container"]["env"] = [{"name": "SHARD", "value": "{{inputs.parameters.shard}}"}]
    result, _, _ = run(tmp_path, manifest)
    assert node(result, "train(0:0)").phase == "Failed"
    assert node(result, "train(1:1)").phase == "Error"
    assert "output artifact 'model' was not written" in node(result, "train(1:1)").message
    assert node(result, "aggregate").phase == ("Succeeded" if runs else "Omitted")


def test_an_error_trainer_with_others_delivering_lets_the_fan_in_run(tmp_path: Path) -> None:
    code = (
        "import os, pathlib\n"
        "if os.environ['SHARD'] != '1':\n"
        "    pathlib.Path('out').mkdir(); pathlib.Path('out/model.txt').write_text('m')\n"
    )
    manifest = fan_out(["0", "1", "2"], code, "train.Succeeded || train.Failed || train.Errored")
    manifest["spec"]["templates"][1]["container"]["env"] = [
        {"name": "SHARD", "value": "{{inputs.parameters.shard}}"}
    ]
    result, _, store = run(tmp_path, manifest)
    assert result.phase == "Succeeded"
    assert [n.name for n in result.tolerated_failures] == ["train(1:1)"]
    assert sorted(store.list_keys(f"{result.name}/m")) == [
        f"{result.name}/m/0",
        f"{result.name}/m/2",
    ]


def test_outputs_of_a_failed_try_are_saved(tmp_path: Path) -> None:
    """executor.go: the wait container saves output artifacts whatever the main container's exit code."""
    manifest = fan_out(["0"], WRITE_MODEL + "; raise SystemExit(1)", "train")
    result, _, store = run(tmp_path, manifest)
    assert node(result, "train(0:0)").phase == "Failed"
    assert store.read_text(f"{result.name}/m/0") == "m"


def test_a_missing_input_is_an_error_and_retried_on_error(tmp_path: Path) -> None:
    template = step(
        "read",
        "pass",
        inputs={
            "artifacts": [{"name": "data", "path": "/work/in/data", "gcs": {"key": "nothing/here"}}]
        },
        retryStrategy={"limit": "1", "retryPolicy": "OnError"},
    )
    result, _, _ = run(tmp_path, workflow([{"name": "read", "template": "read"}], [template]))
    read = node(result, "read")
    assert read.phase == "Error" and read.attempts == 2
    assert "no results for key: nothing/here" in read.message


def test_input_folders_are_laid_out_as_argoexec_lays_them_out(tmp_path: Path) -> None:
    """gcs.go: a key is a plain prefix (models also matches models-old/...), folders 0700, files 0644;
    executor.go:loadArtifact applies `mode` (recursively with recurseMode)."""
    store = open_store(tmp_path / "store")
    for key in ("run-x/models/0.h5", "run-x/models/sub/1.h5", "run-x/models-old/2.h5"):
        store.write_text(key, "w")
    probe = (
        "import os, json, pathlib\n"
        "modes = {p.as_posix(): oct(p.stat().st_mode & 0o777) for p in sorted(pathlib.Path('in').rglob('*'))}\n"
        "modes['in'] = oct(pathlib.Path('in').stat().st_mode & 0o777)\n"
        "pathlib.Path('out').mkdir(); pathlib.Path('out/modes.json').write_text(json.dumps(modes))\n"
    )

    def probe_template(mode: dict) -> dict:
        artifact = {
            "name": "models",
            "path": "/work/in/models",
            "gcs": {"key": "run-x/models"},
            **mode,
        }
        return step(
            "probe",
            probe,
            inputs={"artifacts": [artifact]},
            outputs={
                "parameters": [{"name": "modes", "valueFrom": {"path": "/work/out/modes.json"}}]
            },
        )

    as_argo, _, _ = run(
        tmp_path, workflow([{"name": "p", "template": "probe"}], [probe_template({})])
    )
    modes = json.loads(as_argo.output("p", "modes"))
    assert modes == {
        "in": "0o755",
        "in/models": "0o700",
        "in/models/0.h5": "0o644",
        "in/models/sub": "0o700",
        "in/models/sub/1.h5": "0o644",
        "in/models/-old": "0o700",  # filepath.Join(path, "-old/2.h5")
        "in/models/-old/2.h5": "0o644",
    }
    opened, _, _ = run(
        tmp_path,
        workflow(
            [{"name": "p", "template": "probe"}],
            [probe_template({"mode": 0o755, "recurseMode": True})],
        ),
    )
    modes = json.loads(opened.output("p", "modes"))
    assert modes["in/models"] == modes["in/models/sub"] == modes["in/models/0.h5"] == "0o755"
    assert modes["in"] == "0o755", "only the artifact's own path and what is under it"


def test_a_template_deadline_ends_a_try_as_failed_and_it_is_retried(tmp_path: Path) -> None:
    template = step(
        "slow",
        "import time; time.sleep(30)",
        activeDeadlineSeconds="1",
        retryStrategy={"limit": "1", "retryPolicy": "OnFailure"},
    )
    result, _, _ = run(tmp_path, workflow([{"name": "slow", "template": "slow"}], [template]))
    slow = node(result, "slow")
    assert slow.phase == "Failed" and slow.attempts == 2
    assert slow.message.startswith(POD_DEADLINE_MESSAGE)
    assert slow.duration < 10


def test_the_workflow_deadline_stops_the_run(tmp_path: Path) -> None:
    manifest = workflow(
        [
            {"name": "slow", "template": "slow"},
            {"name": "later", "template": "ok", "depends": "slow"},
        ],
        [
            step("slow", "import time; time.sleep(30)", retryStrategy={"limit": "3"}),
            step("ok", "pass"),
        ],
        activeDeadlineSeconds=2,
    )
    result, _, _ = run(tmp_path, manifest)
    assert result.phase == "Failed"
    slow = node(result, "slow")
    assert slow.attempts == 1 and "retry exceeded workflow deadline" in slow.message
    assert node(result, "later").phase == "Omitted"


def test_backoff_is_waited_out_before_the_expression_stops_a_retry(tmp_path: Path) -> None:
    template = step(
        "bad",
        "raise SystemExit(2)",
        retryStrategy={
            "limit": "2",
            "retryPolicy": "Always",
            "expression": "asInt(lastRetry.exitCode) != 2",
            "backoff": {"duration": "1s"},
        },
    )
    result, lines, _ = run(tmp_path, workflow([{"name": "bad", "template": "bad"}], [template]))
    bad = node(result, "bad")
    assert bad.attempts == 1 and bad.duration >= 1.0
    assert "retryStrategy.expression evaluated to false" in bad.message
    assert "backoff  bad" in lines


def test_progress_is_read_from_the_file_argo_names(tmp_path: Path) -> None:
    code = (
        "import os, time\n"
        "for done in range(1, 4):\n"
        "    open(os.environ['ARGO_PROGRESS_FILE'], 'w').write(f'{done}/3\\n'); time.sleep(0.6)\n"
    )
    result, lines, _ = run(tmp_path, workflow([{"name": "p", "template": "p"}], [step("p", code)]))
    assert node(result, "p").progress == "3/3"
    assert "progress p: 1/3 (33%)" in lines or "progress p: 2/3 (66%)" in lines
    assert "progress 3/3)" in lines


def test_a_steps_stdout_lines_are_shown_as_they_come_and_its_stderr_is_only_logged(
    tmp_path: Path,
) -> None:
    """What a step prints to stdout is for the person watching (on a cluster: its pod's log)."""
    code = (
        "import sys, time\n"
        "print('round 1: 91.20%', flush=True)\n"
        "print('diagnostics', file=sys.stderr, flush=True)\n"
        "time.sleep(1.5)\n"
        "print('round 2: 95.70%')\n"
    )
    result, lines, _ = run(
        tmp_path, workflow([{"name": "say", "template": "s"}], [step("s", code)])
    )
    said = [line.split("s  ") for line in lines.splitlines() if "say: " in line]
    assert [text for _, text in said] == ["say: round 1: 91.20%", "say: round 2: 95.70%"]
    assert float(said[1][0]) - float(said[0][0]) > 1.0  # the first shown while the step ran
    assert lines.index("say: round 2") < lines.index("done     say")
    assert "diagnostics" not in lines
    log = node(result, "say").log.read_text()
    assert "round 1: 91.20%\n" in log and "diagnostics\n" in log and "round 2: 95.70%\n" in log


def test_the_run_summary_is_written_as_data(tmp_path: Path) -> None:
    manifest = workflow(
        [{"name": "a", "template": "ok"}, {"name": "b", "template": "fail", "depends": "a"}],
        [step("ok", "pass"), step("fail", "raise SystemExit(4)", retryStrategy={"limit": "1"})],
    )
    result, _, _ = run(tmp_path, manifest)
    summary = json.loads(result.summary.read_text())
    assert summary["phase"] == "Failed" and summary["name"] == result.name
    by_name = {n["name"]: n for n in summary["nodes"]}
    assert by_name["a"]["phase"] == "Succeeded" and by_name["a"]["attempts"] == 1
    assert [t["exit_code"] for t in by_name["b"]["tries"]] == [4, 4]
    assert stat.S_ISREG(Path(by_name["b"]["log"]).stat().st_mode)


def most_at_once(result) -> int:
    """The most nodes that ran at the same time."""
    events = sorted(
        [(n.started, 1) for n in result.nodes if n.started is not None]
        + [(n.finished, -1) for n in result.nodes if n.finished is not None]
    )
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def requesting(items: int, memory: str) -> dict:
    """A task of `items` tries at once, each requesting `memory`, as the trainers of one round."""
    trainer = step("train", "import time; time.sleep(0.4)")
    trainer["container"]["resources"] = {"requests": {"memory": memory}}
    return workflow(
        [{"name": "train", "template": "train", "withItems": list(range(items))}], [trainer]
    )


def test_tries_start_only_while_their_memory_requests_fit(tmp_path: Path) -> None:
    """`--workers 64` started 64 trainers at once (about 0.6 GiB each): the runner admits tries as
    Kubernetes places pods, by their memory requests, here against a budget of 3 GiB."""
    lines: list[str] = []
    result = LocalRunner(
        open_store(tmp_path / "store"),
        tmp_path / "logs",
        echo=lines.append,
        cores=64,
        memory=3 * 2**30,
    ).run(requesting(8, "1Gi"))
    assert result.phase == "Succeeded"
    assert most_at_once(result) == 3
    assert "memory 3.0 GiB" in lines[0]


def test_without_parallelism_tries_are_bounded_by_the_cores(tmp_path: Path) -> None:
    runner = LocalRunner(
        open_store(tmp_path / "store"), tmp_path / "logs", echo=print, cores=1, memory=2**40
    )
    result = runner.run(requesting(6, "10Mi"))
    assert result.phase == "Succeeded" and most_at_once(result) == 2


def test_a_try_larger_than_the_whole_budget_still_runs_alone(tmp_path: Path) -> None:
    runner = LocalRunner(
        open_store(tmp_path / "store"), tmp_path / "logs", echo=print, cores=8, memory=2**30
    )
    result = runner.run(requesting(3, "2Gi"))
    assert result.phase == "Succeeded" and most_at_once(result) == 1


def test_a_parameter_given_at_submit_must_be_one_of_its_enum(tmp_path: Path) -> None:
    """validate.go: validateArguments, as Argo refuses a Submit form's value outside the enum (the
    pipeline pins its store so)."""
    manifest = workflow(
        [{"name": "a", "template": "ok"}],
        [step("ok", "pass")],
        arguments={"parameters": [{"name": "store", "value": "gs://a", "enum": ["gs://a"]}]},
    )
    runner = LocalRunner(open_store(tmp_path / "store"), tmp_path / "logs", echo=print)
    with pytest.raises(WorkflowError, match=r"spec.arguments.store.value should be present in"):
        runner.run(manifest, {"store": "gs://a/elsewhere"})
    assert runner.run(manifest, {"store": "gs://a"}).phase == "Succeeded"


def test_a_given_value_is_held_against_its_enum_as_argo_holds_it(tmp_path: Path) -> None:
    """validate.go:validateArguments (workflows/local/spec_rules.py): an enum written as YAML
    booleans or numbers holds the strings Argo makes of them (wfv1.AnyString: "true", "2")."""
    parameters = [
        {"name": "flag", "value": "false", "enum": [True, False]},
        {"name": "count", "value": "1", "enum": [1.0, 2.0]},
    ]
    manifest = workflow(
        [{"name": "a", "template": "ok"}],
        [step("ok", "pass")],
        arguments={"parameters": parameters},
    )
    runner = LocalRunner(open_store(tmp_path / "store"), tmp_path / "logs", echo=print)
    assert runner.run(manifest, {"flag": "true", "count": "2"}).phase == "Succeeded"
    with pytest.raises(WorkflowError, match=r"^spec.arguments.count.value should be present in"):
        runner.run(manifest, {"count": "2.0"})


def test_workflow_parameters_are_the_strings_argo_makes_of_them(tmp_path: Path) -> None:
    """wfv1.AnyString: a YAML boolean is "true", a whole float "2"."""
    check = "import sys; raise SystemExit(0 if sys.argv[1:] == ['true', '2'] else 1)"
    template = step("ok", check)
    template["container"]["args"] = ["{{workflow.parameters.flag}}", "{{workflow.parameters.n}}"]
    parameters = [{"name": "flag", "value": True}, {"name": "n", "value": 2.0}]
    manifest = workflow(
        [{"name": "a", "template": "ok"}], [template], arguments={"parameters": parameters}
    )
    result, lines, _ = run(tmp_path, manifest)
    assert result.phase == "Succeeded", lines


def test_a_run_substitutes_tags_as_the_controller_does() -> None:
    """SubstituteParams at run time (workflows/common/tags.py): values go in as
    written, whitespace inside a tag is ignored, and every tag must resolve: an unknown one, an expression
    (never evaluated here) and an unclosed `{{` (fasttemplate refuses the text) stop the try."""
    values = {"inputs.parameters.q": 'say "hi" {{not.a.tag}} <b>', "workflow.name": "run-1"}
    assert substitute(
        {"args": ["--q={{inputs.parameters.q}}", "{{ workflow.name }}/x"], "n": [1, None]},
        values,
        "here",
    ) == {"args": ['--q=say "hi" {{not.a.tag}} <b>', "run-1/x"], "n": [1, None]}
    for text, fault in [
        ("{{tasks.a.id}}", "failed to resolve {{tasks.a.id}} (here)"),
        ("{{=inputs.parameters.q}}", "failed to resolve {{=inputs.parameters.q}} (here)"),
        ("a {{workflow.name", 'Cannot find end tag="}}"'),
    ]:
        with pytest.raises(UnresolvedReference, match=re.escape(fault)):
            substitute(text, values, "here")


@pytest.mark.parametrize(("limit", "said"), [(None, "(attempt 2)"), ("+2", "(attempt 2 of 3)")])
def test_a_retry_says_how_many_tries_it_may_have(
    tmp_path: Path, limit: str | None, said: str
) -> None:
    """Without a limit Argo retries for ever (processNodeRetries): no "of N" to announce; a limit is read
    as retries.py reads it (strconv.Atoi, so "+2" is 2)."""
    count = tmp_path / "count"
    code = (
        f"import pathlib; p = pathlib.Path({str(count)!r}); n = int(p.read_text() or 0) if p.exists() "
        "else 0; p.write_text(str(n + 1)); raise SystemExit(0 if n else 1)"
    )
    strategy = {"retryPolicy": "Always"} | ({"limit": limit} if limit else {})
    template = step("flaky", code, retryStrategy=strategy)
    result, lines, _ = run(tmp_path, workflow([{"name": "flaky", "template": "flaky"}], [template]))
    assert node(result, "flaky").phase == "Succeeded"
    assert f"retrying flaky {said}: exit code 1" in lines, lines


@pytest.mark.parametrize(
    ("signal_name", "said"),
    [
        ("SIGKILL", "killed (signal 9, e.g. out of memory), exit code 137"),
        ("SIGTERM", "terminated (signal 15, SIGTERM), exit code 143"),
    ],
)
def test_a_try_killed_by_a_signal_says_so(tmp_path: Path, signal_name: str, said: str) -> None:
    """A trainer killed by the kernel's OOM killer was reported as "exit code 137"."""
    code = f"import os, signal; print('started', flush=True); os.kill(os.getpid(), signal.{signal_name})"
    manifest = workflow([{"name": "killed", "template": "die"}], [step("die", code)])
    result, _, _ = run(tmp_path, manifest)
    assert node(result, "killed").tries[0].exit_code == int(said.rsplit(" ", 1)[1])
    assert node(result, "killed").message == f"{said}: started"
    assert result.message.startswith(f"killed failed: {said}")
