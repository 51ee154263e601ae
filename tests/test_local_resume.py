"""LocalRunner.retry: a run cut short (Ctrl-C, or the runner killed) after its trainers finished is
taken up from its folder without training them again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steps.lib.storage import open_store
from tests.test_local_runner import MODEL_OUTPUT, fan_out, step
from workflows.local.runner import LocalRunner

ROOT = Path(__file__).resolve().parents[1]
RUN = "mnist-resume"
# each trainer counts its runs in a file beside the store, then writes its model
TRAIN = (
    "import pathlib, sys\n"
    "count = pathlib.Path(sys.argv[2]) / f'trained-{sys.argv[1]}'\n"
    "count.write_text(count.read_text() + 'x' if count.exists() else 'x')\n"
    "pathlib.Path('out').mkdir(); pathlib.Path('out/model.txt').write_text(sys.argv[1])\n"
)
# the fan-in waits, writing its pid, while `hold` exists
HOLD = (
    "import os, pathlib, sys, time\n"
    "pathlib.Path(sys.argv[1], 'aggregate.pid').write_text(str(os.getpid()))\n"
    "while pathlib.Path(sys.argv[1], 'hold').exists(): time.sleep(0.2)\n"
)
START = (
    "import json, sys\n"
    "from steps.lib.storage import open_store\n"
    "from workflows.local.runner import LocalRunner\n"
    "runner = LocalRunner(open_store(sys.argv[1]), sys.argv[2], echo=print)\n"
    "runner.run(json.loads(open(sys.argv[3]).read()))\n"
)


def cut_short_workflow(tmp_path: Path) -> dict:
    manifest = fan_out(["0", "1"], TRAIN, "train", outputs=MODEL_OUTPUT)
    manifest["spec"]["templates"][2]["container"]["args"].append(str(tmp_path))
    manifest["spec"]["templates"][3] = step("ok", HOLD, str(tmp_path))
    manifest["metadata"] = {"name": RUN}
    return manifest


def summary(logs: Path) -> dict:
    written = logs / RUN / "summary.json"
    return json.loads(written.read_text()) if written.exists() else {"nodes": []}


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_a_run_cut_short_after_its_trainers_is_taken_up_without_training_them_again(
    tmp_path: Path, how: signal.Signals
) -> None:
    (tmp_path / "hold").touch()
    manifest = tmp_path / "workflow.json"
    manifest.write_text(json.dumps(cut_short_workflow(tmp_path)))
    store, logs = tmp_path / "store", tmp_path / "logs"
    command = [sys.executable, "-c", START, str(store), str(logs), str(manifest)]
    as_in_a_terminal = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    environment = os.environ | {"PYTHONPATH": str(ROOT)}
    runner = subprocess.Popen(command, cwd=ROOT, env=environment, preexec_fn=as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "aggregate.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        trained = {n["name"]: n["phase"] for n in summary(logs)["nodes"] if n["task"] == "train"}
        assert trained == {"train(0:0)": "Succeeded", "train(1:1)": "Succeeded"}
    finally:
        runner.send_signal(how)
        runner.wait(timeout=60)
    if how == signal.SIGKILL:  # the runner could not stop its step: it is stopped by its pid
        os.kill(int((tmp_path / "aggregate.pid").read_text()), signal.SIGKILL)
    (tmp_path / "hold").unlink()
    assert summary(logs)["phase"] != "Succeeded"

    if how == signal.SIGINT:  # taken up as a user does: submit.py --retry RUN
        command = [sys.executable, "workflows/submit.py", "--retry", RUN, f"--artifacts={store}"]
        done = subprocess.run(
            [*command, f"--logs-dir={logs}"], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        said = done.stdout
    else:
        lines: list[str] = []
        result = LocalRunner(open_store(store), logs, echo=lines.append).retry(RUN)
        assert result.phase == "Succeeded", "\n".join(lines)
        said = "\n".join(lines)
    assert (tmp_path / "trained-0").read_text() == (tmp_path / "trained-1").read_text() == "x"
    assert "reused   train(0:0): it succeeded before" in said, said
    assert open_store(store).read_text(f"{RUN}/m/1") == "1"
    assert summary(logs)["phase"] == "Succeeded"
