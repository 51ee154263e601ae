"""The publish step: every run it accepts kept under models/mnist/<run>/ whatever --serve decides (the
step succeeds and says why as data: --served-out, --reason-out), a published run never replaced, LATEST
moved by the store's compare-and-swap against the run it replaces, a killed publish's temporaries swept."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from steps.lib.registry import LATEST_KEY, run_prefix
from steps.lib.storage import ArtifactStore, LocalStore, open_store
from tests.support.steps import FULL_RUN as FULL
from tests.support.steps import latest, publish_as


def kept(tmp_path: Path, run_id: str) -> set[str]:
    folder = tmp_path / "store" / run_prefix(run_id)
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


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
    assert "python -m steps.promote mnist-quick" in error


@pytest.mark.parametrize(
    ("policy", "accuracy", "extra", "metrics", "why"),
    [
        ("if-better", 0.9950, [], {}, "served: its test accuracy 0.9950 is above mnist-full1's"),
        ("if-better", 0.9906, [], {}, "not served: its test accuracy 0.9906 is not above"),
        ("if-not-worse", 0.9500, [], {}, "served: its test accuracy 0.9500 is within"),
        ("if-not-worse", 0.9000, [], {}, "not served: its test accuracy 0.9000 is more than"),
        # a partial run never replaces a complete one: a --limit 3000 run of 0.9485 once did
        ("if-better", 0.9990, ["--setting=limit=3000"], {}, "not served: it is a partial run"),
        ("if-not-worse", 0.9990, [], {"missing_shards": {"1": ["2"]}}, "round 1 without shard 2"),
        # a --source of 20 test digits its model reads right scored "1.0000 is above 0.9055"
        (
            "if-better",
            1.0,
            [],
            {"test_samples": 20, "test_sha256": "7" * 64},
            f"not served: its test set (20 digits) is not the one {FULL} was scored on (10000",
        ),
        ("always", 0.3000, ["--setting=limit=3000"], {}, "served: --serve always"),
        ("never", 0.9990, [], {}, "not served: --serve never"),
    ],
)
def test_each_policy(
    full_run_served: Path,
    capsys: pytest.CaptureFixture[str],
    policy: str,
    accuracy: float,
    extra: list[str],
    metrics: dict,
    why: str,
) -> None:
    code, error, served, reason = publish_as(
        full_run_served,
        "mnist-other",
        accuracy,
        f"--serve={policy}",
        *extra,
        capsys=capsys,
        **metrics,
    )
    assert code == 0 and why in error and reason in error, error
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


@pytest.mark.parametrize("policy", ["never", "if-better", "always"])
def test_a_published_run_is_never_replaced(
    full_run_served: Path, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    """Published again under its id, a 0.0901 model's files replaced the served 0.9055 run's, and
    the policy was never asked ("served: it was served already")."""
    folder = full_run_served / "store" / run_prefix(FULL)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    code, error, served, _ = publish_as(
        full_run_served, FULL, 0.0901, f"--serve={policy}", capsys=capsys
    )
    assert (code, served, error.count("\n")) == (2, "", 1), error
    assert f"run {FULL} is published already" in error
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert latest(full_run_served) == FULL


def test_a_publish_cut_short_completes_when_tried_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A publish killed before its model was copied is retried with the same files: it completes,
    and the card keeps the stamp of the first try."""
    assert publish_as(tmp_path, FULL, 0.9906, "--serve=never", capsys=capsys)[0] == 0
    folder = tmp_path / "store" / run_prefix(FULL)
    card = (folder / "run.json").read_text()
    (folder / "model.h5").unlink()
    code, error, served, _ = publish_as(tmp_path, FULL, 0.9906, capsys=capsys)
    assert (code, served) == (0, "true"), error
    assert (folder / "model.h5").is_file() and (folder / "run.json").read_text() == card


def stamp_a_day_ahead(store: ArtifactStore, run_id: str) -> None:
    """Rewrite `run_id`'s card as if its publisher's clock ran a day ahead."""
    key = f"{run_prefix(run_id)}/run.json"
    card = json.loads(store.read_text(key) or "")
    ahead = dt.datetime.fromisoformat(card["published_at"]) + dt.timedelta(days=1)
    store.write_text(key, json.dumps(card | {"published_at": ahead.isoformat()}))


