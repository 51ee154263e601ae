"""The images' benchmark (bench/images.py) and the plan's first runs, on a recorded result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import images, plan
from bench.report import markdown
from tests.test_bench import fake_results

MB = 1_000_000


def layer(digest: str, megabytes: int) -> dict:
    return {"digest": f"sha256:{digest}", "bytes": megabytes * MB}


def recorded(shared: int = 40) -> dict:
    """A result of bench/images.py: 100 MB and 400 MB compressed, sharing `shared` MB of base layers."""
    base = [layer("base", shared)]
    return {
        "measured": "2026-12-01 15:00 UTC",
        "engine": "podman",
        "cpu_count": 2,
        "load_average": 1.0,
        "repeat": 3,
        "images": {
            "steps": {
                "image": "mnist-argo-steps:0.1.0",
                "bytes": 330 * MB,
                "compressed_bytes": 100 * MB,
                "layers": [*base, layer("light", 100 - shared)],
                "unpack_seconds": 4.0,
            },
            "train": {
                "image": "mnist-argo-train:0.1.0",
                "bytes": 1190 * MB,
                "compressed_bytes": 400 * MB,
                "layers": [*base, layer("tensorflow", 400 - shared)],
                "unpack_seconds": 16.0,
            },
            "page": {
                "image": "mnist-argo-page:0.1.0",
                "bytes": 700 * MB,
                "compressed_bytes": 200 * MB,
                "layers": [*base, layer("page", 200 - shared)],
            },
        },
        "shared_bytes": {"steps+train": shared * MB},
        "starts": {
            "python alone": {"steps": 0.4, "train": 0.4},
            "split": {"steps": 0.6, "train": 0.6},
            "train": {"train": 3.1},
        },
    }


def test_fetching_an_image_is_its_bytes_at_the_registrys_rate_then_its_unpacking() -> None:
    sizes = recorded(shared=40)["images"]
    assert images.shared_bytes(sizes["steps"], sizes["train"]) == 40 * MB  # counted once
    assert images.shared_bytes(sizes["steps"], {"layers": [layer("other", 5)]}) == 0
    costs = plan.image_costs(recorded(shared=40))
    rate = plan.REGISTRY_BYTES_PER_SECOND
    assert costs.steps == pytest.approx(100 * MB / rate + 4.0)
    assert costs.train == pytest.approx(400 * MB / rate + 16.0)
    # a node holding the other image fetches and unpacks only the layers it lacks
    assert costs.steps_beside_train == pytest.approx(60 * MB / rate + 4.0 * 60 / 100)
    assert costs.train_beside_steps == pytest.approx(360 * MB / rate + 16.0 * 360 / 400)


def test_the_first_run_adds_the_pulls_on_the_critical_path() -> None:
    costs = plan.image_costs(recorded())
    stream = plan.STREAM_START_SECONDS
    # one node: split's pull, then the trainer streams; the later light levels find the image there
    assert plan.first_run_extra(costs, 1, 2, "streamed") == pytest.approx(costs.steps + stream)
    assert plan.first_run_extra(costs, 1, 2, "pulled") == pytest.approx(
        costs.steps + costs.train_beside_steps
    )
    # eight nodes, two rounds: both aggregates, evaluate and publish may each land on a node without it
    assert plan.first_run_extra(costs, 8, 2, "streamed") == pytest.approx(
        costs.steps + stream + 4 * costs.steps_beside_train
    )
    # three nodes: at most the two nodes split and init left without the light image pull it
    assert plan.first_run_extra(costs, 3, 2, "pulled") == pytest.approx(
        costs.steps + costs.train + 2 * costs.steps_beside_train
    )
    # one TensorFlow image for every step: the first level pulls it, round 1 on fresh nodes again
    assert plan.first_run_extra(costs, 8, 2, "one image") == pytest.approx(2 * costs.train)
    assert plan.first_run_extra(costs, 1, 2, "one image") == pytest.approx(costs.train)
    with pytest.raises(ValueError):
        plan.first_run_extra(costs, 1, 1, "warm")


def test_the_plan_reads_the_requeue_time_where_up_sh_declares_it(tmp_path: Path) -> None:
    """One declaration: the plan follows infra/gke/config.sh's default, whatever it is."""
    config = tmp_path / "config.sh"
    config.write_text('ARGO_VERSION=v4.1.2\nREQUEUE_TIME="${REQUEUE_TIME:-3s}"\n')
    assert plan.configured_requeue_seconds(config) == 3.0
    config.write_text('REQUEUE_TIME="${REQUEUE_TIME:-2m}"\n')
    with pytest.raises(ValueError):
        plan.configured_requeue_seconds(config)


def test_the_report_shows_first_runs_beside_the_warm_run(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    path.write_text(json.dumps(recorded()))
    results = fake_results()
    c = plan.Calibration(**results["plan"]["calibration"])
    results["plan"] = plan.plan_details(c, results["plan"]["rows"], path)
    (row,) = [row for row in results["plan"]["rows"] if row["workers"] == 32]
    warm = row["predicted"]["2"]["seconds"]
    costs = plan.image_costs(recorded())
    assert row["first_run"]["streamed"] == pytest.approx(
        warm + plan.first_run_extra(costs, 32, row["rounds"], "streamed"), abs=0.1
    )
    text = markdown(results)
    assert "| Predicted, warm (requeue 2 s, as up.sh sets it) | First run on fresh nodes" in text
    assert "Warm, requeue 10 s (Argo's default) |" in text
    assert "steps 100 MB compressed (330 MB unpacked, in 4.0 s here)" in text
    # without a measurement of the images the plan shows the warm run only
    bare = plan.plan_details(c, results["plan"]["rows"], tmp_path / "missing.json")
    assert "images" not in bare and all("first_run" not in r for r in bare["rows"])


def test_the_images_report_prints_sizes_and_start_times() -> None:
    text = images.report(recorded())
    assert "| `mnist-argo-steps:0.1.0` | 330 MB | 100 MB | 2 | 4.0 s |" in text
    assert "| `mnist-argo-page:0.1.0` | 700 MB | 200 MB | 2 |  |" in text
    assert "| split | 0.60 s | 0.60 s |" in text
    assert "| train |  | 3.10 s |" in text
    assert "share 40 MB" in text


def test_without_an_engine_it_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ENGINE", str(tmp_path / "no-such-engine"))
    out = tmp_path / "images.json"
    assert images.main(["--repeat", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "not installed" in error[0]
    assert not out.exists()
