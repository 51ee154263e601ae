"""The benchmark's own logic on made-up numbers: parsing the runner's output, the tables, the picture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from bench.pipeline_run import overhead, parse_runner_output, task_kind
from bench.report import markdown, time_to, write_outputs
from bench.run import targets
from bench.seed_method import build_seed_model, unweighted_average

RUNNER_OUTPUT = [
    (1.0, "run mnist-abcde: 9 tasks, parallelism 2, store /s, logs /l"),
    (1.2, "    0.0s  started  split"),
    (6.0, "    4.8s  done     split (4.8s)"),
    (20.0, "   18.8s  done     train-round-1(0:0) (12.0s)"),
    (21.0, "   19.8s  done     train-round-1(1:1) (13.0s)"),
    (25.5, "   24.3s  done     aggregate-round-1 (4.5s)"),
    (40.0, "   38.8s  done     train-round-2(0:0) (11.0s)"),
    (41.0, "   39.8s  done     train-round-2(1:1) (12.0s)"),
    (45.0, "   43.8s  done     aggregate-round-2 (4.0s)"),
    (52.0, "run mnist-abcde Succeeded in 51.0s"),
]


def run_record(accuracy: float, curve: list[tuple[float, float]], **extra: object) -> dict:
    return {
        "accuracy": accuracy,
        "wall_seconds": 100.0,
        "cpu_seconds": 150.0,
        "peak_rss_mb": 900,
        "curve": [{"seconds": s, "accuracy": a} for s, a in curve],
        "settings_text": "workers 3",
        "cpu_count": 2,
        "loadavg_before": [1.5, 1.0, 0.5],
        "loadavg_after": [2.5, 1.2, 0.6],
        **extra,
    }


def fake_results() -> dict:
    return {
        "started": "2026-01-01 00:00 UTC",
        "train_samples": 60000,
        "machine": {"cpu_count": 2, "tensorflow": "2.x"},
        "runs": {
            "seed_method": run_record(0.8731, [(90.0, 0.8731)]),
            "pipeline_default": run_record(
                0.9912,
                [(40.0, 0.981), (80.0, 0.9904), (120.0, 0.9912)],
                outside_training_share=0.25,
            ),
            "centralized": run_record(0.992, [(30.0, 0.985), (60.0, 0.9901), (90.0, 0.992)]),
        },
    }


def test_runner_output_gives_durations_round_times_and_run() -> None:
    parsed = parse_runner_output(RUNNER_OUTPUT)
    assert parsed["run"] == "mnist-abcde"
    assert parsed["round_ready"] == {1: 25.5, 2: 45.0}
    assert parsed["durations"]["train-round-2(1:1)"] == 12.0
    assert len(parsed["durations"]) == 7
    assert [task_kind(n) for n in ("train-round-2(1:1)", "aggregate-round-1", "split")] == [
        "train",
        "aggregate",
        "split",
    ]


def test_overhead_is_the_task_time_outside_the_logged_epochs(tmp_path: Path) -> None:
    (tmp_path / "train-round-1-0-0.log").write_text(
        "training on in/shard.npz (20000 samples), 1 epoch(s), batch 64\n"
        "epoch 1/1: accuracy 0.9500 loss 0.1000 (9.0 s)\n"
    )
    (tmp_path / "train-round-1-1-1.log").write_text(
        "epoch 1/2: loss 0.2 (5.5 s)\nepoch 2/2: (5.5 s)\n"
    )
    durations = parse_runner_output(RUNNER_OUTPUT)["durations"]
    cost = overhead(durations, tmp_path)
    assert cost["training_seconds"] == 20.0
    assert cost["task_seconds"] == 61.3
    assert cost["outside_training_share"] == round(1 - 20.0 / 61.3, 3)
    assert cost["tasks"] == {"split": 1, "train": 4, "aggregate": 2}


def test_time_to_target_is_the_first_point_at_or_above_it() -> None:
    curve = [{"seconds": 10.0, "accuracy": 0.98}, {"seconds": 20.0, "accuracy": 0.99}]
    assert time_to(curve) == 20.0
    assert time_to(curve, 0.995) is None


def test_targets_compare_the_pipeline_with_centralized_training() -> None:
    checks = {c["target"].split(":")[0]: c for c in targets(fake_results()["runs"])}
    assert checks["defaults"]["met"] and checks["defaults"]["measured"] == "99.12%"
    assert checks["time to 99%"]["measured"] == "1.33x"  # 80 s against 60 s
    assert not checks["time to 99%"]["met"]
    assert checks["every step process ≤ 1.5 GB peak RSS"]["met"]


def test_outputs_hold_the_numbers(tmp_path: Path) -> None:
    results = fake_results() | {"targets": targets(fake_results()["runs"])}
    text = write_outputs(results, tmp_path)
    assert text == (tmp_path / "results.md").read_text() == markdown(results)
    assert (
        "| Pipeline, defaults | workers 3 | 99.12% | 80 s | 100 s | 150 s | 900 MB | 25% |" in text
    )
    assert "| Seed's method | workers 3 | 87.31% | not reached |" in text
    assert (
        json.loads((tmp_path / "results.json").read_text())["runs"]["centralized"]["accuracy"]
        == 0.992
    )
    image = Image.open(tmp_path / "results.png")
    assert image.size == (900, 560)
    # the lines are drawn: the picture holds each method's colour, not only black on white
    colours = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=1 << 16)}
    assert {(40, 100, 200), (40, 150, 70), (200, 60, 60)} <= colours


def test_seed_model_is_the_classic_keras_mnist_cnn() -> None:
    model = build_seed_model()
    assert model.count_params() == 1_199_882  # Keras' mnist_cnn example, as the seed trained it
    assert model.optimizer.__class__.__name__ == "Adadelta"


def test_unweighted_average_is_the_plain_mean() -> None:
    first = [np.zeros((2, 2)), np.array([1.0])]
    second = [np.ones((2, 2)) * 4, np.array([3.0])]
    averaged = unweighted_average([first, second])
    assert np.array_equal(averaged[0], np.full((2, 2), 2.0))
    assert np.array_equal(averaged[1], np.array([2.0]))
