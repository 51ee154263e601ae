"""steps.export: each format loaded back picks the .h5's digit for every test digit; bad input exit 2;
a format that picks another digit exit 1, with nothing written."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from steps import export
from steps.lib.mnist import load_mnist
from steps.lib.registry import LATEST_KEY, MODEL_FILE, run_prefix
from tests.support.project import ROOT
from tests.support.steps import call

FORMATS = ["model.keras", "model.tflite", "saved_model"]
README = (ROOT / "README.md").read_text()
EXPORT_SECTION = README[README.index("## Export the model") :]
README_OUT_DIR = re.search(r"python -m steps\.export .*--out-dir (\S+)", EXPORT_SECTION)[1]
README_SNIPPET = re.search(r"```python\n(.*?)```", EXPORT_SECTION, flags=re.S)[1]


def test_the_readmes_export_folder_is_ignored_by_git() -> None:
    ignored = subprocess.run(["git", "check-ignore", f"{README_OUT_DIR}model.keras"], cwd=ROOT)
    assert ignored.returncode == 0, f"git would offer to commit {README_OUT_DIR}"


def exported(model: str, out: Path, source: Path) -> int:
    return export.command(["--model", model, "--out-dir", str(out), "--source", str(source)])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
def test_each_format_loaded_on_its_own_picks_the_digits_the_h5_picks(
    digit_model: Path,
    small_mnist: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tensorflow as tf

    from steps.lib.keras_model import load_model, to_inputs

    store = tmp_path / "store"  # the model as publish leaves it, named by the store's LATEST
    (store / run_prefix("mnist-abc12")).mkdir(parents=True)
    shutil.copyfile(digit_model, store / run_prefix("mnist-abc12") / MODEL_FILE)
    (store / LATEST_KEY).write_text("mnist-abc12")
    out = tmp_path / README_OUT_DIR  # where the README exports, and its snippet loads from
    assert exported(str(store / LATEST_KEY), out, small_mnist) == 0
    said = capsys.readouterr()
    assert said.err == "" and said.out.count("\n") == 1
    assert "picking the model's digit for all 500 test digits" in said.out
    assert sorted(p.name for p in out.iterdir()) == FORMATS  # no temporary name left

    _, test = load_mnist(small_mnist)
    images = to_inputs(test.x)
    expected = load_model(digit_model).predict(images, verbose=0).argmax(axis=1)
    assert np.mean(expected == test.y) > 0.7  # a model that decides, not one of near-ties
    monkeypatch.chdir(tmp_path)  # the README's snippet, run as written, each value kept
    values: list[object] = []
    namespace = {"x": images, "keep": values.append}
    for line in README_SNIPPET.splitlines():
        code = line.split("  #")[0]
        if code and not code.startswith("#"):
            exec(code if " = " in code or code.startswith("import") else f"keep({code})", namespace)
    as_keras, as_saved = values[0], values[1].numpy()
    interpreter = tf.lite.Interpreter(model_path=str(out / "model.tflite"))
    (given,), (answer,) = interpreter.get_input_details(), interpreter.get_output_details()
    interpreter.resize_tensor_input(given["index"], list(images.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], images)
    interpreter.invoke()
    as_tflite = interpreter.get_tensor(answer["index"])
    for picked in (as_keras, as_saved, as_tflite):
        assert np.array_equal(picked.argmax(axis=1), expected)


@pytest.mark.slow
def test_a_format_that_picks_another_digit_is_exit_1_and_nothing_is_written(
    digit_model: Path,
    small_mnist: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A stand-in exporter saves the untrained network as model.keras: the check must catch it."""
    from steps.lib.keras_model import build_model

    real = export.save_keras
    monkeypatch.setattr(export, "save_keras", lambda model, path: real(build_model(), path))
    out = tmp_path / "exported"
    out.mkdir()
    (out / "model.tflite").write_bytes(b"an earlier export")
    assert exported(str(digit_model), out, small_mnist) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1
    assert error[0].startswith(
        "python -m steps.export: model.keras picks another digit than the model for "
    )
    assert error[0].endswith("; nothing was written")
    assert [p.name for p in out.iterdir()] == ["model.tflite"]
    assert (out / "model.tflite").read_bytes() == b"an earlier export"


def test_the_rule_is_the_same_digit_for_every_test_digit() -> None:
    picked = np.array([3, 1, 4, 1, 5])
    export.check_same(picked, picked.copy(), "model.tflite")
    with pytest.raises(export.ExportMismatch) as raised:
        export.check_same(picked, np.array([3, 1, 4, 7, 7]), "model.tflite")
    assert str(raised.value) == (
        "model.tflite picks another digit than the model for 2 of 5 test digits (the first: "
        "test digit 3, 7 for 1); nothing was written"
    )


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_model = tmp_path / "notes.h5"
    not_a_model.write_text("not a model")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = {
        str(tmp_path / "missing.h5"): "model not found: ",
        str(not_a_model): "not a model of this project's architecture",
        str(tmp_path / "empty-store"): "no model is published there",
    }
    for model, why in cases.items():
        line = call(export, ["--model", model, "--out-dir", tmp_path / "out"], capsys)
        assert why in line
    line = call(export, ["--model", str(not_a_model), "--out-dir", a_file], capsys)
    assert line.endswith(f"--out-dir {a_file} is a file")
    assert not (tmp_path / "out").exists()
