"""When a published run becomes the served model (publish's --serve, steps.lib.serving), and serving a
kept run anyway (steps.serve): a worse or partial run is kept under its run, LATEST stays, the step
succeeds and says why as data (--served-out, --reason-out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steps import publish
from steps.lib.entry_point import run
from steps.lib.registry import LATEST_KEY, run_prefix
from steps.lib.storage import LocalStore
from tests.support.steps import call, copy_model, write_json

FULL = "mnist-full1"


def publish_as(
    tmp_path: Path,
    run_id: str,
    accuracy: float,
    *extra: str,
    missing: dict | None = None,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str, str]:
    """Publish a model scoring `accuracy` as `run_id`: exit code, stderr, and the served and reason
    outputs."""
    folder = tmp_path / run_id
    folder.mkdir()
    metrics = {"accuracy": accuracy} | ({"missing_shards": missing} if missing else {})
    argv = [
        *("--store", tmp_path / "store", "--run", run_id),
        *("--model", copy_model(folder / "model.h5")),
        *("--metrics", write_json(folder / "metrics.json", metrics)),
        *("--served-out", folder / "out" / "served.txt"),
        *("--reason-out", folder / "out" / "reason.txt"),
        *extra,
    ]
    code = run(publish.main, publish.make_parser(), [str(a) for a in argv])
    error = capsys.readouterr().err
    served = folder / "out" / "served.txt"
    reason = folder / "out" / "reason.txt"
    return (
        code,
        error,
        served.read_text() if served.exists() else "",
        reason.read_text() if reason.exists() else "",
    )


def latest(tmp_path: Path) -> str:
    return (tmp_path / "store" / LATEST_KEY).read_text()


def kept(tmp_path: Path, run_id: str) -> set[str]:
    folder = tmp_path / "store" / run_prefix(run_id)
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


@pytest.fixture
def full_run_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store whose LATEST serves a complete run scoring 0.9906, as after `make run`."""
    code, error, served, _ = publish_as(tmp_path, FULL, 0.9906, "--setting=limit=0", capsys=capsys)
    assert (code, served) == (0, "true"), error
    return tmp_path


