"""Aggregate's own rules, each with inputs that tell right from wrong: sample counts at their bounds,
shards missing, forged stats, and the weights averaged by the counts the stats files give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from steps import aggregate
from steps.aggregate import MAX_SHARDS
from steps.lib.entry_point import run
from steps.lib.mnist import MAX_SAMPLES
from steps.lib.model_file import read_model_file
from tests.support.steps import (
    call,
    copy_model,
    json_nested,
    refused,
    task_args,
    write_json,
    write_model_weights,
)


def fan_in(tmp_path: Path, stats: dict[str, object]) -> Path:
    """A models folder: shard -> the `samples` its stats file holds."""
    folder = tmp_path / "models"
    folder.mkdir()
    for shard, samples in stats.items():
        copy_model(folder / f"{shard}.h5")
        write_json(folder / f"{shard}.json", {"samples": samples, "epochs": 1})
    return folder


def aggregate_ok(argv: list, capsys) -> str:
    assert run(aggregate.main, aggregate.make_parser(), [str(a) for a in argv]) == 0
    return capsys.readouterr().err


@pytest.mark.parametrize("samples", [1, MAX_SAMPLES])
def test_a_sample_count_at_either_bound_counts(tmp_path: Path, capsys, samples: int) -> None:
    folder = fan_in(tmp_path, {"0": samples})
    error = aggregate_ok(["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert f"averaged 1 models weighted by their shards' digits (0.h5: {samples})" in error


@pytest.mark.parametrize("samples", [0, -1, MAX_SAMPLES + 1, True, 1.0, "5", None])
def test_a_sample_count_out_of_bounds_or_not_an_integer_is_refused(
    tmp_path: Path, capsys, samples: object
) -> None:
    folder = fan_in(tmp_path, {"0": samples})
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert f"'samples' must be an integer in 1..{MAX_SAMPLES}, got {samples}" in line
    assert not (tmp_path / "avg.h5").exists()


def test_two_missing_shards_are_named_comma_separated(tmp_path: Path, capsys) -> None:
    """evaluate reads --missing-out split on ","; every missing shard is named, in the shards' order."""
    folder = fan_in(tmp_path, {"1": 100, "3": 100})
    argv = ["--models-dir", folder, "--out", tmp_path / "avg.h5", "--shards", "[0, 1, 2, 3, 4]"]
    argv += ["--min-workers", "2", "--missing-out", tmp_path / "missing"]
    error = aggregate_ok(argv, capsys)
    assert (tmp_path / "missing").read_text() == "0,2,4"
    assert "going ahead without shards 0, 2, 4 (--min-workers 2)" in error


def test_nothing_missing_writes_an_empty_list(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"0": 5, "1": 5})
    argv = ["--models-dir", folder, "--out", tmp_path / "avg.h5", "--shards", "[0, 1]"]
    aggregate_ok([*argv, "--missing-out", tmp_path / "missing"], capsys)
    assert (tmp_path / "missing").read_text() == ""


def test_too_few_models_names_each_missing_shard(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"2": 100})
    argv = ["--models-dir", folder, "--out", tmp_path / "avg.h5", "--shards", "[0, 1, 2]"]
    line = call(aggregate, [*argv, "--min-workers", "2"], capsys)
    assert line.endswith(
        "only 1 of 3 workers delivered a model, fewer than the 2 required; missing shards: 0, 1"
    )


