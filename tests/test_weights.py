"""Model files without TensorFlow: aggregate's output is a full Keras model holding the FedAvg mean, and
the steps that do not train never import TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from steps import aggregate
from steps.lib.entry_point import run
from steps.lib.model_file import WEIGHT_LAYOUT, read_model_file
from tests.support.project import run_python
from tests.support.steps import (
    copy_model,
    digits,
    flags,
    write_json,
    write_model_weights,
    write_npz,
)


def test_aggregate_writes_a_full_keras_model(tmp_path: Path) -> None:
    """Its weighted mean: test_aggregate_rules.py; here, Keras opens it, architecture included."""
    import keras

    folder = tmp_path / "models"
    folder.mkdir()
    for shard, value in enumerate([1.0, 3.0]):
        weights = [np.full(shape, value, np.float32) for *_, shape in WEIGHT_LAYOUT]
        write_model_weights(copy_model(folder / f"{shard}.h5"), weights)
        write_json(folder / f"{shard}.json", {"loss": 0.1, "epochs": 1, "samples": 100})
    out = tmp_path / "avg.h5"
    assert run(aggregate.main, aggregate.make_parser(), flags(models_dir=folder, out=out)) == 0
    for got in keras.models.load_model(out, compile=False).get_weights():
        np.testing.assert_array_equal(got, 2.0)
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
