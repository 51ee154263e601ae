"""workflows/local/runner.py: a run as Argo v4.1.4's controller and executor make it, on tiny workflows whose
steps are one-line Python programs (no TensorFlow)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from steps.lib.storage import open_store
from workflows.local.engines import exit_description
from workflows.local.runner import POD_DEADLINE_MESSAGE, LocalRunner
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

RUN = "{{workflow.name}}"


def pipeline_rule(retries: int, backoff: str = "0s") -> dict:
    """The retryStrategy the pipeline's templates carry, as compiled."""
    compiled = compile_workflow(PipelineSettings(retries=retries, retry_backoff=backoff))
    return compiled["spec"]["templates"][0]["retryStrategy"]


def step(name: str, code: str, *args: str, **extra: Any) -> dict:
    """A container template running `python -c code args…` in /work."""
    container = {"image": "steps", "command": ["python", "-c", code], "args": list(args)}
    return {"name": name, "container": container | {"workingDir": "/work"}, **extra}


def workflow(tasks: list, templates: list[dict], **spec: Any) -> dict:
    """A Workflow whose dag runs `tasks`: dicts, or `name:template[:depends]`."""
    keys = ("name", "template", "depends")
    made = [
        t if isinstance(t, dict) else dict(zip(keys, t.split(":", 2), strict=False)) for t in tasks
    ]
    main = {"name": "main", "dag": {"tasks": made}}
    spec = {"entrypoint": "main", "templates": [main, *templates], **spec}
    return {"metadata": {"generateName": "test-"}, "spec": spec}


def run(tmp_path: Path, manifest: dict, **runner: Any):
    lines: list[str] = []
    store = open_store(tmp_path / "store")
    runner = {"parallelism": 4, "echo": lines.append} | runner
    return LocalRunner(store, tmp_path / "logs", **runner).run(manifest), "\n".join(lines), store


def node(result, name: str):
    return next(n for n in result.nodes if n.name == name)


LIST_ITEMS = "import json, pathlib, sys; pathlib.Path('ids.json').write_text(json.dumps([int(a) for a in sys.argv[1:]]))"  # as split


def fan_out(items: list[str], train_code: str, fan_in: str, **train: Any) -> dict:
    """`list` writes the items, `train` runs once per item (withParam, as the pipeline's trainers), then
    `aggregate` runs when `fan_in` holds."""
    ids = {"name": "ids", "valueFrom": {"path": "/work/ids.json"}}
    trainer = step("train", train_code, "{{inputs.parameters.shard}}", **train)
    trainer.setdefault("inputs", {"parameters": [{"name": "shard"}]})
    withparam = {"withParam": "{{tasks.list.outputs.parameters.ids}}"}
    withparam["arguments"] = {"parameters": [{"name": "shard", "value": "{{item}}"}]}
    tasks = ["list:list", {"name": "train", "template": "train", "depends": "list", **withparam}]
    listing = step("list", LIST_ITEMS, *items, outputs={"parameters": [ids]})
    return workflow([*tasks, f"aggregate:ok:{fan_in}"], [listing, trainer, step("ok", "pass")])


MODEL = {"name": "model", "path": "/work/out/model.txt", "archive": {"none": {}}}
MODEL_OUTPUT = {"artifacts": [MODEL | {"gcs": {"key": f"{RUN}/m/{{{{inputs.parameters.shard}}}}"}}]}
FAN_IN = "train.Succeeded || train.Failed || train.Errored"  # the pipeline's


def test_a_failed_task_lets_running_tasks_finish_and_omits_its_dependents(tmp_path: Path) -> None:
    """dag.go: a failed task kills nothing, its dependents are Omitted; summary.json says it all as data."""
    tasks = ["fails:fail", "slow:slow", "after-fail:ok:fails", "after-slow:ok:slow"]
    fail = step("fail", "raise SystemExit(3)", retryStrategy=pipeline_rule(1))
    manifest = workflow(
        tasks, [fail, step("slow", "import time; time.sleep(1.5)"), step("ok", "pass")]
    )
    result, _, _ = run(tmp_path, manifest)
    phases = {"fails": "Failed", "slow": "Succeeded", "after-fail": "Omitted"}
    assert {n.name: n.phase for n in result.nodes} == phases | {"after-slow": "Succeeded"}
    assert result.phase == "Failed"
    assert result.message.startswith("fails failed: exit code 3")
    summary = json.loads((tmp_path / "logs" / result.name / "summary.json").read_text())
    assert summary["phase"] == "Failed" and summary["name"] == result.name
    by_name = {n["name"]: n for n in summary["nodes"]}
    assert by_name["slow"]["phase"] == "Succeeded" and by_name["slow"]["attempts"] == 1
    assert [t["exit_code"] for t in by_name["fails"]["tries"]] == [3, 3]
    assert stat.S_ISREG(Path(by_name["fails"]["log"]).stat().st_mode)


