"""The publish step: every run it accepts kept whatever --serve decides, a published run never replaced,
LATEST moved by compare-and-swap, a killed publish's temporaries swept, and untrusted inputs refused."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from PIL import Image

from steps import publish
from steps.lib.entry_point import run
from steps.lib.registry import CONFUSION_FILE, LATEST_KEY, run_prefix
from steps.lib.storage import LocalStore
from tests.support.project import run_python
from tests.support.steps import FULL_RUN as FULL
from tests.support.steps import call, copy_model, flags, json_nested, latest, publish_as, write_json
from ui.images.picture import MAX_PICTURE_BYTES


def kept(tmp_path: Path, run_id: str) -> set[str]:
    folder = tmp_path / "store" / run_prefix(run_id)
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


def test_a_far_worse_run_is_kept_not_served_and_the_step_succeeds(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's quick try after `make run` once failed the run and threw its model away."""
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
    """A better run takes LATEST between our read and our swap: ours is judged again against it."""
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
    """Published again under its id, a 0.0901 model once replaced the served 0.9055 run's files."""
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
    """A publish killed before its model was copied completes on retry, keeping its first stamp."""
    assert publish_as(tmp_path, FULL, 0.9906, "--serve=never", capsys=capsys)[0] == 0
    folder = tmp_path / "store" / run_prefix(FULL)
    card = (folder / "run.json").read_text()
    (folder / "model.h5").unlink()
    code, error, served, _ = publish_as(tmp_path, FULL, 0.9906, capsys=capsys)
    assert (code, served) == (0, "true"), error
    assert (folder / "model.h5").is_file() and (folder / "run.json").read_text() == card


@pytest.mark.parametrize(("policy", "theirs"), [("always", 0.9990), ("if-better", 0.50)])
def test_latest_is_ordered_by_the_store_not_by_the_publishers_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, theirs: float
) -> None:
    """A run stamped a day ahead once kept LATEST against --serve always and a better run."""
    assert publish_as(tmp_path, "mnist-ahead", theirs, "--serve=always", capsys=capsys)[0] == 0
    store, key = LocalStore(tmp_path / "store"), f"{run_prefix('mnist-ahead')}/run.json"
    card = json.loads(store.read_text(key) or "")  # rewritten as if its publisher's clock ran ahead
    ahead = dt.datetime.fromisoformat(card["published_at"]) + dt.timedelta(days=1)
    store.write_text(key, json.dumps(card | {"published_at": ahead.isoformat()}))
    code, error, served, _ = publish_as(
        tmp_path, "mnist-later", 0.9055, f"--serve={policy}", capsys=capsys
    )
    assert (code, served) == (0, "true"), error
    assert latest(tmp_path) == "mnist-later"


def test_a_served_run_without_its_card_is_still_the_served_model(
    full_run_served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """if-better once took a served run without run.json for "no model" and served a 0.60 run."""
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
    """Only the publisher's own old temporaries go: a copy under way now is left alone."""
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


def publish_argv(tmp_path: Path, metrics: Path, *extra) -> list:
    model = copy_model(tmp_path / "model.h5")
    return [
        *flags(store=tmp_path / "store", run="mnist-abc12", model=model, metrics=metrics),
        *extra,
    ]


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        (b'{"accuracy": NaN}', "not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"accuracy": 1e400}', "number in [0, 1]"),
        (b'{"accuracy": true}', "number in [0, 1]"),
        (b'{"accuracy": 0.9, "confusion_matrix": [[1]]}', "10 rows of 10"),
        (json_nested(30_000).encode(), "nested too deeply"),
        (b'{"accuracy": 0.9, "note": "\xff\xfe"}', "not UTF-8"),
        (b'{"accuracy": 0.9, "loss": 1' + b"0" * 400 + b"}", "'loss' must be a finite number"),
        (b'{"accuracy": 0.9, "note": "' + b"x" * 100_000 + b'"}', "larger than 65536 bytes"),
        (b'{"accuracy": 0.9, "missing_shards": {"1": [3]}}', "lists of shard ids"),
    ],
)
def test_publish_refuses_poisoned_metrics(
    metrics: bytes, message: str, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(metrics)
    line = call(publish, publish_argv(tmp_path, path), capsys)
    assert message in line
    assert not (tmp_path / "store").exists()


def test_publish_refuses_bad_settings_and_run_ids(tmp_path: Path, capsys) -> None:
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    for setting, message in [
        ("workers", "expected NAME=VALUE"),
        ('{"workers": 3}=1', "expected NAME=VALUE"),
        ("source=" + "x" * 1025, "at most 1024 characters"),
    ]:
        argv = publish_argv(tmp_path, metrics, "--setting", setting)
        assert message in call(publish, argv, capsys)
    argv = publish_argv(tmp_path, metrics, "--setting", "epochs=1", "--setting", "epochs=400")
    assert "--setting epochs is given twice" in call(publish, argv, capsys)
    argv = publish_argv(tmp_path, metrics)
    argv[argv.index("mnist-abc12")] = "a" * 5000
    assert "(63 at most)" in call(publish, argv, capsys)
    argv[argv.index("a" * 5000)] = "../up"
    assert "use lowercase letters" in call(publish, argv, capsys)
    assert not (tmp_path / "store").exists()


def png(mode: str, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("picture", "message"),
    [
        (png("L", (2100, 2000)), "up to 4 megapixels"),
        (png("L", (16, 16)) + bytes(MAX_PICTURE_BYTES), f"larger than {MAX_PICTURE_BYTES} bytes"),
        (b"\xff\xd8\xff\xe0 a JPEG named .png", "not a PNG"),
    ],
    ids=["too many pixels", "too big", "not a PNG"],
)
def test_publish_refuses_a_confusion_picture_the_page_would_not_show(
    picture: bytes, message: str, tmp_path: Path, capsys
) -> None:
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    attachment = tmp_path / CONFUSION_FILE
    attachment.write_bytes(picture)
    line = call(publish, publish_argv(tmp_path, metrics, "--attach", attachment), capsys)
    assert f"attachment {attachment}" in line and message in line, line
    assert not (tmp_path / "store").exists()


def published_card(store: Path, run: str = "mnist-abc12") -> dict:
    return json.loads((store / "models" / "mnist" / run / "run.json").read_text())


@pytest.mark.parametrize(
    "source",
    ['gs://data/a"b/mnist.npz', 'gs://data", "epochs": 400, "x": "/mnist.npz'],
    ids=["a quote", "a crafted folder name"],
)
def test_no_workflow_parameter_can_rewrite_the_card(
    source: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish's arguments as the local runner fills in their tags (plain text replacement, as Argo)."""
    from tests.support.steps import task_args
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_workflow

    settings = PipelineSettings(epochs=1, source=source, store=str(tmp_path / "store"))
    args = task_args(compile_workflow(settings), "publish")
    (tmp_path / "in").mkdir()
    copy_model(tmp_path / "in" / "model.h5")
    write_json(tmp_path / "in" / "metrics.json", {"accuracy": 0.9})
    (tmp_path / "in" / "confusion.png").write_bytes(png("RGB", (16, 16)))
    for attached in ("history.json", "history.png"):
        (tmp_path / "in" / attached).write_bytes(b"attached")
    monkeypatch.chdir(tmp_path)
    code = publish.main(publish.make_parser().parse_args(args))
    capsys.readouterr()
    assert code is None
    card = published_card(tmp_path / "store")["settings"]
    assert card["epochs"] == 1
    assert card["source"] == settings.source
    assert card["rounds"] == settings.rounds


def test_a_source_too_long_for_the_card_is_refused_at_submit() -> None:
    from workflows.pipeline.settings import defaults

    with pytest.raises(ValueError, match=r"MNIST_SOURCE=.*longer than 1024 characters"):
        defaults({"MNIST_SOURCE": "gs://bucket/" + "d" * 1020})
    assert defaults({"MNIST_SOURCE": "gs://bucket/" + "d" * 1000}).source.endswith("d")


def test_publish_publishes_only_what_the_page_accepts(tmp_path: Path, capsys) -> None:
    """publish and the page check run.json with the same functions (steps.lib.published)."""
    from ui.model_source import ModelKeeper, parse_model_uri

    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9, "test_samples": 10})
    source = "gs://bucket/" + "d" * 241
    argv = publish_argv(
        tmp_path, metrics, "--setting", f"source={source}", "--setting", "flag=true"
    )
    assert run(publish.main, publish.make_parser(), [str(a) for a in argv]) == 0, (
        capsys.readouterr()
    )
    assert published_card(tmp_path / "store")["settings"] == {"source": source, "flag": "true"}
    status = ModelKeeper(parse_model_uri(str(tmp_path / "store"))).refresh()
    assert status.problem is None and status.model.card["settings"]["source"] == source


