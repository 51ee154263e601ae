"""Model files without TensorFlow: aggregate's output is a full Keras model holding the FedAvg mean, and
the steps that do not train never import TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from steps import aggregate
from steps.lib.entry_point import run
from steps.lib.model_file import read_model_file
from tests.support.project import run_python
from tests.support.steps import (
    copy_model,
    digits,
    flags,
    write_json,
    write_model_weights,
    write_npz,
)


def test_aggregate_writes_a_keras_model_holding_the_weighted_mean(tmp_path: Path) -> None:
    import keras

    from steps.lib.keras_model import build_model

    folder = tmp_path / "models"
    folder.mkdir()
    rng = np.random.default_rng(0)
    sets, counts = [], [100, 300, 50]
    for shard, count in enumerate(counts):
        weights = [
            rng.normal(0, 0.05, size=w.shape).astype(np.float32)
            for w in build_model().get_weights()
        ]
        write_model_weights(copy_model(folder / f"{shard}.h5"), weights)
        write_json(folder / f"{shard}.json", {"loss": 0.1, "epochs": 1, "samples": count})
        sets.append(weights)
    out = tmp_path / "avg.h5"
    assert run(aggregate.main, aggregate.make_parser(), flags(models_dir=folder, out=out)) == 0

    opened = keras.models.load_model(out, compile=False)  # a full model, architecture included
    for index, got in enumerate(opened.get_weights()):
        want = sum(s[index].astype(np.float64) * c for s, c in zip(sets, counts, strict=True))
        np.testing.assert_allclose(got, want / sum(counts), rtol=1e-5, atol=1e-7)
    written = read_model_file(out)  # checked like any input
    assert set(written.attributes) == {"backend", "keras_version", "model_config"}


def step_commands(tmp_path: Path, small_mnist: Path) -> dict[str, list[str]]:
    models = tmp_path / "models"
    models.mkdir()
    copy_model(models / "0.h5")
    write_json(models / "0.json", {"samples": 5})
    metrics = write_json(tmp_path / "metrics.json", {"accuracy": 0.5})
    test_set = write_npz(tmp_path / "digits.npz", **digits(20))
    model, store = models / "0.h5", tmp_path / "store"
    return {
        "split": flags(
            source=small_mnist, workers=2, shards_dir=tmp_path / "s", test_out=tmp_path / "t"
        ),
        "init": flags(seed=3, out=tmp_path / "init.h5"),
        "aggregate": flags(models_dir=models, out=tmp_path / "avg.h5"),
        "evaluate": flags(model=model, test=test_set, out_dir=tmp_path / "evaluation"),
        "publish": flags(store=store, run="mnist-notf1", model=model, metrics=metrics),
    }


@pytest.mark.parametrize("step", ["split", "init", "aggregate", "evaluate", "publish"])
def test_steps_that_do_not_train_never_import_tensorflow(
    step: str, tmp_path: Path, small_mnist: Path
) -> None:
    argv = step_commands(tmp_path, small_mnist)[step]
    probe = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('tensorflow', 'keras')), file=sys.stderr))\n"
        f"sys.argv = ['steps.{step}', *{argv!r}]\n"
        f"runpy.run_module('steps.{step}', run_name='__main__')\n"
    )
    result = run_python(probe)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr
