"""The benchmark's own rules: run summaries, the targets, the plan, the report, the import probe, the log
watcher, and its contenders on tiny data."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bench import plan, results_page, timeline
from bench.data import iid_shards
from bench.pipeline_run import PROBE_DIR, LogWatcher, settings_record, submit_command
from bench.report import PLAN_PNG, RESULTS_MD, markdown, write_outputs
from bench.run import make_parser
from bench.targets import TARGET_ACCURACY, check_all
from steps.lib.mnist import Digits
from tests.support.project import ROOT
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_workflow

SAVED_RESULTS = ROOT / "bench" / "results.json"
# (name, started, finished) of a two-round run on two workers, as the local runner's summary.json has it
TWO_ROUNDS = [
    ("split", 0.0, 0.8),
    ("init", 0.0, 2.5),
    ("train-round-1(0:0)", 2.6, 14.0),
    ("train-round-1(1:1)", 2.7, 15.0),
    ("aggregate-round-1", 15.1, 15.6),
    ("train-round-2(0:0)", 15.7, 27.0),
    ("train-round-2(1:1)", 15.7, 28.1),
    ("aggregate-round-2", 28.2, 28.9),
    ("evaluate", 29.0, 31.0),
    ("publish", 31.1, 31.5),
]


def two_rounds() -> tuple[dict, dict]:
    """A summary.json of a two-round run, and the Workflow it ran."""
    nodes = [
        {"name": name, "task": name.split("(")[0], "template": name.split("-round")[0]}
        | {"phase": "Succeeded", "started": started, "finished": finished}
        for name, started, finished in TWO_ROUNDS
    ]
    workflow = compile_workflow(PipelineSettings(workers=2, rounds=2))
    return {"name": "mnist-abcde", "phase": "Succeeded", "nodes": nodes}, workflow


def test_rounds_come_from_the_compiled_spec_and_last_from_the_first_trainer_to_the_average() -> (
    None
):
    summary, workflow = two_rounds()
    rounds = timeline.rounds_of(summary, workflow)
    assert rounds["train-round-2(1:1)"] == 2 and rounds["aggregate-round-1"] == 1
    assert "split" not in rounds and "evaluate" not in rounds
    assert timeline.round_model_keys(summary, workflow) == {
        1: "mnist-abcde/round-1/model.h5",
        2: "mnist-abcde/round-2/model.h5",
    }
    spans = timeline.round_seconds(summary, rounds)
    assert [round(s["seconds"], 2) for s in spans] == [13.0, 13.2]  # 2.6 → 15.6, 15.7 → 28.9
    steps = timeline.step_seconds(summary)  # the trainers left out
    assert set(steps) == {"split", "init", "aggregate", "evaluate", "publish"}
    assert [round(s, 2) for s in steps["aggregate"]] == [0.5, 0.7]


def test_outside_training_is_the_wall_time_no_epoch_covers() -> None:
    seen = [
        (10.0, "epoch 1/2: accuracy 0.9 loss 0.3 (4.0 s)"),  # 6 → 10
        (11.0, "epoch 1/2: accuracy 0.9 loss 0.3 (4.5 s)"),  # 6.5 → 11, overlaps the first
        (14.0, "epoch 2/2: accuracy 0.9 loss 0.3 (3.0 s)"),  # 11 → 14
        (14.5, "trained model → out/model.h5"),
    ]
    spans = timeline.epoch_intervals(seen)
    assert timeline.union_seconds(spans) == pytest.approx(8.0)
    outside = timeline.outside_training(20.0, spans)
    assert outside == {"training_seconds": 8.0, "outside_seconds": 12.0, "outside_share": 0.6}


def test_the_epoch_line_is_the_train_steps_own() -> None:
    from steps.lib.keras_model import EpochLogger

    logger = EpochLogger(epochs=3)
    logger.on_epoch_begin(1)
    captured = io.StringIO()
    with redirect_stderr(captured):
        logger.on_epoch_end(1, {"accuracy": 0.97, "loss": 0.1})
    assert timeline.epoch_seconds(captured.getvalue()) is not None
    assert timeline.epoch_seconds("training on in/shard.npz (20000 samples)") is None


def test_the_probe_records_each_process_and_whether_it_loaded_tensorflow(tmp_path: Path) -> None:
    environment = os.environ | {
        "BENCH_PROBE_DIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(PROBE_DIR), str(ROOT)]),
    }
    for code in ("import json", "import sys; sys.modules['tensorflow'] = sys; sys.exit(3)"):
        subprocess.run([sys.executable, "-c", code], env=environment, check=False)
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    assert sorted(r["tensorflow"] for r in records) == [False, True]
    assert all(r["ended"] >= r["started"] for r in records)
    probes = [{"argv": ["/p/steps/aggregate.py"], "tensorflow": False}, *records]
    probes.append({"argv": ["/p/steps/evaluate.py"], "tensorflow": True})
    loaded = timeline.tensorflow_imports(probes)
    assert loaded["aggregate"] is False and loaded["evaluate"] is True


def test_the_log_watcher_times_complete_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "mnist-abcde" / "train.log"
    log.parent.mkdir()
    watcher = LogWatcher(tmp_path)
    log.write_text("epoch 1/2: (1.0 s)\nepoch 2/")
    watcher.poll()
    with log.open("a") as stream:
        stream.write("2: (1.0 s)\n")
    watcher.poll()
    lines = watcher.seen[str(log)]
    assert [line for _, line in lines] == ["epoch 1/2: (1.0 s)", "epoch 2/2: (1.0 s)"]
    assert lines[1][0] > lines[0][0]


def test_every_setting_is_passed_so_the_environment_cannot_change_the_run(tmp_path: Path) -> None:
    command = submit_command(PipelineSettings(workers=2), tmp_path, parallelism=1)
    assert "--workers=2" in command and "--parallelism=1" in command
    assert f"--rounds={PipelineSettings().rounds}" in command
    assert f"--learning-rate={PipelineSettings().learning_rate}" in command


def test_the_benchmarks_subset_is_the_pipelines_shards_together() -> None:
    rng = np.random.default_rng(5)
    train = Digits(rng.integers(0, 255, (500, 28, 28), dtype=np.uint8), np.arange(500) % 10)
    (whole,) = iid_shards(train, 1, seed=7, limit=120, validation=100)
    parts = iid_shards(train, 3, seed=7, limit=120, validation=100)
    assert len(whole) == 120
    together = np.concatenate([p.x for p in parts])
    assert sorted(map(bytes, whole.x)) == sorted(map(bytes, together))


# ---- targets and plan --------------------------------------------------------------------------


def pipeline_record(seed: int, accuracy: float, wall: float, **extra) -> dict:
    """What check_all and calibrate read of a pipeline run's record."""
    return {
        "settings": settings_record(PipelineSettings(seed=seed, source="/data/mnist.npz")),
        "accuracy": accuracy,
        "reached": accuracy >= TARGET_ACCURACY,
        "wall_seconds": wall,
        "peak_rss_mb": 900,
        "mean_round_seconds": 21.0,
        "outside": {"outside_seconds": wall * 0.1, "outside_share": 0.1},
        "steps": {
            "split": [0.4],
            "init": [0.6],
            "aggregate": [0.3, 0.3, 0.4],
            "evaluate": [1.4],
            "publish": [0.2],
        },
        "tensorflow": {"split": False, "init": False, "aggregate": False, "evaluate": True},
        "trainers": [{"seconds": 12.0, "epoch_seconds": 10.0}],
        "model_bytes": 900_000,
        "submit_seconds": 1.5,
        **extra,
    }