def test_the_fan_in_runs_after_a_failed_and_an_error_trainer_when_another_delivered(
    tmp_path: Path,
) -> None:
    """Trainer 0 fails after writing its model, saved all the same (executor.go); trainer 1 writes none: an
    Error; trainer 2 delivers. The fan-in runs, the run succeeds."""
    code = (
        "import pathlib, sys\n"
        "if sys.argv[1] != '1': pathlib.Path('out').mkdir(); pathlib.Path('out/model.txt').write_text('m')\n"
        "if sys.argv[1] == '0': sys.exit(1)\n"
    )
    manifest = fan_out(["0", "1", "2"], code, FAN_IN, outputs=MODEL_OUTPUT)
    result, _, store = run(tmp_path, manifest)
    assert node(result, "train(0:0)").phase == "Failed"
    assert node(result, "train(1:1)").phase == "Error"
    assert "output artifact 'model' was not written" in node(result, "train(1:1)").message
    assert result.phase == "Succeeded"
    assert [n.name for n in result.tolerated_failures] == ["train(0:0)", "train(1:1)"]
    assert store.list_keys(f"{result.name}/m") == [f"{result.name}/m/0", f"{result.name}/m/2"]


def test_input_folders_are_laid_out_as_argoexec_lays_them_out(tmp_path: Path) -> None:
    """gcs.go: a key is a plain prefix, folders 0700, files 0644; executor.go:loadArtifact applies `mode`."""
    store = open_store(tmp_path / "store")
    for key in ("run-x/models/0.h5", "run-x/models/sub/1.h5", "run-x/models-old/2.h5"):
        store.write_text(key, "w")
    probe = (
        "import json, pathlib\n"
        "modes = {p.as_posix(): oct(p.stat().st_mode & 0o777) for p in sorted(pathlib.Path('in').rglob('*'))}\n"
        "pathlib.Path('out').mkdir(); pathlib.Path('out/modes.json').write_text(json.dumps(modes))\n"
    )

    def modes(**mode: Any) -> dict:
        artifact = {"name": "models", "path": "/work/in/models", "gcs": {"key": "run-x/models"}}
        modes = {"name": "modes", "valueFrom": {"path": "/work/out/modes.json"}}
        template = step(
            "probe", probe, inputs={"artifacts": [artifact | mode]}, outputs={"parameters": [modes]}
        )
        result, _, _ = run(tmp_path, workflow(["p:probe"], [template]))
        return json.loads(result.output("p", "modes"))

    folders = ["in/models", "in/models/sub", "in/models/-old"]  # filepath.Join(path, "-old/2.h5")
    files = ["in/models/0.h5", "in/models/sub/1.h5", "in/models/-old/2.h5"]
    assert modes() == dict.fromkeys(folders, "0o700") | dict.fromkeys(files, "0o644")
    opened = modes(mode=0o755, recurseMode=True)
    assert set(opened.values()) == {"0o755"}


def test_a_missing_input_is_an_error_a_template_deadline_a_failure_and_both_are_retried(
    tmp_path: Path,
) -> None:
    data = {"name": "data", "path": "/work/in/data", "gcs": {"key": "nothing/here"}}
    rule = pipeline_rule(1)
    templates = [
        step("read", "pass", inputs={"artifacts": [data]}, retryStrategy=rule),
        step("slow", "import time; time.sleep(60)", activeDeadlineSeconds="1", retryStrategy=rule),
    ]
    tasks = ["read:read", "slow:slow"]
    result, _, _ = run(tmp_path, workflow(tasks, templates))
    read, slow = node(result, "read"), node(result, "slow")
    assert read.phase == "Error" and read.attempts == 2
    assert "no results for key: nothing/here" in read.message
    assert slow.phase == "Failed" and slow.attempts == 2
    assert slow.message.startswith(POD_DEADLINE_MESSAGE)


def test_the_workflow_deadline_stops_the_run(tmp_path: Path) -> None:
    slow = step("slow", "import time; time.sleep(60)", retryStrategy=pipeline_rule(3))
    manifest = workflow(
        ["slow:slow", "later:ok:slow"], [slow, step("ok", "pass")], activeDeadlineSeconds=2
    )
    result, _, _ = run(tmp_path, manifest)
    assert result.phase == "Failed"
    slow = node(result, "slow")
    assert slow.attempts == 1 and "retry exceeded workflow deadline" in slow.message
    assert node(result, "later").phase == "Omitted"


