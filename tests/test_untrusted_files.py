"""Files from untrusted hands, crafted as an attacker would: each is refused with the steps' one line and
exit 2, before it can cost memory, and nothing it names outside the step's own paths is read or written."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image

from steps import aggregate, evaluate, publish, split, train
from steps.lib.errors import StepError
from steps.lib.registry import CONFUSION_FILE
from tests.support.page import png_of_empty_chunks
from tests.support.project import run_python
from tests.support.steps import (
    call,
    copy_model,
    corrupt_deflate_npz,
    digits,
    files_in,
    json_nested,
    npy_header,
    raw_zip,
    shared_heap_names,
    weight_paths,
    wide_directory_npz,
    write_json,
    write_model_weights,
    write_npz,
    zip_bomb_npz,
)
from ui.images.picture import MAX_PICTURE_BYTES


def peak_memory_mb(code: str) -> tuple[float, str]:
    """Run `code` in a fresh interpreter; its peak resident memory (MB) and its stdout.

    The peak is the kernel's VmHWM, which starts afresh at exec (getrusage's ru_maxrss would carry
    the forking test process's own peak over).
    """
    probe = (
        f"{code}\n"
        "import re\n"
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    )
    result = run_python(probe)
    assert result.returncode == 0, result.stderr
    *lines, peak_kb = result.stdout.strip().splitlines()
    return int(peak_kb) / 1024, "\n".join(lines)


# --- .npz: declared sizes are checked before anything is inflated or allocated


def test_a_zip_bomb_shard_is_refused_without_inflating_it(tmp_path: Path) -> None:
    """0.8 MB on disk declaring 784 MB of images: refused from its header, at a small peak."""
    bomb = zip_bomb_npz(tmp_path / "bomb.npz", rows=1_000_000)
    assert bomb.stat().st_size < 1 << 20
    peak, output = peak_memory_mb(
        "from pathlib import Path\n"
        "from steps.lib.errors import StepError\n"
        "from steps.lib.shards import read_shard\n"
        "try:\n"
        f"    read_shard(Path({str(bomb)!r}))\n"
        "except StepError as error:\n"
        "    print(error)\n"
    )
    assert "more than 250000 rows" in output
    assert peak < 200, f"peak {peak:.0f} MB"


def test_a_central_directory_of_many_entries_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """300,000 directory entries (15 MB of file) all naming one member: zipfile built an object for
    each before split or a trainer could refuse the file (a million cost 635 MB and 10.6 s)."""
    wide = wide_directory_npz(tmp_path / "wide.npz", 300_000)
    peak, output = peak_memory_mb(
        "import zipfile\n"
        "from pathlib import Path\n"
        "from steps.lib.errors import StepError\n"
        "from steps.lib.shards import read_shard\n"
        "entries = []  # the directory entries zipfile parsed, each a ZipInfo\n"
        "make_entry = zipfile.ZipInfo.__init__\n"
        "zipfile.ZipInfo.__init__ = lambda self, *a, **k: entries.append(1) or make_entry(self, *a, **k)\n"
        "try:\n"
        f"    read_shard(Path({str(wide)!r}))\n"
        "except StepError as error:\n"
        "    print(error)\n"
        "print(len(entries))\n"
    )
    message, entries = output.splitlines()
    assert peak < 80, f"peak {peak:.0f} MB"  # 176 MB before the directory was bounded
    assert entries == "0"  # refused from the end record: not one entry parsed
    assert "central directory is 15300000 bytes" in message


def test_an_npy_header_declaring_a_huge_shape_is_one_line(tmp_path: Path, capsys) -> None:
    header = npy_header((10**12, 28, 28))
    labels = npy_header((2,)) + bytes(2)
    shard = raw_zip(
        tmp_path / "huge.npz",
        {
            "x.npy": (header + bytes(64), 0, len(header) + 64),
            "y.npy": (labels, 0, len(labels)),
        },
    )
    out = tmp_path / "out"
    line = call(
        evaluate,
        ["--model", copy_model(tmp_path / "m.h5"), "--test", shard, "--out-dir", out],
        capsys,
    )
    assert "more than 250000 rows" in line
    assert not out.exists()


def test_a_corrupt_deflate_stream_is_one_line(tmp_path: Path, capsys) -> None:
    shard = corrupt_deflate_npz(tmp_path / "corrupt.npz")
    line = call(
        train,
        [
            *("--shard", shard, "--model", copy_model(tmp_path / "m.h5")),
            *("--out", tmp_path / "o/m.h5", "--stats-out", tmp_path / "o/s.json"),
        ],
        capsys,
    )
    assert "not a readable .npz file" in line
    assert not (tmp_path / "o").exists()


def test_a_source_whose_members_lie_about_their_size_is_refused(tmp_path: Path, capsys) -> None:
    """The archive declares more bytes than the array holds: refused before reading."""
    x = npy_header((2, 28, 28)) + bytes(2 * 784)
    y = npy_header((2,)) + bytes(2)
    members = {
        "x_train.npy": (x, 0, len(x) + 10),
        "y_train.npy": (y, 0, len(y)),
        "x_test.npy": (x, 0, len(x)),
        "y_test.npy": (y, 0, len(y)),
    }
    source = raw_zip(tmp_path / "mnist.npz", members)
    line = call(
        split,
        [
            *("--source", source, "--workers", 1),
            *("--shards-dir", tmp_path / "s", "--test-out", tmp_path / "t.npz"),
        ],
        capsys,
    )
    assert "declares" in line
    assert files_in(tmp_path) == {"mnist.npz"}


# --- .h5 models: the known layout is checked before a weight is read


def replace_weight(path: Path, index: int, **dataset_options) -> Path:
    """Replace a model file's weight `index` by a dataset made with `dataset_options`."""
    name = weight_paths(path)[index]
    with h5py.File(path, "r+") as handle:
        del handle[name]
        handle.create_dataset(name, **dataset_options)
    return path