def test_the_weights_are_averaged_by_each_shards_own_count(tmp_path: Path, capsys) -> None:
    """The counts follow their models: shard 0 (1 sample) and shard 1 (3 samples)."""
    folder = fan_in(tmp_path, {"0": 1, "1": 3})
    first = read_model_file(folder / "0.h5").weights
    write_model_weights(folder / "0.h5", [np.zeros_like(w) for w in first])
    write_model_weights(folder / "1.h5", [np.full_like(w, 4.0) for w in first])
    aggregate_ok(["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    for tensor in read_model_file(tmp_path / "avg.h5").weights:
        np.testing.assert_allclose(tensor, 3.0)  # (1 * 0 + 3 * 4) / 4


LONG_IDS = "[" + ", ".join(["1.5"] * 40) + "]"  # quoted to 80 characters
LONG_TEXT = json.dumps("x" * 100)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "--shards: not valid JSON"),
        ('"0"', "--shards must be a JSON list or object of shard ids, got '\"0\"'"),
        (
            json.dumps(list(range(MAX_SHARDS + 1))),
            f"--shards: at most {MAX_SHARDS} ids of letters and digits",
        ),
        ('["a-b"]', f"--shards: at most {MAX_SHARDS} ids of letters and digits"),
        ("[1.5]", "--shards: shard ids are numbers or text, got '[1.5]'"),
        ("[true]", "--shards: shard ids are numbers or text, got '[true]'"),
        ("[[1]]", "--shards: shard ids are numbers or text, got '[[1]]'"),
        ('{"0": 0}', f"--shards: digit counts are integers in 1..{MAX_SAMPLES}"),
        ('{"0": true}', f"--shards: digit counts are integers in 1..{MAX_SAMPLES}"),
        (f'{{"0": {MAX_SAMPLES + 1}}}', f"--shards: digit counts are integers in 1..{MAX_SAMPLES}"),
        ('{"a-b": 5}', f"--shards: at most {MAX_SHARDS} ids of letters and digits"),
        (json_nested(), "--shards: JSON nested too deeply"),
        (LONG_IDS, f"--shards: shard ids are numbers or text, got {LONG_IDS[:80]!r}"),
        (LONG_TEXT, f"--shards must be a JSON list or object of shard ids, got {LONG_TEXT[:80]!r}"),
    ],
)
def test_shards_that_are_not_ids_or_counts_are_refused(text: str, message: str) -> None:
    assert refused(aggregate.expected_shards, text, []).startswith(message)


def test_shards_are_read_as_ids_with_splits_counts_and_default_to_those_present() -> None:
    assert aggregate.expected_shards('[0, "b1", 12]', ["x"]) == {"0": None, "b1": None, "12": None}
    assert aggregate.expected_shards('{"0": 1, "b1": 7}', ["x"]) == {"0": 1, "b1": 7}
    assert aggregate.expected_shards(None, ["3", "4"]) == {"3": None, "4": None}
    assert len(aggregate.expected_shards(f"[{', '.join(['1'] * MAX_SHARDS)}]", [])) == 1
    assert aggregate.expected_shards(json.dumps({"0": MAX_SAMPLES}), []) == {"0": MAX_SAMPLES}
    many = {str(i): 1 for i in range(MAX_SHARDS)}
    assert len(aggregate.expected_shards(json.dumps(many), [])) == MAX_SHARDS


def test_a_stats_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    stats = tmp_path / "0.json"
    stats.write_text("{broken")
    assert refused(aggregate.sample_count, stats).startswith(f"stats file {stats}: not valid JSON")
    stats.write_text('{"samples": 1, "pad": "' + "x" * aggregate.MAX_STATS_BYTES + '"}')
    assert refused(aggregate.sample_count, stats) == (
        f"stats file {stats} is larger than {aggregate.MAX_STATS_BYTES} bytes"
    )


def test_stats_that_are_not_an_object_count_as_missing(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {})
    copy_model(folder / "0.h5")
    (folder / "0.json").write_text("[1]")
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert line.endswith(f"'samples' must be an integer in 1..{MAX_SAMPLES}, got None")


def test_no_models_folder_with_shards_named_means_none_delivered(tmp_path: Path, capsys) -> None:
    """Argo makes no input folder when no trainer saved a model: with --shards that is 0 of N."""
    argv = ["--models-dir", tmp_path / "none", "--out", tmp_path / "avg.h5", "--shards", "[0, 1]"]
    assert call(aggregate, argv, capsys).endswith(
        "only 0 of 2 workers delivered a model, fewer than the 2 required; missing shards: 0, 1"
    )
    line = call(aggregate, ["--models-dir", tmp_path / "none", "--out", tmp_path / "a.h5"], capsys)
    assert line.endswith(f"models folder not found: {tmp_path / 'none'}")


def test_each_model_that_does_not_count_is_named(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"2": 5})
    for shard in ("0", "1"):
        copy_model(folder / f"{shard}.h5")
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert line.endswith(
        f"missing shards: 0, 1; 0.h5 does not count: stats file not found: {folder / '0.json'} "
        f"(written by train after its model); 1.h5 does not count: stats file not found: "
        f"{folder / '1.json'} (written by train after its model)"
    )