def test_the_card_records_a_local_source_by_its_content_never_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steps.lib import mnist

    official, other = tmp_path / "mnist.npz", tmp_path / "other.npz"
    official.write_bytes(b"the official file")
    other.write_bytes(b"another file")
    monkeypatch.setattr(
        mnist, "KERAS_MNIST_SHA256", hashlib.sha256(b"the official file").hexdigest()
    )
    recorded = lambda source: publish.settings_from([f"source={source}"])["source"]  # noqa: E731
    assert recorded(official) == recorded(mnist.KERAS_MNIST_URL) == mnist.KERAS_MNIST_URL
    assert recorded(other) == f"sha256:{hashlib.sha256(b'another file').hexdigest()}"
    assert recorded("gs://bucket/mnist.npz") == "gs://bucket/mnist.npz"
    assert recorded(tmp_path / "gone.npz") == str(tmp_path / "gone.npz")  # the page shows no path


@pytest.mark.parametrize(
    ("stamp", "why"),
    [
        ("0001-01-01T00:00:00+14:00", "out of range"),  # astimezone raised OverflowError
        ("9999-12-31T23:59:59-14:00", "out of range"),
        ("2026-11-29T18:48:58", "no UTC offset"),
        ("yesterday", "not an ISO 8601 time"),
    ],
)
def test_a_published_at_the_page_cannot_convert_is_refused(stamp: str, why: str) -> None:
    from steps.lib.published import BadRunFile, read_card

    with pytest.raises(BadRunFile, match=why):
        read_card(json.dumps({"published_at": stamp}).encode(), "mnist-abc12")
    card = read_card(b'{"published_at": "2026-11-29T23:48:58+05:00"}', "mnist-abc12")
    assert card["published_at"] == "2026-11-29T18:48:58.000000+00:00"


def publish_process(tmp_path: Path, metrics: Path | None = None) -> tuple[int, str, float]:
    """publish in a fresh interpreter (a blocking open would hang it): exit code, stderr, peak MB."""
    metrics = metrics or write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    argv = [str(a) for a in publish_argv(tmp_path, metrics)]
    probe = (
        "import re, sys\nfrom steps import publish\nfrom steps.lib.entry_point import run\n"
        f"code = run(publish.main, publish.make_parser(), {argv!r})\n"
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "sys.exit(code)\n"
    )
    result = run_python(probe, timeout=20)
    return result.returncode, result.stderr.strip(), int(result.stdout or 0) / 1024


def test_publish_refuses_a_symlinked_pointer_lock(tmp_path: Path) -> None:
    pointers = tmp_path / "store" / "models" / "mnist"
    pointers.mkdir(parents=True)
    (pointers / ".LATEST.lock").symlink_to(tmp_path / "outside.lock")
    code, error, _ = publish_process(tmp_path)
    assert code == 2 and "the lock of models/mnist/LATEST" in error, error
    assert not (tmp_path / "outside.lock").exists()
    assert not (pointers / "LATEST").exists()


@pytest.mark.parametrize(
    "fifo", ["store/models/mnist/.LATEST.lock", "store/models/mnist/LATEST", "m.json"]
)
def test_a_fifo_never_blocks_publish(fifo: str, tmp_path: Path) -> None:
    (tmp_path / "store/models/mnist").mkdir(parents=True)
    os.mkfifo(tmp_path / fifo)
    code, error, _ = publish_process(tmp_path, tmp_path / fifo if fifo == "m.json" else None)
    assert code == 2 and "not a regular file" in error, error
    if not fifo.endswith(".lock"):  # found before anything is written
        assert not (tmp_path / "store/models/mnist/mnist-abc12").exists()


def test_a_huge_latest_is_not_read_whole_and_is_replaced(tmp_path: Path) -> None:
    """A sparse 400 MB LATEST: only its head is read, and as it names no run it is replaced."""
    pointers = tmp_path / "store" / "models" / "mnist"
    pointers.mkdir(parents=True)
    with (pointers / "LATEST").open("wb") as latest:
        latest.truncate(400 << 20)
    code, error, peak = publish_process(tmp_path)
    assert code == 0, error
    assert peak < 150, f"peak {peak:.0f} MB"
    assert (pointers / "LATEST").read_text() == "mnist-abc12"


def test_settings_never_become_nan() -> None:
    from steps.publish import typed

    assert typed("NaN") == "NaN" and typed("1e400") == "1e400" and typed("3") == 3