def models_folder(tmp_path: Path, *models: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for index, model in enumerate(models):
        os.replace(model, folder / f"{index}.h5")
        write_json(folder / f"{index}.json", {"samples": 100, "epochs": 1})
    return folder


def test_a_model_declaring_a_huge_weight_is_refused_before_allocation(tmp_path: Path) -> None:
    """A 2.6 GB dense kernel declared in a file of a few MB (chunked, never written)."""
    crafted = replace_weight(
        copy_model(tmp_path / "big.h5"), 4, shape=(1600, 400_000), dtype="f4", chunks=(16, 4000)
    )
    assert crafted.stat().st_size < 8 << 20
    folder = models_folder(tmp_path, crafted)
    peak, output = peak_memory_mb(
        "from steps import aggregate\n"
        "from steps.lib.entry_point import run\n"
        f"print(run(aggregate.main, aggregate.make_parser(), ['--models-dir', {str(folder)!r}, "
        f"'--out', {str(tmp_path / 'avg.h5')!r}]))\n"
    )
    assert output == "2"
    assert peak < 400, f"peak {peak:.0f} MB"
    assert not (tmp_path / "avg.h5").exists()


@pytest.mark.parametrize(
    ("craft", "message"),
    [
        ("external link", "not a hard link"),
        ("external storage", "plain contiguous"),
        ("lambda layer", "model_config"),
        ("nan", "NaN or infinite"),
    ],
)
def test_crafted_model_files_are_refused(craft: str, message: str, tmp_path: Path, capsys) -> None:
    model = copy_model(tmp_path / "crafted.h5")
    names = weight_paths(model)
    outside = tmp_path / "outside.bin"
    np.ones(32, np.float32).tofile(outside)
    with h5py.File(model, "r+") as handle:
        bias = handle[names[1]][()]
        if craft == "external link":
            del handle[names[1]]
            handle[names[1]] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/bias")
            with h5py.File(tmp_path / "other.h5", "w") as other:
                other["bias"] = bias
        elif craft == "external storage":  # the weight's bytes come from another file
            del handle[names[1]]
            handle.create_dataset(names[1], shape=(32,), dtype="f4", external=[(outside, 0, 128)])
        elif craft == "lambda layer":
            config = json.loads(handle.attrs["model_config"])
            config["config"]["layers"][6]["class_name"] = "Lambda"
            handle.attrs["model_config"] = json.dumps(config)
        elif craft == "nan":
            handle[names[1]][0] = np.nan
    folder = models_folder(tmp_path, model)
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert "not a model of this project's architecture" in line
    assert message in line
    assert not (tmp_path / "avg.h5").exists()


def test_names_pointing_at_one_big_heap_object_are_refused_before_they_are_read(
    tmp_path: Path,
) -> None:
    """64 variable-length layer names, each a 16-byte pointer to the same 4 MB heap object: the
    declared size passes any byte check, while reading the attribute materialised the object 64
    times (256 MB here; 1.98 GB with a 15 MB object, and 2048 references asked for about 30 GB).
    Every reader of model files (the page's loader, ui.predict, publish, evaluate, aggregate and
    train) goes through steps.lib.model_file.read_model_file."""
    model = shared_heap_names(copy_model(tmp_path / "heap.h5"), 64, 4 << 20)
    assert model.stat().st_size < 8 << 20
    peak, output = peak_memory_mb(
        "from steps.lib.model_file import read_weights\n"
        "from steps.lib.errors import StepError\n"
        "try:\n"
        f"    read_weights({str(model)!r})\n"
        "except StepError as error:\n"
        "    print(error)\n"
    )
    assert peak < 150, f"peak {peak:.0f} MB"
    assert "attribute layer_names holds 268435456 bytes of text" in output, output


@pytest.mark.parametrize("step", ["aggregate", "evaluate", "publish", "train", "page"])
def test_every_step_refuses_names_on_a_shared_heap_object(
    step: str, tmp_path: Path, capsys
) -> None:
    model = shared_heap_names(copy_model(tmp_path / "0.h5"), 8, 4 << 10)
    if step == "aggregate":
        folder = models_folder(tmp_path, model)
        line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    elif step == "evaluate":
        test_set = write_npz(tmp_path / "test.npz", **digits())
        argv = ["--model", model, "--test", test_set, "--out-dir", tmp_path / "out"]
        line = call(evaluate, argv, capsys)
    elif step == "publish":
        metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
        argv = publish_argv(tmp_path, metrics)
        argv[argv.index("--model") + 1] = model
        line = call(publish, argv, capsys)
    elif step == "train":
        shard = write_npz(tmp_path / "shard.npz", **digits())
        argv = ["--shard", shard, "--model", model, "--out", tmp_path / "out.h5"]
        line = call(train, [*argv, "--stats-out", tmp_path / "stats.json"], capsys)
    else:  # the page's loader, for a store's run or MODEL_URI naming a file (ui.predict too)
        from ui.model_source import ModelKeeper, parse_model_uri

        line = ModelKeeper(parse_model_uri(str(model))).refresh().problem
    assert "attribute layer_names holds 32768 bytes of text, more than 16384" in line


# Adam's step size as float32: inf. The loss of a batch is taken before its update, so one batch ends
# with a finite loss and non-finite weights, and a second batch's loss is NaN: each way a divergence
# can show, on any CPU.
INFINITE_STEP = "1e39"
DIVERGENCE = {
    "weights only (one batch)": (100, []),
    "the loss too (three batches)": (300, []),
    "with checkpoints (three batches)": (300, ["--checkpoint-key", "c/0.npz"]),
}


@pytest.mark.slow  # trains
@pytest.mark.parametrize("case", list(DIVERGENCE))
def test_a_diverging_trainer_says_so_in_one_line_and_writes_nothing(
    tmp_path: Path, small_mnist: Path, capsys, case: str
) -> None:
    from steps.lib.entry_point import run
    from steps.lib.mnist import load_mnist
    from steps.lib.shards import write_shard

    samples, extra = DIVERGENCE[case]
    train_digits, _ = load_mnist(small_mnist)
    write_shard(tmp_path / "shard.npz", train_digits.take(np.arange(samples)))
    argv = ["--shard", tmp_path / "shard.npz", "--model", copy_model(tmp_path / "start.h5")]
    argv += ["--learning-rate", INFINITE_STEP, "--batch", "100", "--epochs", "1"]
    argv += ["--out", tmp_path / "o/m.h5", "--stats-out", tmp_path / "o/s.json"]
    if extra:
        argv += ["--checkpoint-store", tmp_path / "store", *extra]
    assert run(train.main, train.make_parser(), [str(a) for a in argv]) == 2
    captured = capsys.readouterr()
    *_, last = captured.err.strip().splitlines()
    # the epoch's line is for the person watching: on stdout (steps/train.py's EpochLogger)
    epoch = next(line for line in captured.out.splitlines() if line.startswith("epoch 1/1: "))
    assert ("loss nan" in epoch) == (samples > 100), epoch  # the path the case is about was taken
    assert last == (
        f"python -m steps.train: error: training diverged on {tmp_path / 'shard.npz'}: its loss or "
        "weights became NaN or infinite; try a smaller --learning-rate"
    )
    assert not (tmp_path / "o").exists()
    assert not list((tmp_path / "store").rglob("*.npz")), "a diverged model was checkpointed"


# --- JSON: size, encoding, nesting, types and ranges


@pytest.mark.parametrize(
    ("stats", "message"),
    [
        (json_nested(10_000), "nested too deeply"),
        ('{"samples": 1' + "0" * 400 + "}", "in 1..250000"),
        ('{"samples": 1e300}', "in 1..250000"),
        ('{"samples": true}', "in 1..250000"),
        ('{"samples": NaN}', "not valid JSON"),
        ('{"samples": 250001}', "in 1..250000"),
        (b'{"samples": "\xff"}', "not UTF-8"),
    ],
)
def test_forged_sample_counts_do_not_count(
    stats: str | bytes, message: str, tmp_path: Path, capsys
) -> None:
    folder = models_folder(tmp_path, copy_model(tmp_path / "0.h5"))
    target = folder / "0.json"
    target.write_bytes(stats if isinstance(stats, bytes) else stats.encode())
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert "only 0 of 1 workers delivered a model" in line
    assert message in line
    assert not (tmp_path / "avg.h5").exists()


def test_fedavg_weighs_by_what_split_made_and_averages_only_the_expected_shards(
    tmp_path: Path, small_mnist: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """split and aggregate run as the compiled spec runs them, with what Argo would substitute: a
    worker claiming 250,000 samples for a 500-digit shard got nearly all the weight, and a stray
    7.h5 in the round's folder was averaged in. Now only shard 0 (true count) is averaged."""
    from steps.lib.entry_point import run
    from steps.lib.history import new_history
    from steps.lib.model_file import read_weights
    from workflows.local.spec import substitute, templates_by_name
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_workflow

    settings = PipelineSettings(workers=2, rounds=1, min_workers=1, source=str(small_mnist))
    workflow = compile_workflow(settings)
    templates = templates_by_name(workflow)
    values = {
        f"workflow.parameters.{p['name']}": p["value"]
        for p in workflow["spec"]["arguments"]["parameters"]
    } | {"workflow.name": "mnist-abc12"}
    monkeypatch.chdir(tmp_path)
    args = substitute(templates["split"]["container"]["args"], values, "split")
    assert run(split.main, split.make_parser(), args) == 0, capsys.readouterr().err
    for output in templates["split"]["outputs"]["parameters"]:
        path = tmp_path / output["valueFrom"]["path"].removeprefix("/work/")
        values[f"tasks.split.outputs.parameters.{output['name']}"] = path.read_text()
    task = next(
        task
        for template in workflow["spec"]["templates"]
        for task in template.get("dag", {}).get("tasks", [])
        if task["name"] == "aggregate-round-1"
    )
    for argument in task["arguments"]["parameters"]:
        values[f"inputs.parameters.{argument['name']}"] = substitute(
            argument["value"], values, "aggregate's arguments"
        )
    args = substitute(templates["aggregate"]["container"]["args"], values, "aggregate")
    folder = tmp_path / "in" / "models"
    folder.mkdir(parents=True)
    (tmp_path / "out" / "validation.npz").rename(
        tmp_path / "in" / "validation.npz"
    )  # as Argo would
    write_json(tmp_path / "in" / "history.json", new_history(dt.datetime.now(dt.UTC)))
    good = read_weights(copy_model(folder / "0.h5"))
    write_model_weights(copy_model(folder / "1.h5"), [-3 * w for w in good])
    write_model_weights(copy_model(folder / "7.h5"), [w + 1 for w in good])
    write_json(folder / "0.json", {"samples": 500, "epochs": 1})  # 2000 digits less 1000 held out
    write_json(folder / "1.json", {"samples": 250_000, "epochs": 1})
    write_json(folder / "7.json", {"samples": 500, "epochs": 1})
    assert run(aggregate.main, aggregate.make_parser(), args) == 0
    log = capsys.readouterr().err
    assert "ignoring 1.h5 as missing: its stats claim 250000 samples; split made 500" in log
    assert "ignoring 7.h5: not one of the expected shards" in log
    averaged = read_weights(tmp_path / "out" / "model.h5")
    assert all(np.allclose(a, b) for a, b in zip(averaged, good, strict=True))


def test_nested_json_arguments_are_one_line(tmp_path: Path, capsys) -> None:
    folder = models_folder(tmp_path, copy_model(tmp_path / "0.h5"))
    nested = json_nested()
    line = call(
        aggregate, ["--models-dir", folder, "--out", tmp_path / "a.h5", "--shards", nested], capsys
    )
    assert "--shards: JSON nested too deeply" in line
    test_set = write_npz(tmp_path / "test.npz", **digits())
    line = call(
        evaluate,
        [
            *("--model", folder / "0.h5", "--test", test_set),
            *("--out-dir", tmp_path / "out", "--missing-shards", nested),
        ],
        capsys,
    )
    assert "--missing-shards: JSON nested too deeply" in line
    assert files_in(tmp_path) == {"test.npz", "models", "models/0.h5", "models/0.json"}


def publish_argv(tmp_path: Path, metrics: Path, *extra) -> list:
    return [
        "--store",
        tmp_path / "store",
        "--run",
        "mnist-abc12",
        "--model",
        copy_model(tmp_path / "model.h5"),
        "--metrics",
        metrics,
        *extra,
    ]


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        (b'{"accuracy": NaN}', "not valid JSON"),
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


def test_publish_refuses_bad_settings_and_overlong_runs(tmp_path: Path, capsys) -> None:
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
    assert not (tmp_path / "store").exists()


def png(mode: str, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, format="PNG")
    return buffer.getvalue()


def padded_with_chunks(picture: bytes) -> bytes:
    """`picture` grown to the 2 MB a picture may be with empty chunks: 174,000 of them."""
    return png_of_empty_chunks(MAX_PICTURE_BYTES - len(picture), picture)


@pytest.mark.parametrize(
    ("picture", "message"),
    [
        (padded_with_chunks(png("RGB", (510, 510))), "over 10000 blocks"),
        (png("L", (2100, 2000)), "up to 4 megapixels"),
        (png("L", (16, 16)) + bytes(MAX_PICTURE_BYTES), f"larger than {MAX_PICTURE_BYTES} bytes"),
        (b"\xff\xd8\xff\xe0 a JPEG named .png", "not a PNG"),
        (png("RGB", (64, 64))[:60], "damaged or cut short"),
    ],
    ids=["174,221 empty chunks", "too many pixels", "too big", "not a PNG", "cut short"],
)
def test_publish_refuses_a_confusion_picture_the_page_would_not_show(
    picture: bytes, message: str, tmp_path: Path, capsys
) -> None:
    """The page reads the picture with an upload's bounds; publish refuses what it would refuse."""
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    attachment = tmp_path / CONFUSION_FILE
    attachment.write_bytes(picture)
    line = call(publish, publish_argv(tmp_path, metrics, "--attach", attachment), capsys)
    assert f"attachment {attachment}" in line and message in line, line
    assert not (tmp_path / "store").exists()


def test_publish_attaches_a_confusion_picture_the_page_shows(tmp_path: Path) -> None:
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    attachment = tmp_path / CONFUSION_FILE
    attachment.write_bytes(png("RGB", (510, 510)))
    publish.main(
        publish.make_parser().parse_args(
            map(str, publish_argv(tmp_path, metrics, "--attach", attachment))
        )
    )
    assert (
        tmp_path / "store" / "models" / "mnist" / "mnist-abc12" / CONFUSION_FILE
    ).read_bytes() == attachment.read_bytes()


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
    """The compiled publish template's arguments, with the parameters Argo would substitute (plain
    text replacement: workflow/common/util.go:SubstituteParams): a folder name holding a quote and
    JSON of its own was pasted into the --settings JSON, failing the run or rewriting the card."""
    from workflows.local.spec import substitute, templates_by_name
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_workflow

    settings = PipelineSettings(epochs=1, source=source)
    workflow = compile_workflow(settings)
    values = {
        f"workflow.parameters.{p['name']}": p["value"]
        for p in workflow["spec"]["arguments"]["parameters"]
    }
    values |= {"workflow.name": "mnist-abc12", "inputs.parameters.model": "unused"}
    values["workflow.parameters.store"] = str(tmp_path / "store")
    args = substitute(
        templates_by_name(workflow)["publish"]["container"]["args"], values, "publish"
    )
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
    """Not at the end of the run, by publish: the bound is steps.lib.published's, in one place."""
    from workflows.pipeline.settings import defaults

    with pytest.raises(ValueError, match=r"MNIST_SOURCE=.*longer than 1024 characters"):
        defaults({"MNIST_SOURCE": "gs://bucket/" + "d" * 1020})
    assert defaults({"MNIST_SOURCE": "gs://bucket/" + "d" * 1000}).source.endswith("d")


def test_publish_publishes_only_what_the_page_accepts(tmp_path: Path, capsys) -> None:
    """publish and the page check run.json and metrics.json with the same functions (steps.lib.published):
    a 253-character source, a boolean setting and a 100 KB metrics.json were published and then
    refused by the page."""
    from ui.model_source import ModelKeeper, parse_model_uri

    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9, "test_samples": 10})
    source = "gs://bucket/" + "d" * 241
    argv = publish_argv(
        tmp_path, metrics, "--setting", f"source={source}", "--setting", "flag=true"
    )
    assert run_ok(publish, argv, capsys)
    assert published_card(tmp_path / "store")["settings"] == {"source": source, "flag": "true"}
    status = ModelKeeper(parse_model_uri(str(tmp_path / "store"))).refresh()
    assert status.problem is None and status.model.card["settings"]["source"] == source