def fake_runs() -> dict:
    centralized = [(0, 1e-3, 75.0), (0, 2e-3, 60.0), (0, 3e-3, None), (1, 1e-3, 70.0)]
    workers_2 = settings_record(PipelineSettings(workers=2))
    alone = settings_record(PipelineSettings(workers=1, rounds=1))
    return {
        "default": [pipeline_record(0, 0.9921, 90.0), pipeline_record(1, 0.9893, 95.0)],
        "centralized": [
            {"seed": s, "learning_rate": r, "time_to_target": t, "peak_rss_mb": 1500}
            for s, r, t in centralized
        ],
        "baseline_settings": pipeline_record(0, 0.9861, 40.0),
        "workers_2": pipeline_record(0, 0.992, 88.0, mean_round_seconds=19.0, settings=workers_2),
        "calibration": pipeline_record(0, 0.975, 40.0, settings=alone),
    }


def test_the_targets_hold_what_was_measured() -> None:
    checks = {c["number"]: c for c in check_all(fake_runs())}
    assert checks["1"]["met"] is False and "min 98.93%" in checks["1"]["measured"]
    assert checks["2"]["met"] is False and "seed 0: 1.50x (90 s / 60 s" in checks["2"]["measured"]
    assert "seed 1: n/a (pipeline did not reach it)" in checks["2"]["measured"]
    assert checks["3"]["met"] is True and checks["4a"]["met"] is True
    assert checks["4b"]["met"] is False and "evaluate 1.4 s" in checks["4b"]["measured"]
    assert checks["4c"]["met"] is False and checks["4c"]["measured"] == "loaded by evaluate"
    assert checks["5"]["met"] is False and "(1.11x)" in checks["5"]["measured"]
    assert checks["6"]["met"] is True