@pytest.mark.parametrize(("policy", "theirs"), [("always", 0.9990), ("if-better", 0.50)])
def test_latest_is_ordered_by_the_store_not_by_the_publishers_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, theirs: float
) -> None:
    """A run stamped a day ahead kept LATEST against --serve always ("published after it, holds
    LATEST"); in a race, the 0.50 run stamped after the slow 0.9055 one kept LATEST and the 0.9055
    run was refused instead of judged against it."""
    assert publish_as(tmp_path, "mnist-ahead", theirs, "--serve=always", capsys=capsys)[0] == 0
    stamp_a_day_ahead(LocalStore(tmp_path / "store"), "mnist-ahead")
    code, error, served, _ = publish_as(
        tmp_path, "mnist-later", 0.9055, f"--serve={policy}", capsys=capsys
    )
    assert (code, served) == (0, "true"), error
    assert latest(tmp_path) == "mnist-later"


@pytest.mark.slow
def test_both_rules_hold_on_gcs(
    tmp_path: Path, strict_gcs_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On GCS (the emulator, generation preconditions enforced): LATEST follows the swaps, not the
    stamps, and a published run stays as it was."""
    on_gcs = f"--store=gs://{strict_gcs_bucket}"
    store = open_store(f"gs://{strict_gcs_bucket}")
    assert publish_as(tmp_path, "mnist-ahead", 0.50, on_gcs, capsys=capsys)[0] == 0
    stamp_a_day_ahead(store, "mnist-ahead")
    code, error, served, _ = publish_as(tmp_path, "mnist-later", 0.9055, on_gcs, capsys=capsys)
    assert (code, served) == (0, "true"), error
    code, error, _, _ = publish_as(tmp_path, "mnist-later", 0.0901, on_gcs, capsys=capsys)
    assert code == 2 and "run mnist-later is published already" in error, error
    metrics = json.loads(store.read_text(f"{run_prefix('mnist-later')}/metrics.json") or "")
    assert (metrics["accuracy"], store.read_text(LATEST_KEY)) == (0.9055, "mnist-later")


def test_a_served_run_without_its_card_is_still_the_served_model(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page showed a served run whose run.json was deleted; if-better took it for "no model
    served" and replaced it with a 0.60 run."""
    from steps.lib.registry import read_published

    (full_run_served / "store" / run_prefix(FULL) / "run.json").unlink()
    store = LocalStore(full_run_served / "store")
    assert read_published(store, FULL).accuracy == 0.9906  # what the page shows
    code, error, served, reason = publish_as(full_run_served, "mnist-poor", 0.60, capsys=capsys)
    assert (code, served) == (0, "false"), error
    assert f"not above {FULL}'s 0.9906" in reason


def test_stale_temporaries_of_a_killed_publish_are_swept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Publish killed mid-copy left its hidden temporary (3 after 8 kills), and nothing removed it.
    Only the publisher's own, and only old ones: a copy under way now is left alone."""
    folder = tmp_path / "store" / run_prefix("mnist-cut1")
    folder.mkdir(parents=True)
    day_ago = time.time() - 86_400

    def made(where: Path, name: str, stem: str = "", suffix: str = "", old: bool = True) -> Path:
        if stem:  # a temporary named as publish's copies name theirs (steps.lib.staged_outputs)
            handle, text = tempfile.mkstemp(prefix=f".{stem}.", suffix=suffix, dir=where)
            os.close(handle)
            path = Path(text)
        else:
            path = where / name
            path.write_bytes(b"x")
        if old:
            os.utime(path, (day_ago, day_ago))
        return path

    stale = [made(folder, "", "model", ".h5"), made(folder.parent, "", "LATEST")]
    kept_files = [
        made(folder, "", "metrics", ".json", old=False),  # a copy under way
        made(folder, ".model.h5.keep"),
        made(folder, "", "notes", ".txt"),  # not a file publish writes
        made(folder.parent, ".LATEST.lock"),
    ]
    code, error, _, _ = publish_as(tmp_path, FULL, 0.9906, capsys=capsys)
    assert code == 0, error
    assert [path.exists() for path in stale + kept_files] == [False] * 2 + [True] * 4