def test_the_card_records_a_local_source_by_its_content_never_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make's runs gave the copy beside the project, runs by hand the Keras URL: the same data, shown as
    two sources, one of them a path of the server's disk."""
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


def publish_process(
    tmp_path: Path, *extra: str, metrics: Path | None = None
) -> tuple[int, str, float]:
    """Run publish in a fresh interpreter, at most 20 s (a blocking open would hang it): its exit
    code, its stderr, and its peak resident memory in MB."""
    metrics = metrics or write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    argv = [str(a) for a in publish_argv(tmp_path, metrics, *extra)]
    probe = (
        "import re, sys\n"
        "from steps import publish\n"
        "from steps.lib.entry_point import run\n"
        f"code = run(publish.main, publish.make_parser(), {argv!r})\n"
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "sys.exit(code)\n"
    )
    result = run_python(probe, timeout=20)
    return result.returncode, result.stderr.strip(), int(result.stdout or 0) / 1024


def test_publish_refuses_a_symlinked_pointer_lock(tmp_path: Path) -> None:
    """.LATEST.lock linking out of the store: opening it created a file outside."""
    pointers = tmp_path / "store" / "models" / "mnist"
    pointers.mkdir(parents=True)
    (pointers / ".LATEST.lock").symlink_to(tmp_path / "outside.lock")
    code, error, _ = publish_process(tmp_path)
    assert code == 2 and "the lock of models/mnist/LATEST" in error, error
    assert not (tmp_path / "outside.lock").exists()
    assert not (pointers / "LATEST").exists()