def test_a_target_without_its_runs_is_not_measured_rather_than_met() -> None:
    checks = check_all({"default": [pipeline_record(0, 0.995, 80.0)]})
    by_number = {c["number"]: c["met"] for c in checks}
    assert by_number["1"] is True
    assert by_number["2"] is None and by_number["3"] is None and by_number["5"] is None


def test_the_plan_is_calibrated_on_the_run_that_ran_alone() -> None:
    runs = fake_runs()
    calibration = plan.calibrate(
        runs["calibration"], [runs["calibration"], *runs["default"]], 60000
    )
    assert calibration.train_fixed == pytest.approx(2.0)
    epochs = PipelineSettings().epochs
    assert calibration.train_per_sample_epoch == pytest.approx(10.0 / (60000 * epochs))
    fewer = plan.critical_path(calibration, 1, 3, requeue=2.0)
    more = plan.critical_path(calibration, 8, 3, requeue=2.0)
    assert more["training_seconds"] == pytest.approx(fewer["training_seconds"] / 8)
    # a requeue above every pod's life is waited after each level but the first (2 per round,
    # evaluate, publish); only the last level's pod start and step show besides
    waits = 2 * 3 + 2
    slow = plan.critical_path(calibration, 8, 3, requeue=100.0)
    slower = plan.critical_path(calibration, 8, 3, requeue=200.0)
    assert slower["seconds"] - slow["seconds"] == pytest.approx(100.0 * waits)
    assert slower["round_seconds"] - slow["round_seconds"] == pytest.approx(100.0 * 2)


