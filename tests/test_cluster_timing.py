"""The cluster timing's analysis (bench/cluster_levels.py, bench/cluster_report.py) on a run recorded on the
local cluster and trimmed to what it reads (tests/data/cluster-run.json), figures read off it by hand."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench import cluster_report
from bench.cluster_levels import (
    RecordError,
    analyse,
    dag_template,
    task_levels,
    task_of,
    trimmed_workflow,
)
from bench.pod_watch import json_objects, trimmed

RECORD = Path(__file__).parent / "data" / "cluster-run.json"
RUN = "mnist-timing-c947fd"
Record = dict[str, Any]


@pytest.fixture
def record() -> Record:
    return json.loads(RECORD.read_text())


def pod(record: Record, template: str) -> dict[str, Any]:
    (found,) = [p for p in record["pods"] if f"-{template}-" in p["metadata"]["name"]]
    return found


def ended(record: Record, template: str, name: str) -> dict[str, Any]:
    status = pod(record, template)["status"]
    statuses = status["initContainerStatuses"] + status["containerStatuses"]
    (found,) = [c for c in statuses if c["name"] == name]
    return found["state"]["terminated"]


def at(minute_second: str) -> str:
    return f"2026-12-03T13:{minute_second}Z"


def test_the_recorded_run_in_levels_gaps_and_parts(record: Record) -> None:
    timing = analyse(record["workflow"], record["pods"])
    first, *rest = [level.tasks for level in timing.levels]
    assert first == ("init", "split")
    assert rest == [("train-round-1",), ("aggregate-round-1",), ("evaluate",), ("publish",)]
    # the first level from the Workflow's start (13:43:43); then 46 → 49, 55 → 57, 44:00 → 03, 07 → 10
    assert [level.gap for level in timing.levels] == [0, 3, 2, 3, 3]
    # the previous level's task node (Retry, TaskGroup) ended with the next level's first pod
    assert [level.noticed for level in timing.levels] == [None, 3, 2, 3, 3]
    assert timing.total == 33 and timing.phase == "Succeeded"
    # steps: split and init 45 → 46, train 51 → 55, aggregate 59 → 00, evaluate 05 → 07, publish 12 → 13
    assert timing.parts() == {"gaps": 11, "starts": 10, "steps": 9, "uploads": 0, "end": 3}
    pods = [p for level in timing.levels for p in level.pods]
    templates = ["init", "split", "train", "aggregate", "evaluate", "publish"]
    assert [p.template for p in pods] == templates
    inits = [1, 1, 1, 0, 0, 1]
    assert [(p.start, p.init, p.scheduling) for p in pods] == [(2, i, 0) for i in inits]


def test_a_task_is_a_level_below_its_deepest_dependency_and_named_without_item_or_attempt() -> None:
    tasks = [{"name": "a"}, {"name": "b", "depends": "a.Succeeded"}, {"name": "d", "depends": "a"}]
    tasks.append({"name": "c", "depends": "a && (b.Failed || b.Succeeded)"})
    levels = task_levels({"name": "main", "dag": {"tasks": tasks}})
    assert levels == {"a": 0, "b": 1, "c": 2, "d": 1}
    assert task_of(f"{RUN}.train-round-1(0:0)(1)", RUN) == "train-round-1"
    assert task_of(f"{RUN}.split", RUN) == "split"
    with pytest.raises(RecordError):
        task_of("other-run.split", RUN)


# Each rule on the record changed where a wrong rule would read it wrongly (no container: the pod's creation)
@pytest.mark.parametrize(
    "changes, gaps",
    [
        # a pod ends with its last container (wait uploads a second longer), not with main
        ([("evaluate", "wait", "44:08"), ("evaluate", "main", "44:06")], [0, 3, 2, 3, 2]),
        # a level ends with its last pod (init ends at 46)
        ([("split", "wait", "43:47")], [0, 2, 2, 3, 3]),
        # a level starts with its first pod (split's at 43)
        ([("init", None, "43:44")], [0, 3, 2, 3, 3]),
        ([("init", None, "43:44"), ("split", None, "43:45")], [1, 3, 2, 3, 3]),
    ],
)
def test_a_level_runs_from_its_first_pods_creation_to_its_last_pods_last_container(
    changes: list[tuple[str, str | None, str]], gaps: list[int], record: Record
) -> None:
    for template, name, time in changes:
        if name is None:
            pod(record, template)["metadata"]["creationTimestamp"] = at(time)
        else:
            ended(record, template, name)["finishedAt"] = at(time)
    assert [level.gap for level in analyse(record["workflow"], record["pods"]).levels] == gaps


def test_a_pods_start_runs_from_its_creation_to_its_main_container_running(record: Record) -> None:
    train = pod(record, "train")
    train["metadata"]["creationTimestamp"] = at("43:47")
    train["status"]["conditions"][0]["lastTransitionTime"] = at("43:48")
    (moved,) = analyse(record["workflow"], record["pods"]).levels[1].pods
    assert (moved.start, moved.scheduling, moved.init) == (4, 1, 1)
    ended(record, "publish", "wait")["finishedAt"] = at("44:14")
    assert analyse(record["workflow"], record["pods"]).parts()["uploads"] == 1


def test_a_record_the_analysis_cannot_read_is_refused(record: Record) -> None:
    no_train, foreign, running = (copy.deepcopy(record) for _ in range(3))
    no_train["pods"].remove(pod(no_train, "train"))
    pod(foreign, "evaluate")["metadata"]["annotations"]["workflows.argoproj.io/node-id"] = "x-1"
    state = pod(running, "publish")["status"]["containerStatuses"][1]["state"]
    state["running"] = {"startedAt": state.pop("terminated")["startedAt"]}
    refused = {"level 2": no_train, "names no node": foreign, "had not ended": running}
    for message, changed in refused.items():
        with pytest.raises(RecordError, match=message):
            analyse(changed["workflow"], changed["pods"])


def test_trimming_keeps_what_is_read_and_the_watch_is_read_value_by_value(record: Record) -> None:
    workflow = trimmed_workflow(record["workflow"])
    assert workflow == record["workflow"] and [trimmed(p) for p in record["pods"]] == record["pods"]
    assert dag_template(workflow)["name"] == "pipeline"
    first, second = {"type": "ADDED", "object": {"a": 1}}, {"type": "DELETED", "object": {"b": [2]}}
    text = json.dumps(first, indent=2) + "\n" + json.dumps(second, indent=2) + "\n"
    found, rest = json_objects(text[:-9])
    assert found == [first] and rest.startswith("{")
    assert json_objects(rest + text[-9:]) == ([second], "")


def measurement(record: Record, requeue: str = "2s", workers: int = 1) -> dict[str, Any]:
    run = {"engine": "cluster", "run": RUN, "seed": 0, "requeue": requeue, **record}
    local = {"engine": "local", "run": "mnist-timing-x", "seed": 0, "total": 20.5, "wall": 23.0}
    nodes = [{"name": "node", "cpu": "2", "memory": "8Gi"}]
    machine = {"cpu_model": "Some CPU", "kubernetes": "v1.34.4", "nodes": nodes}
    return {
        "measured": "2026-12-03 13:43 UTC",
        "command": "python -m bench.cluster_timing --seeds 0",
        "settings": {"limit": 3000, "workers": workers, "rounds": 1, "epochs": 1, "batch": 100},
        "seeds": [0],
        "machine": machine | {"controller_image": "workflow-controller:v4.1.4"},
        "runs": [run, local],
    }


def test_the_figures_keep_requeues_apart_and_the_first_level_out_of_gaps(record: Record) -> None:
    slower = copy.deepcopy(record)
    pod(slower, "publish")["metadata"]["creationTimestamp"] = at("44:18")
    for name in ("init", "main", "wait"):
        ended(slower, "publish", name).update(startedAt=at("44:20"), finishedAt=at("44:20"))
    figures = cluster_report.combined([measurement(record)])["figures"]
    two = figures["requeue"]["2s"]
    assert two["gap"] == {"n": 4, "mean": 2.75, "min": 2, "max": 3}
    assert two["gap_into_train"] == {"n": 1, "mean": 3, "min": 3, "max": 3}
    assert two["gap_into_others"]["n"] == 3 and two["first_level"]["mean"] == 0
    assert two["total"]["mean"] == 33
    assert figures["pod_start"] == {"n": 6, "mean": 2, "min": 2, "max": 2}
    assert figures["pod_start_train"]["n"] == 1 and figures["init"]["mean"] == 0.67
    assert figures["local_total"]["mean"] == 20.5
    report = cluster_report.combined([measurement(record), measurement(slower, "10s")])
    assert report["figures"]["requeue"]["10s"]["gap"]["max"] == 11
    text = cluster_report.markdown(report)
    assert "| 5 | publish | 3.0 s (3 to 3) | 11.0 s (11 to 11) |" in text
    total = "| Run's total (the Workflow's start to end; local: the runner's) | 33 s | 33 s | 20, 20 s |"
    assert total in text
    with pytest.raises(ValueError, match="different settings"):
        cluster_report.combined([measurement(record), measurement(record, workers=2)])


def test_a_requeue_time_is_read_as_the_controller_reads_a_duration() -> None:
    read = {"2s": 2, "1m30s": 90, "500ms": 0.5, "unset": 10}  # unset: rate_limiters.go's default
    assert {text: cluster_report.requeue_seconds(text) for text in read} == read
    for wrong in ("2", "2x", "s", "2s junk"):
        with pytest.raises(ValueError):
            cluster_report.requeue_seconds(wrong)