@pytest.mark.parametrize("fifo", ["lock", "LATEST", "metrics"])
def test_a_fifo_never_blocks_publish(fifo: str, tmp_path: Path) -> None:
    """A FIFO as the pointer's lock, as LATEST or as --metrics: each open waited for a writer forever."""
    pointers = tmp_path / "store" / "models" / "mnist"
    pointers.mkdir(parents=True)
    path = {
        "lock": pointers / ".LATEST.lock",
        "LATEST": pointers / "LATEST",
        "metrics": tmp_path / "fifo.json",
    }[fifo]
    os.mkfifo(path)
    code, error, _ = publish_process(tmp_path, metrics=path if fifo == "metrics" else None)
    assert code == 2 and "not a regular file" in error, error
    if fifo != "lock":  # found before anything is written
        assert not (pointers / "mnist-abc12").exists()


def test_a_huge_latest_is_not_read_whole_and_is_replaced(tmp_path: Path) -> None:
    """A 400 MB LATEST (sparse) was read whole before it was compared; now its head is read, and a
    LATEST that names no run is replaced."""
    pointers = tmp_path / "store" / "models" / "mnist"
    pointers.mkdir(parents=True)
    with (pointers / "LATEST").open("wb") as latest:
        latest.truncate(400 << 20)
    code, error, peak = publish_process(tmp_path)
    assert code == 0, error
    assert peak < 150, f"peak {peak:.0f} MB"
    assert (pointers / "LATEST").read_text() == "mnist-abc12"