def test_the_plan_needs_a_number_of_rounds_that_reaches_the_target() -> None:
    runs = fake_runs()
    calibration = plan.calibrate(runs["calibration"], [runs["calibration"]], 60000)
    tried = {  # (workers, rounds): accuracy after each round; only a run's last round counts
        (32, 2): [0.95, 0.975],
        (32, 4): [0.95, 0.992, 0.98, 0.985],
        (8, 2): [0.97, 0.985],
        (8, 4): [0.97, 0.98, 0.988, 0.991],
        (2, 3): [0.98, 0.99, 0.999],
    }
    lines = [
        {"workers": workers, "rounds": rounds, "round": r, "accuracy": a, "seconds": 9.0}
        for (workers, rounds), accuracies in tried.items()
        for r, a in enumerate(accuracies, start=1)
    ]
    three_rounds = settings_record(PipelineSettings(workers=2, rounds=3))
    two = pipeline_record(0, 0.992, 88.0, settings=three_rounds)
    accuracies = plan.accuracy_by_rounds([two], lines)
    rows = {row["workers"]: row for row in plan.predict(calibration, accuracies, TARGET_ACCURACY)}
    assert (rows[2]["rounds"], rows[2]["accuracy"], rows[2]["source"]) == (3, 0.992, "pipeline")
    assert (rows[8]["rounds"], rows[8]["source"]) == (4, "simulated")
    assert set(rows[8]["predicted"]) == {f"{r:g}" for r in plan.REQUEUE_SECONDS}
    assert rows[32]["rounds"] is None and rows[32]["predicted"] == {}
    assert rows[32]["rounds_tried"] == [2, 4] and rows[32]["accuracy"] == 0.985
    assert rows[4]["rounds_tried"] == [] and rows[4]["accuracy"] is None
    assert plan.unresolved_workers([two], TARGET_ACCURACY) == [1, 3, 4, 8, 16, 32]


# ---- report ------------------------------------------------------------------------------------


def fake_results() -> dict:
    """The saved results, planned from fake_runs' calibration and a simulated 32-worker round."""
    results = json.loads(SAVED_RESULTS.read_text())
    calibration = plan.calibrate(fake_runs()["calibration"], [fake_runs()["calibration"]], 60000)
    fedavg = [{"workers": 32, "rounds": 1, "round": 1, "accuracy": 0.991, "seconds": 20.0}]
    rows = plan.predict(calibration, plan.accuracy_by_rounds([], fedavg), TARGET_ACCURACY)
    return results | {"plan": {"calibration": asdict(calibration), "rows": rows}}


def test_the_report_holds_every_target_says_a_quick_look_and_draws_both_charts(
    tmp_path: Path,
) -> None:
    results = json.loads(SAVED_RESULTS.read_text())
    text = write_outputs(results, tmp_path)
    assert text == (tmp_path / RESULTS_MD).read_text() == markdown(results)
    for target in results["targets"]:
        assert f"| {target['number']} | {target['target']} | {target['measured']} |" in text
    assert "A quick look" not in text
    quick = results | {"limit": 3000, "train_samples": 3000, "load_before": 6.5}
    assert markdown(quick).startswith(
        "**A quick look, not a result** (`--limit 3000`, load average 6.5"
    )
    from PIL import Image

    for name in ("results.png", PLAN_PNG):
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.size[0] >= 600
    assert json.loads((tmp_path / "results.json").read_text()) == results


def test_the_results_page_shows_the_benchmarks_own_results_between_its_markers() -> None:
    embedded = results_page.embedded((ROOT / "docs" / "results.md").read_text())
    assert embedded == (ROOT / "bench" / RESULTS_MD).read_text()
    begin, end = results_page.BEGIN, results_page.END
    text = f"# A\n\nbefore\n\n{begin}\nold\n{end}\n\nafter\n"
    updated = results_page.embed(text, "new table\n")
    assert updated == f"# A\n\nbefore\n\n{begin}\nnew table\n{end}\n\nafter\n"
    with pytest.raises(ValueError):
        results_page.embedded("# no markers\n")


def test_an_unknown_stage_is_one_usage_error() -> None:
    with pytest.raises(SystemExit) as stopped:
        make_parser().parse_args(["--only", "default,nonsense"])
    assert stopped.value.code == 2


# ---- contenders on tiny data, and the stages -----------------------------------------------------


def tiny_run(source: Path, **flags: object) -> list[str]:
    """A contender's arguments on 300 digits of the small MNIST, Adam at 0.003."""
    values = {"source": source, "limit": 300, "learning_rate": 0.003, **flags}
    return [f"--{name.replace('_', '-')}={value}" for name, value in values.items()]


