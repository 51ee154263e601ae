"""bench/cluster_timing.py on one small run, the controller's DEFAULT_REQUEUE_TIME changed and put back after
an error: what it measured is coherent and the controller ends as it was; how fast is never a verdict here."""

from __future__ import annotations

from typing import Any

import pytest

from bench import cluster_report
from bench.cluster_levels import RunTiming, dag_template, task_levels
from bench.cluster_timing import cluster_run, local_run
from bench.controller_env import changed_controller, current_value
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster

SETTINGS = {"limit": 3000, "workers": 1, "rounds": 1, "epochs": 1, "batch": 100}
REQUEUE = "3s"  # neither the local cluster's 2 s nor Argo's 10 s: the change is the test's own


class Stopped(Exception):
    """Raised inside the controller's change, as an error or Ctrl-C would end a measurement."""


@pytest.fixture(scope="module")
def measured(cluster: Cluster) -> dict[str, Any]:
    before = current_value(cluster.kubectl)
    found: dict[str, Any] = {"before": before}
    with pytest.raises(Stopped), changed_controller(cluster.kubectl) as set_requeue:
        set_requeue(REQUEUE)
        found["during"] = current_value(cluster.kubectl)
        found["run"] = cluster_run(cluster, SETTINGS, seed=0, requeue=REQUEUE)
        raise Stopped
    found["after"] = current_value(cluster.kubectl)
    found["local"] = local_run(cluster, SETTINGS, seed=0)
    return found


@pytest.fixture(scope="module")
def timing(measured: dict[str, Any]) -> RunTiming:
    return cluster_report.analysed(measured["run"])


def test_the_controller_ran_with_the_value_and_got_its_own_back(measured: dict) -> None:
    assert measured["during"] == REQUEUE
    assert measured["after"] == measured["before"]


def test_every_level_of_the_dag_is_found_with_every_pod(measured: dict, timing: RunTiming) -> None:
    levels = task_levels(dag_template(measured["run"]["workflow"]))
    assert timing.phase == "Succeeded"
    assert [set(level.tasks) for level in timing.levels] == [
        {task for task, level in levels.items() if level == number}
        for number in range(max(levels.values()) + 1)
    ]
    pods = [pod for level in timing.levels for pod in level.pods]
    assert len(pods) == len(measured["run"]["pods"])
    assert {pod.phase for pod in pods} == {"Succeeded"}


def test_every_gap_and_start_lies_within_the_run(timing: RunTiming) -> None:
    previous_end = timing.started
    for level in timing.levels:
        assert level.gap >= 0 and level.first_created == previous_end + level.gap
        if level.noticed is not None:
            assert 0 <= level.noticed <= level.gap
        for pod in level.pods:
            assert timing.started <= pod.created <= pod.main_started <= pod.ended
            assert pod.ended <= timing.finished
            assert pod.scheduling >= 0 and pod.init >= 0
            assert pod.scheduling + pod.init <= pod.start
        previous_end = level.last_ended


def test_the_total_is_made_of_the_gaps_the_levels_and_the_end(timing: RunTiming) -> None:
    spans = sum(level.gap + level.last_ended - level.first_created for level in timing.levels)
    tail = timing.finished - timing.levels[-1].last_ended
    assert tail >= 0
    assert timing.total == pytest.approx(spans + tail)


def test_the_local_run_has_its_total_and_the_report_both(measured: dict) -> None:
    local = measured["local"]
    assert local["engine"] == "local" and local["seed"] == 0
    assert 0 < local["total"] <= local["wall"]
    figures = cluster_report.figures([measured["run"], local])
    assert figures["requeue"][REQUEUE]["runs"] == 1
    assert figures["local_total"]["n"] == 1
    assert figures["pod_start"]["n"] == len(measured["run"]["pods"])