def run_ok(module, argv: list, capsys) -> bool:
    from steps.lib.entry_point import run

    code = run(module.main, module.make_parser(), [str(a) for a in argv])
    error = capsys.readouterr().err
    assert code == 0, error
    return True


def test_settings_never_become_nan(tmp_path: Path, capsys) -> None:
    from steps.publish import typed

    assert typed("NaN") == "NaN" and typed("1e400") == "1e400" and typed("3") == 3


# --- checkpoints: a forged one is ignored with a warning, never trusted


@pytest.fixture
def trainer_inputs(tmp_path: Path, small_mnist: Path) -> dict:
    from steps.lib.mnist import load_mnist
    from steps.lib.shards import write_shard

    train_digits, _ = load_mnist(small_mnist)
    write_shard(tmp_path / "shard.npz", train_digits.take(np.arange(200)))
    return {
        "shard": tmp_path / "shard.npz",
        "model": copy_model(tmp_path / "start.h5"),
        "store": tmp_path / "store",
        "key": "run/checkpoints/0.npz",
        "epochs": 1,
    }


def forge_checkpoint(inputs: dict, record: dict, weights: list | None = None) -> object:
    """A checkpoint whose fingerprint matches train's inputs, with a `record` of our choosing; the
    compiled model it was made for."""
    from steps.lib.keras_model import compile_model, load_model

    model = compile_model(load_model(inputs["model"]), 1e-3)
    model.optimizer.build(model.trainable_variables)
    arrays = {f"w{i}": w for i, w in enumerate(weights or model.get_weights())}
    arrays |= {f"o{i}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
    record.setdefault("inputs", fingerprint_of(inputs))
    path = inputs["store"] / inputs["key"]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, meta=np.array(json.dumps(record)), **arrays)
    return model