@pytest.mark.slow  # trains
def test_centralized_training_stops_at_its_target(small_mnist: Path, capsys) -> None:
    from bench import centralized

    flags = tiny_run(small_mnist, epochs=3, batch=100, target=0.05)
    centralized.main(centralized.make_parser().parse_args(flags))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1 and lines[0]["epoch"] == 1 and lines[0]["accuracy"] >= 0.05


@pytest.mark.slow  # trains
def test_the_simulation_averages_rounds_until_the_target(small_mnist: Path, capsys) -> None:
    from bench import fedavg

    flags = tiny_run(small_mnist, epochs=1, batch=50, target=0.999, workers="2", rounds="1,2")
    fedavg.main(fedavg.make_parser().parse_args([*flags, "--final-learning-rate=0.001"]))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs = [(line["workers"], line["rounds"], line["round"]) for line in lines]
    assert runs == [(2, 1, 1), (2, 2, 1), (2, 2, 2)]
    assert all(0.0 <= line["accuracy"] <= 1.0 for line in lines)


def test_the_pages_benchmark_is_run_and_read_when_it_exists(tmp_path: Path, monkeypatch) -> None:
    from bench.run import Session, stage_preprocessing

    (tmp_path / "page_benchmark_stand_in.py").write_text(
        "import json, sys\n"
        "print('harder photos: 97.00% of 10000')\n"
        "print(json.dumps({'p50_ms': 12.5, 'targets': {'p50 < 20 ms': True, 'photos >= 98%': False}}))\n"
        "print(' '.join(sys.argv[1:]))\n"
        "sys.exit(1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    session = Session(
        make_parser().parse_args(["--source=/data/mnist.npz"]),
        tmp_path,
        {"runs": {}},
        model_uri=str(tmp_path / "0-default" / "store" / "models" / "mnist" / "LATEST"),
    )
    stage_preprocessing(session, module="page_benchmark_stand_in", flags=("--count=20",))
    found = session.results["preprocessing"]
    assert found["returncode"] == 1 and found["records"][0]["p50_ms"] == 12.5
    assert found["text"] == [
        "harder photos: 97.00% of 10000",
        "--source=/data/mnist.npz --count=20 --model-uri=<scratch>/0-default/store/models/mnist/LATEST",
    ]
    assert [(t["number"], t["target"], t["met"]) for t in session.extra_targets] == [
        ("P1", "p50 < 20 ms", True),
        ("P2", "photos >= 98%", False),
    ]
    stage_preprocessing(session, module="no_such_page_benchmark")  # absent: skipped, nothing lost
    assert session.results["preprocessing"] is found


def test_a_failed_stage_is_reported_and_the_others_still_run(
    small_mnist: Path, tmp_path: Path, monkeypatch
) -> None:
    from bench import run
    from bench.measure import ChildFailed

    done = []

    def failing(session: run.Session) -> None:
        raise ChildFailed("workflows.submit … failed (1):\nrun mnist-abcde Failed")

    # stand-ins for stages that would train for minutes
    monkeypatch.setitem(run.STAGE_FUNCTIONS, "default", failing)
    monkeypatch.setitem(run.STAGE_FUNCTIONS, "workers-2", lambda session: done.append("workers-2"))
    argv = [f"--source={small_mnist}", "--only=default,workers-2", f"--out-dir={tmp_path}"]
    assert run.main(argv) == 1 and done == ["workers-2"]
    text = (tmp_path / RESULTS_MD).read_text()
    failed = "**Stages that failed** (their targets are not measured): default (ChildFailed: "
    assert f"{failed}workflows.submit" in text
    assert (
        "| 1 | defaults: test accuracy ≥ 99.0% on every seed (aim: mean 99.2%) | not measured |"
        in text
    )