def test_hidden_files_are_not_models(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"0": 2, "1": 6})
    copy_model(folder / ".partial.h5")
    error = aggregate_ok(["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert "averaged 2 models weighted by their shards' digits (0.h5: 2, 1.h5: 6)" in error


def test_splits_counts_weigh_the_models_and_a_model_claiming_another_count_does_not_count(
    tmp_path: Path, capsys
) -> None:
    """--shards {id: count} as split writes it: a model whose stats claim another count is missing."""
    folder = fan_in(tmp_path, {"0": 2, "1": 6, "2": 5})
    shards = json.dumps({"0": 2, "1": 6, "2": 3})
    argv = ["--models-dir", folder, "--out", tmp_path / "avg.h5", "--shards", shards]
    error = aggregate_ok([*argv, "--min-workers", "2"], capsys)
    assert "ignoring 2.h5 as missing: its stats claim 5 samples; split made 3" in error
    assert "averaged 2 models weighted by their shards' digits (0.h5: 2, 1.h5: 6)" in error
    line = call(aggregate, argv, capsys)
    assert line.endswith(
        "only 2 of 3 workers delivered a model, fewer than the 3 required; missing shards: 2; "
        "2.h5 does not count: its stats claim 5 samples; split made 3"
    )


def test_a_long_bad_sample_count_is_quoted_to_40_characters(tmp_path: Path) -> None:
    stats = write_json(tmp_path / "0.json", {"samples": "7" * 100})
    assert refused(aggregate.sample_count, stats) == (
        f"{stats}: 'samples' must be an integer in 1..{MAX_SAMPLES}, got {'7' * 40}"
    )


def test_a_models_path_that_is_not_a_folder_is_named_with_the_reason(tmp_path: Path) -> None:
    """What cannot be read (here a file; in a pod, argoexec's 0700 folder) is named with the uid."""
    not_a_folder = tmp_path / "models"
    not_a_folder.write_text("")
    assert refused(aggregate.list_models, not_a_folder) == (
        f"cannot read the models folder {not_a_folder}: Not a directory "
        f"(the step runs as uid {os.getuid()})"
    )


def test_a_model_of_no_expected_shard_is_named_on_stderr(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"0": 2, "7": 3})
    argv = ["--models-dir", folder, "--out", tmp_path / "avg.h5", "--shards", "[0]"]
    assert run(aggregate.main, aggregate.make_parser(), [str(a) for a in argv]) == 0
    out, error = capsys.readouterr()
    assert "ignoring 7.h5: not one of the expected shards" in error.splitlines()
    assert out == ""


def test_a_forged_stats_file_does_not_count(tmp_path: Path, capsys) -> None:
    folder = fan_in(tmp_path, {"0": 1})
    (folder / "0.json").write_text(json_nested(10_000))
    line = call(aggregate, ["--models-dir", folder, "--out", tmp_path / "avg.h5"], capsys)
    assert "only 0 of 1 workers delivered a model" in line and "nested too deeply" in line
    assert not (tmp_path / "avg.h5").exists()


def test_the_compiled_spec_gives_aggregate_the_counts_split_made(
    tmp_path: Path, small_mnist: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """split and aggregate's arguments as the local runner fills them in: --shards holds split's counts."""
    from steps import split
    from workflows.local.spec import templates_by_name
    from workflows.pipeline.settings import PipelineSettings
    from workflows.pipeline.workflow import compile_workflow

    workflow = compile_workflow(PipelineSettings(workers=2, rounds=1, source=str(small_mnist)))
    monkeypatch.chdir(tmp_path)
    split_args = task_args(workflow, "split")
    assert run(split.main, split.make_parser(), split_args) == 0, capsys.readouterr().err
    outputs = {
        f"tasks.split.outputs.parameters.{output['name']}": (
            tmp_path / output["valueFrom"]["path"].removeprefix("/work/")
        ).read_text()
        for output in templates_by_name(workflow)["split"]["outputs"]["parameters"]
    }
    args = task_args(workflow, "aggregate-round-1", outputs)
    counts = aggregate.expected_shards(args[args.index("--shards") + 1], [])
    assert counts == {"0": 500, "1": 500}  # 2000 digits less 1000 held out