def fingerprint_of(inputs: dict) -> str:
    from steps.lib.checkpoint import fingerprint

    return fingerprint(inputs["shard"], inputs["model"], f"{inputs['epochs']} 50 0.001")


def run_trainer(inputs: dict, out: Path, capsys) -> str:
    from steps.lib.entry_point import run

    argv = [
        *("--shard", inputs["shard"], "--model", inputs["model"], "--epochs", inputs["epochs"]),
        *("--batch", 50, "--learning-rate", 0.001),  # as forge_checkpoint's fingerprint has it
        *("--out", out / "model.h5", "--stats-out", out / "stats.json"),
        *("--checkpoint-store", inputs["store"], "--checkpoint-key", inputs["key"]),
    ]
    code = run(train.main, train.make_parser(), [str(a) for a in argv])
    error = capsys.readouterr().err
    assert code == 0, error
    return error


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"epochs_done": 99, "logs": {}}, "epochs_done must be an integer in 1..1"),
        ({"epochs_done": "1", "logs": {}}, "epochs_done must be an integer"),
        ({"epochs_done": True, "logs": {}}, "epochs_done must be an integer"),
        ({"epochs_done": 1, "logs": 5}, "logs must be an object"),
        ({"epochs_done": 1, "logs": {"samples": 10**9}}, "logs must be an object of loss"),
        ({"epochs_done": 1, "logs": {"loss": "x"}}, "logs must hold finite, non-negative numbers"),
        # math.isfinite(10**400) raised OverflowError: every retry crashed on the same checkpoint
        ({"epochs_done": 1, "logs": {"loss": 10**400}}, "logs must hold finite, non-negative"),
        (
            {"epochs_done": 1, "logs": {}, "inputs": ["not", "a", "string"]},
            "it was made from other",
        ),
        (
            {"epochs_done": 1, "logs": {}, "history": {"loss": [0.1], "seconds": [1.0]}},
            "its history must hold the columns loss, accuracy",
        ),
        (
            {"epochs_done": 1, "logs": {}, "history": {"loss": [0.1, 0.2], "accuracy": [0.5, 0.6]}},
            "its history has values for 2 epochs, not 1",
        ),
        ({"epochs_done": 1, "logs": {"loss": 0.1}, "nan": True}, "it holds NaN or infinite values"),
    ],
)
def test_a_forged_checkpoint_is_ignored_saying_why(
    record: dict, why: str, trainer_inputs: dict, capsys
) -> None:
    from steps.lib.checkpoint import restore
    from steps.lib.model_file import read_weights

    weights = None
    if record.pop("nan", False):
        weights = read_weights(trainer_inputs["model"])
        weights[2][:] = np.nan
    model = forge_checkpoint(trainer_inputs, record, weights)
    path = trainer_inputs["store"] / trainer_inputs["key"]
    assert restore(model, fingerprint_of(trainer_inputs), 1, path) is None
    assert f"ignoring the stored checkpoint: {why}" in capsys.readouterr().err


