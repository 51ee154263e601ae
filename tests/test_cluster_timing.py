"""The cluster timing's analysis (bench/cluster_levels.py, bench/cluster_report.py) on a run recorded on the
local cluster: `--limit 3000 --workers 1 --rounds 1 --epochs 1`, requeue 2 s, its Workflow and pods trimmed
to what the analysis reads (tests/data/cluster-run.json). The expected figures were read off the record by
hand; each rule is also checked against a record changed where a wrong rule would read it wrongly."""

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


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def pod(record: dict[str, Any], template: str) -> dict[str, Any]:
    (found,) = [p for p in record["pods"] if f"-{template}-" in p["metadata"]["name"]]
    return found


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    containers = pod["status"]["initContainerStatuses"] + pod["status"]["containerStatuses"]
    (found,) = [c for c in containers if c["name"] == name]
    return found["state"]["terminated"]


def at(second: str, minute: str = "43") -> str:
    return f"2026-12-03T13:{minute}:{second}Z"


def test_the_levels_are_the_dags_from_its_depends(record: dict[str, Any]) -> None:
    timing = analyse(record["workflow"], record["pods"])
    assert [level.tasks for level in timing.levels] == [
        ("init", "split"),
        ("train-round-1",),
        ("aggregate-round-1",),
        ("evaluate",),
        ("publish",),
    ]
    assert [len(level.pods) for level in timing.levels] == [2, 1, 1, 1, 1]


def test_a_task_is_one_level_below_its_deepest_dependency() -> None:
    template = {
        "name": "main",
        "dag": {
            "tasks": [
                {"name": "a"},
                {"name": "b", "depends": "a.Succeeded"},
                {"name": "c", "depends": "a && (b.Failed || b.Succeeded)"},
                {"name": "d", "depends": "a"},
            ]
        },
    }
    assert task_levels(template) == {"a": 0, "b": 1, "c": 2, "d": 1}


def test_a_nodes_task_is_its_name_without_the_run_the_item_and_the_attempt() -> None:
    assert task_of(f"{RUN}.train-round-1(0:0)(1)", RUN) == "train-round-1"
    assert task_of(f"{RUN}.split", RUN) == "split"
    with pytest.raises(RecordError):
        task_of("other-run.split", RUN)


def test_the_gap_runs_from_the_previous_levels_last_pod_end_to_the_first_pod(
    record: dict[str, Any],
) -> None:
    timing = analyse(record["workflow"], record["pods"])
    # first level from the Workflow's start (13:43:43); then 46 → 49, 55 → 57, 44:00 → 03, 07 → 10
    assert [level.gap for level in timing.levels] == [0, 3, 2, 3, 3]
    # the previous level's task node (Retry, TaskGroup) ended with the next level's first pod
    assert [level.noticed for level in timing.levels] == [None, 3, 2, 3, 3]
    assert timing.total == 33 and timing.phase == "Succeeded"


def test_the_total_is_the_gaps_the_starts_the_steps_the_uploads_and_the_end(
    record: dict[str, Any],
) -> None:
    parts = analyse(record["workflow"], record["pods"]).parts()
    # steps: split and init 45 → 46, train 51 → 55, aggregate 59 → 00, evaluate 05 → 07, publish 12 → 13
    assert parts == {"gaps": 11, "starts": 10, "steps": 9, "uploads": 0, "end": 3}
    container(pod(record, "publish"), "wait")["finishedAt"] = at("14", "44")
    assert analyse(record["workflow"], record["pods"]).parts()["uploads"] == 1


def test_a_pod_ends_with_its_last_container_not_with_main(record: dict[str, Any]) -> None:
    evaluate = pod(record, "evaluate")
    container(evaluate, "wait")["finishedAt"] = at("08", "44")  # it uploads for a second longer
    container(evaluate, "main")["finishedAt"] = at("06", "44")
    gaps = [level.gap for level in analyse(record["workflow"], record["pods"]).levels]
    assert gaps == [0, 3, 2, 3, 2]


def test_a_level_ends_with_its_last_pod(record: dict[str, Any]) -> None:
    container(pod(record, "split"), "wait")["finishedAt"] = at("47")  # init still ends at 46
    gaps = [level.gap for level in analyse(record["workflow"], record["pods"]).levels]
    assert gaps[1] == 2


def test_a_level_starts_with_its_first_pod(record: dict[str, Any]) -> None:
    pod(record, "init")["metadata"]["creationTimestamp"] = at("44")  # split's is still 43
    later = copy.deepcopy(record)
    pod(later, "split")["metadata"]["creationTimestamp"] = at("45")
    assert analyse(record["workflow"], record["pods"]).levels[0].gap == 0
    assert analyse(later["workflow"], later["pods"]).levels[0].gap == 1


def test_a_pods_start_runs_from_its_creation_to_its_main_container_running(
    record: dict[str, Any],
) -> None:
    timing = analyse(record["workflow"], record["pods"])
    pods = [p for level in timing.levels for p in level.pods]
    assert [p.template for p in pods] == [
        "init",
        "split",
        "train",
        "aggregate",
        "evaluate",
        "publish",
    ]
    assert [p.start for p in pods] == [2] * 6
    assert [p.init for p in pods] == [1, 1, 1, 0, 0, 1]
    assert [p.scheduling for p in pods] == [0] * 6
    train = pod(record, "train")
    train["metadata"]["creationTimestamp"] = at("47")
    train["status"]["conditions"][0]["lastTransitionTime"] = at("48")
    (moved,) = analyse(record["workflow"], record["pods"]).levels[1].pods
    assert (moved.start, moved.scheduling, moved.init) == (4, 1, 1)