def test_a_far_worse_run_is_kept_not_served_and_the_step_succeeds(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's quick try after `make run`: publish exited 2 ("more than --max-accuracy-drop
    0.05 below"), the run Failed, and its model was thrown away."""
    code, error, served, reason = publish_as(full_run_served, "mnist-quick", 0.7290, capsys=capsys)
    assert code == 0, error
    assert served == "false"
    assert "0.7290" in reason and FULL in reason and "\n" not in reason
    assert latest(full_run_served) == FULL
    assert {"model.h5", "metrics.json", "run.json"} <= kept(full_run_served, "mnist-quick")
    assert "python -m steps.serve mnist-quick" in error


def test_a_partial_run_never_replaces_a_complete_one_by_default(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --limit 3000 run scoring 0.9485 became LATEST over 0.9906: within the 0.05 drop. Here
    it scores better than the complete run, and still is not served."""
    code, error, served, reason = publish_as(
        full_run_served, "mnist-limit", 0.9990, "--setting=limit=3000", capsys=capsys
    )
    assert (code, served) == (0, "false"), error
    assert "partial run (--limit 3000)" in reason and FULL in reason
    assert latest(full_run_served) == FULL


def test_a_run_missing_workers_is_partial(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, error, served, reason = publish_as(
        full_run_served, "mnist-short", 0.9990, missing={"1": ["2"]}, capsys=capsys
    )
    assert (code, served) == (0, "false"), error
    assert "round 1 without shard 2" in reason
    assert latest(full_run_served) == FULL


def test_a_better_complete_run_is_served(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, error, served, reason = publish_as(full_run_served, "mnist-best1", 0.9950, capsys=capsys)
    assert (code, served) == (0, "true"), error
    assert "above" in reason
    assert latest(full_run_served) == "mnist-best1"


@pytest.mark.parametrize(
    ("policy", "accuracy", "limit", "served"),
    [
        ("if-better", 0.9906, 0, "false"),  # as good is not better
        ("if-not-worse", 0.9500, 0, "true"),  # within the drop of 0.05
        ("if-not-worse", 0.9000, 0, "false"),
        ("if-not-worse", 0.9990, 3000, "false"),  # partial
        ("always", 0.3000, 3000, "true"),
        ("never", 0.9990, 0, "false"),
    ],
)
def test_each_policy(
    full_run_served: Path,
    capsys: pytest.CaptureFixture[str],
    policy: str,
    accuracy: float,
    limit: int,
    served: str,
) -> None:
    code, error, said, reason = publish_as(
        full_run_served,
        "mnist-other",
        accuracy,
        f"--serve={policy}",
        f"--setting=limit={limit}",
        capsys=capsys,
    )
    assert (code, said) == (0, served), error + reason
    assert latest(full_run_served) == ("mnist-other" if served == "true" else FULL)
    assert "run.json" in kept(full_run_served, "mnist-other")


def test_below_the_floor_nothing_is_served_even_when_nothing_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, error, served, reason = publish_as(tmp_path, "mnist-poor1", 0.151, capsys=capsys)
    assert (code, served) == (0, "false"), error
    assert "below --min-accuracy 0.5" in reason
    assert not (tmp_path / "store" / LATEST_KEY).exists()
    assert "model.h5" in kept(tmp_path, "mnist-poor1")


def test_a_partial_run_may_replace_a_worse_partial_one() -> None:
    from steps.lib.serving import Contender, decide

    served = Contender("mnist-a", 0.90, "--limit 3000")
    ours = Contender("mnist-b", 0.92, "--limit 6000")
    assert decide("if-better", ours, served, 0.5, 0.05).served
    assert not decide(
        "if-better", Contender("mnist-c", 0.95, "--limit 50"), None, 0.96, 0.05
    ).served


def test_the_policy_is_judged_against_the_run_that_holds_latest_when_it_is_swapped(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs publishing at once: a better run takes LATEST between our read and our swap. The
    swap fails on the generation, and our run is judged again against that better run."""
    from steps.lib.registry import move_latest

    store = LocalStore(full_run_served / "store")
    for run_id, accuracy in (("mnist-rival", 0.9990), ("mnist-ours1", 0.9950)):  # ours the later
        code, error, _, _ = publish_as(
            full_run_served, run_id, accuracy, "--serve=never", capsys=capsys
        )
        assert code == 0, error
    judged: list[str | None] = []
    real_write = store.write_if_generation

    def rival_first(key: str, text: str, generation: int) -> bool:
        if not judged[1:]:  # the first swap: the rival gets there first
            assert real_write(key, "mnist-rival", generation)
        return real_write(key, text, generation)

    store.write_if_generation = rival_first  # type: ignore[method-assign]

    def judge(current: str | None) -> str | None:
        judged.append(current)
        return None if current == FULL else f"{current} is better"

    moved = move_latest(store, "mnist-ours1", judge=judge)
    assert judged == [FULL, "mnist-rival"]
    assert (moved.latest, moved.refusal) == ("mnist-rival", "mnist-rival is better")


def test_a_kept_run_is_served_with_the_command_publish_printed(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from steps import serve

    publish_as(full_run_served, "mnist-quick", 0.7290, capsys=capsys)
    store = full_run_served / "store"
    code = run(serve.main, serve.make_parser(), ["mnist-quick", "--store", str(store)])
    out, error = capsys.readouterr()
    assert code == 0, error
    assert latest(full_run_served) == "mnist-quick"
    assert f"{LATEST_KEY} → mnist-quick" in out and f"was {FULL}" in out
    card = json.loads((store / run_prefix("mnist-quick") / "run.json").read_text())
    assert card["accuracy"] == 0.7290


def test_serving_a_run_that_is_not_published_is_refused(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from steps import serve

    store = full_run_served / "store"
    line = call(serve, ["mnist-nope1", "--store", store], capsys)
    assert "no run mnist-nope1 is published" in line
    (store / run_prefix("mnist-broke")).mkdir()
    (store / run_prefix("mnist-broke") / "run.json").write_text("{}")
    (store / run_prefix("mnist-broke") / "model.h5").write_bytes(b"not a model")
    line = call(serve, ["mnist-broke", "--store", store], capsys)
    assert "mnist-broke" in line
    assert latest(full_run_served) == FULL


def test_the_end_of_a_run_says_what_publish_decided_in_one_line() -> None:
    from steps.lib.defaults import STORE
    from workflows.run_end import serving_lines

    assert serving_lines("mnist-a", STORE, "true", "no model was served") == [
        "served: models/mnist/LATEST → mnist-a (no model was served)"
    ]
    [line] = serving_lines("mnist-a", "gs://bucket", "false", "--serve never")
    assert line.startswith("not served: --serve never; to serve it anyway: ")
    assert line.endswith("-m steps.serve mnist-a --store gs://bucket")
    [line] = serving_lines("mnist-a", STORE, "false", "--serve never")
    assert line.endswith("-m steps.serve mnist-a"), "the default store goes without saying"
    assert serving_lines("mnist-a", STORE, None, None) == [], "a publish without these outputs"