@pytest.mark.slow  # trains
def test_a_trainer_given_a_forged_checkpoint_ignores_it_and_trains(
    trainer_inputs: dict, tmp_path: Path, capsys
) -> None:
    from steps.lib.model_file import read_weights

    forge_checkpoint(trainer_inputs, {"epochs_done": 99, "logs": {}})
    error = run_trainer(trainer_inputs, tmp_path / "out", capsys)
    assert "ignoring the stored checkpoint: epochs_done must be an integer in 1..1" in error
    assert "resuming" not in error
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["samples"] == 200
    trained, start = read_weights(tmp_path / "out/model.h5"), read_weights(trainer_inputs["model"])
    assert not all(np.array_equal(a, b) for a, b in zip(trained, start, strict=True))


def test_a_finished_checkpoint_is_used_and_cannot_change_the_sample_count(
    trainer_inputs: dict, tmp_path: Path, capsys
) -> None:
    """epochs_done == epochs: a trainer that finished and failed after; its weights are kept."""
    forge_checkpoint(trainer_inputs, {"epochs_done": 1, "logs": {"loss": 0.25, "accuracy": 0.5}})
    error = run_trainer(trainer_inputs, tmp_path / "out", capsys)
    assert "resuming from checkpoint: 1 epoch(s) done" in error
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats == {"loss": 0.25, "accuracy": 0.5, "epochs": 1, "samples": 200}
    assert list(stats)[-1] == "samples"