def test_a_level_without_a_recorded_pod_is_refused(record: dict[str, Any]) -> None:
    record["pods"].remove(pod(record, "train"))
    with pytest.raises(RecordError, match="level 2"):
        analyse(record["workflow"], record["pods"])


def test_a_pod_of_no_node_of_the_run_is_refused(record: dict[str, Any]) -> None:
    pod(record, "evaluate")["metadata"]["annotations"]["workflows.argoproj.io/node-id"] = "x-1"
    with pytest.raises(RecordError, match="names no node"):
        analyse(record["workflow"], record["pods"])


def test_a_pod_seen_last_while_running_is_refused(record: dict[str, Any]) -> None:
    state = pod(record, "publish")["status"]["containerStatuses"][1]["state"]
    state["running"] = {"startedAt": state.pop("terminated")["startedAt"]}
    with pytest.raises(RecordError, match="had not ended"):
        analyse(record["workflow"], record["pods"])


def test_trimming_keeps_what_the_analysis_reads(record: dict[str, Any]) -> None:
    workflow = trimmed_workflow(record["workflow"])
    pods = [trimmed(p) for p in record["pods"]]
    assert workflow == record["workflow"] and pods == record["pods"]
    assert dag_template(workflow)["name"] == "pipeline"


def test_the_watchs_output_is_read_one_json_value_after_another() -> None:
    first, second = {"type": "ADDED", "object": {"a": 1}}, {"type": "DELETED", "object": {"b": [2]}}
    text = json.dumps(first, indent=2) + "\n" + json.dumps(second, indent=2) + "\n"
    found, rest = json_objects(text[:-9])
    assert found == [first] and rest.startswith("{")
    more, rest = json_objects(rest + text[-9:])
    assert more == [second] and rest == ""


# ---- the report ---------------------------------------------------------------------------------


def measurement(record: dict[str, Any], requeue: str = "2s") -> dict[str, Any]:
    run = {"engine": "cluster", "run": RUN, "seed": 0, "requeue": requeue, **record}
    local = {"engine": "local", "run": "mnist-timing-x", "seed": 0, "total": 20.5, "wall": 23.0}
    return {
        "measured": "2026-12-03 13:43 UTC",
        "command": "python -m bench.cluster_timing --seeds 0",
        "settings": {"limit": 3000, "workers": 1, "rounds": 1, "epochs": 1, "batch": 100},
        "seeds": [0],
        "machine": {
            "cpu_model": "Some CPU",
            "kubernetes": "v1.34.4",
            "nodes": [{"name": "node", "cpu": "2", "memory": "8Gi"}],
            "controller_image": "workflow-controller:v4.1.4",
        },
        "runs": [run, local],
    }


def test_the_figures_leave_the_first_level_out_of_the_gap_between_levels(
    record: dict[str, Any],
) -> None:
    figures = cluster_report.combined([measurement(record)])["figures"]
    two = figures["requeue"]["2s"]
    assert two["gap"] == {"n": 4, "mean": 2.75, "min": 2, "max": 3}
    assert two["gap_into_train"] == {"n": 1, "mean": 3, "min": 3, "max": 3}
    assert two["gap_into_others"]["n"] == 3 and two["first_level"]["mean"] == 0
    assert two["total"]["mean"] == 33
    assert figures["pod_start"] == {"n": 6, "mean": 2, "min": 2, "max": 2}
    assert figures["pod_start_train"]["n"] == 1 and figures["init"]["mean"] == 0.67
    assert figures["local_total"]["mean"] == 20.5


def test_the_figures_keep_each_requeue_apart(record: dict[str, Any]) -> None:
    slower = copy.deepcopy(record)
    pod(slower, "publish")["metadata"]["creationTimestamp"] = at("18", "44")
    for container_ in ("init", "main", "wait"):
        for key in ("startedAt", "finishedAt"):
            container(pod(slower, "publish"), container_)[key] = at("20", "44")
    report = cluster_report.combined([measurement(record), measurement(slower, "10s")])
    assert report["figures"]["requeue"]["2s"]["gap"]["max"] == 3
    assert report["figures"]["requeue"]["10s"]["gap"]["max"] == 11
    text = cluster_report.markdown(report)
    assert "| 5 | publish | 3.0 s (3 to 3) | 11.0 s (11 to 11) |" in text
    assert (
        "| Run's total (the Workflow's start to end; local: the runner's) | 33 s | 33 s | 20, 20 s |"
        in text
    )


def test_measurements_of_other_settings_are_not_combined(record: dict[str, Any]) -> None:
    other = measurement(record)
    other["settings"] = other["settings"] | {"workers": 2}
    with pytest.raises(ValueError, match="different settings"):
        cluster_report.combined([measurement(record), other])


def test_a_requeue_time_is_read_as_the_controller_reads_a_duration() -> None:
    assert cluster_report.requeue_seconds("2s") == 2
    assert cluster_report.requeue_seconds("1m30s") == 90
    assert cluster_report.requeue_seconds("500ms") == 0.5
    assert cluster_report.requeue_seconds("unset") == 10  # rate_limiters.go's default
    for wrong in ("2", "2x", "s", "2s junk"):
        with pytest.raises(ValueError):
            cluster_report.requeue_seconds(wrong)
