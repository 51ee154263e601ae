"""`python -m ui.predict`: the page's preprocessing and model on files, one JSON object per line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from steps.lib.registry import LATEST_KEY
from tests.support.page import SURE_SAMPLES
from tests.support.project import ROOT
from ui.images.decode import MAX_FILE_MB, MB

SAMPLES = sorted((ROOT / "samples").iterdir())


def predict(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MODEL_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ui.predict", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def records(result: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_samples_are_predicted(published_store: Path) -> None:
    assert len(SAMPLES) == 20
    result = predict(*map(str, SAMPLES), "--model-uri", str(published_store / LATEST_KEY))
    assert result.returncode == 0, result.stderr
    lines = records(result)
    assert [line["file"] for line in lines] == [str(path) for path in SAMPLES]
    for line in lines:
        assert set(line) == {"file", "digit", "confidence", "probabilities"}
        assert len(line["probabilities"]) == 10
        assert abs(sum(line["probabilities"]) - 1) < 1e-3
        assert line["confidence"] == max(line["probabilities"])
        assert line["probabilities"].index(line["confidence"]) == line["digit"]
    digits = {Path(line["file"]).name: line["digit"] for line in lines}
    assert {name: digits[name] for name in SURE_SAMPLES} == {
        name: int(name[0]) for name in SURE_SAMPLES
    }


def test_bad_files_get_an_error_each_and_a_failing_exit_code(
    published_store: Path, tmp_path: Path
) -> None:
    text = tmp_path / "notes.png"
    text.write_text("not a picture\n")
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes((ROOT / "samples" / "3-photo.jpg").read_bytes()[:1500])
    fifo = tmp_path / "photo.jpg"
    os.mkfifo(fifo)  # nobody writes to it: a plain open() would wait for ever
    folder = tmp_path / "folder.png"
    folder.mkdir()
    big = tmp_path / "big.png"
    big.write_bytes((ROOT / "samples" / "7-mnist.png").read_bytes() + bytes(MAX_FILE_MB * MB))
    good, missing = ROOT / "samples" / "7-photo.jpg", tmp_path / "missing.png"
    files = [text, empty, good, truncated, missing, fifo, Path("/dev/zero"), folder, big]
    result = predict(*map(str, files), "--model-uri", str(published_store))  # a store works too
    assert result.returncode == 2
    lines = records(result)
    assert [line["file"] for line in lines] == [str(path) for path in files]
    assert "not an image" in lines[0]["error"]
    assert "empty" in lines[1]["error"]
    assert lines[2]["digit"] == 7 and "error" not in lines[2]
    assert "damaged or cut short" in lines[3]["error"]
    assert "No such file" in lines[4]["error"]
    assert [line["error"] for line in lines[5:8]] == ["This is not a regular file."] * 3
    limit = f"The file is over {MAX_FILE_MB} MB; the limit is {MAX_FILE_MB} MB."
    assert lines[8] == {"file": str(big), "error": limit}  # refused unread


def test_no_model_is_one_clear_line(tmp_path: Path) -> None:
    result = predict(str(SAMPLES[0]), "--model-uri", str(tmp_path / LATEST_KEY))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"python -m ui.predict: error: no model at {tmp_path / LATEST_KEY}; "
        "train one with `make pipeline`"
    ]