# --- the folder store stays inside its root


def test_the_folder_store_refuses_paths_through_symlinks_out_of_its_root(tmp_path: Path) -> None:
    from steps.lib.storage import open_store

    root, outside = tmp_path / "store", tmp_path / "outside"
    (root / "models").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "models" / "mnist").symlink_to(outside)
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    store = open_store(root)
    for action in (
        lambda: store.write_text("models/mnist/LATEST", "x"),
        lambda: store.upload_file(outside / "secret.txt", "models/mnist/run/model.h5"),
        lambda: store.read_text("leak.txt"),
        lambda: store.download_file("leak.txt", tmp_path / "copy.txt"),
        lambda: store.list_keys(".."),
        lambda: store.list_keys("models/mnist"),
        lambda: store.write_if_generation("models/mnist/LATEST", "x", 0),
    ):
        with pytest.raises(StepError, match=r"invalid artifact key|leads outside the store"):
            action()
    assert store.list_keys("") == []
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (tmp_path / "copy.txt").exists()


def test_listing_does_not_follow_symlinks(tmp_path: Path) -> None:
    from steps.lib.storage import open_store

    root, outside = tmp_path / "store", tmp_path / "outside"
    (root / "run").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "run" / "own.txt").write_text("own")
    (root / "run" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "run" / "folder").symlink_to(outside)
    assert open_store(root).list_keys("run") == ["run/own.txt"]


def test_publish_through_a_symlinked_store_folder_writes_nothing_outside(
    tmp_path: Path, capsys
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "store" / "models").mkdir(parents=True)
    (tmp_path / "store" / "models" / "mnist").symlink_to(outside)
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.9})
    line = call(publish, publish_argv(tmp_path, metrics), capsys)
    assert "leads outside the store" in line
    assert list(outside.iterdir()) == []


def test_download_dir_keeps_stored_names_inside_the_target(tmp_path: Path) -> None:
    """GCS allows an object named 'run/x/../../escape.txt': it must not land outside the target.

    A stand-in listing: the GCS emulator drops the connection on such a name, real GCS stores it.
    """
    from steps.lib.storage import download_dir

    class Listing:
        uri = "gs://bucket"

        def list_keys(self, prefix: str) -> list[str]:
            return [f"{prefix}../../escape.txt"]

        def download_file(self, key: str, local: Path) -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text("escaped")

    with pytest.raises(StepError, match="invalid artifact key"):
        download_dir(Listing(), "run/x", tmp_path / "in" / "models")
    assert files_in(tmp_path) == set()