def test_bad_input_is_not_retried_once_the_backoff_is_waited_out_and_other_failures_are(
    tmp_path: Path,
) -> None:
    """Exit code 2, bad input, is not retried, once the first backoff is waited out; exit code 1 is."""
    count = tmp_path / "count"
    flaky = (
        f"import pathlib; p = pathlib.Path({str(count)!r}); n = int(p.read_text()) if p.exists() "
        "else 0; p.write_text(str(n + 1)); raise SystemExit(0 if n else 1)"
    )
    rule = pipeline_rule(2, "1s")
    templates = [
        step("bad", "raise SystemExit(2)", retryStrategy=rule),
        step("f", flaky, retryStrategy=rule),
    ]
    tasks = ["bad:bad", "flaky:f"]
    result, lines, _ = run(tmp_path, workflow(tasks, templates))
    bad, flaky_node = node(result, "bad"), node(result, "flaky")
    assert bad.attempts == 1 and bad.duration >= 1.0
    assert "retryStrategy.expression evaluated to false" in bad.message
    assert "backoff  bad: 1s before deciding on a retry" in lines
    assert flaky_node.phase == "Succeeded" and flaky_node.attempts == 2
    assert "retrying flaky (attempt 2 of 3): exit code 1" in lines
    assert flaky_node.duration >= 1.0  # the backoff


def test_stdout_lines_are_shown_as_they_come_and_progress_is_told_at_the_end(
    tmp_path: Path,
) -> None:
    """Without a terminal: the tasks' stdout lines and ends (with the progress file's last N/M); stderr
    only to the log, as a pod's."""
    code = (
        "import os, sys, time\n"
        "print('round 1: 91.20%', flush=True)\n"
        "print('diagnostics', file=sys.stderr, flush=True)\n"
        "for done in range(1, 4):\n"
        "    open(os.environ['ARGO_PROGRESS_FILE'], 'w').write(f'{done}/3\\n'); time.sleep(0.6)\n"
        "print('round 2: 95.70%')\n"
    )
    manifest = workflow(["say:s"], [step("s", code)])
    result, lines, _ = run(tmp_path, manifest)
    said = [line.split("s  ", 1) for line in lines.splitlines()[1:]]  # after the run's first line
    texts = [text for _, text in said]
    assert texts[:3] == ["started  say", "say: round 1: 91.20%", "say: round 2: 95.70%"]
    assert texts[3].startswith("done     say") and texts[3].endswith(", progress 3/3)")
    assert float(said[2][0]) - float(said[1][0]) > 1.0  # the first shown while the step ran
    assert "diagnostics" not in lines and node(result, "say").progress == "3/3"
    log = node(result, "say").log.read_text()
    assert "round 1: 91.20%\n" in log and "diagnostics\n" in log and "round 2: 95.70%\n" in log


def most_at_once(nodes: list) -> int:
    """The most nodes that ran at the same time."""
    return max(sum(n.started <= m.started < n.finished for n in nodes) for m in nodes)


@pytest.mark.parametrize(
    ("items", "memory", "cores", "budget", "most"),
    [
        (8, "1Gi", 64, 3 * 2**30, 3),  # the memory limits decide
        (6, "10Mi", 1, 2**40, 2),  # without --parallelism: two tries per core
        (3, "2Gi", 8, 2**30, 1),  # larger than the whole budget: still runs, alone
    ],
)
def test_tries_start_only_while_they_fit(
    tmp_path: Path, items: int, memory: str, cores: int, budget: int, most: int
) -> None:
    """Tries start while their memory limits fit the budget, and a few per core."""
    manifest = fan_out([str(i) for i in range(items)], "import time; time.sleep(0.4)", "train")
    manifest["spec"]["templates"][2]["container"] |= {"resources": {"limits": {"memory": memory}}}
    result, lines, _ = run(tmp_path, manifest, parallelism=None, cores=cores, memory=budget)
    assert result.phase == "Succeeded"
    assert most_at_once([n for n in result.nodes if n.task == "train"]) == most
    assert f"memory {budget / 2**30:.1f} GiB" in lines.splitlines()[0]


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (137, "killed (signal 9, e.g. out of memory), exit code 137"),  # the OOM killer's
        (143, "terminated (signal 15, SIGTERM), exit code 143"),
        (134, "killed by signal 6 (SIGABRT), exit code 134"),
        (3, "exit code 3"),
    ],
)
def test_a_try_killed_by_a_signal_says_so(code: int, said: str) -> None:
    assert exit_description(code) == said
