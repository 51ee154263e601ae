"""The starting model without TensorFlow: the config and file Keras would write, opened everywhere, its
weights drawn as Keras draws them."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from steps import init
from steps.lib.entry_point import run
from steps.lib.model_file import WEIGHT_LAYOUT, read_model_file
from tests.support.steps import files_in


def fresh_keras_model():
    """steps.lib.keras_model.build_model() as a new process builds it (Keras numbers repeated layer names)."""
    import keras

    from steps.lib.keras_model import build_model

    keras.backend.clear_session(free_memory=False)
    return build_model()


def write_init(path: Path, seed: int = 0) -> Path:
    assert run(init.main, init.make_parser(), ["--seed", str(seed), "--out", str(path)]) == 0
    return path


def h5_structure(path: Path) -> dict:
    """Every object of an HDF5 file and its attributes, without the weights' values and Keras version."""
    found: dict = {}

    def attributes(name: str, obj) -> None:
        for key in obj.attrs:
            kind = h5py.h5a.open(obj.id, key.encode()).get_type()
            text = isinstance(kind, h5py.h5t.TypeStringID)
            value = np.asarray(obj.attrs[key]).tolist() if key != "keras_version" else "…"
            found[name, key] = (
                type(kind).__name__,
                text and kind.is_variable_str(),
                text and kind.get_cset(),
                np.shape(obj.attrs[key]),
                value,
            )

    def visit(name: str, obj) -> None:
        attributes(name, obj)
        if isinstance(obj, h5py.Dataset):
            plist = obj.id.get_create_plist()
            found[name] = (obj.shape, obj.dtype.str, plist.get_layout(), plist.get_nfilters())
        else:
            found[name] = "group"

    with h5py.File(path, "r") as handle:
        attributes("/", handle)
        handle.visititems(visit)
    return found


def test_init_writes_the_file_keras_writes(tmp_path: Path) -> None:
    from steps.lib.keras_model import save_model

    save_model(fresh_keras_model(), tmp_path / "keras.h5")
    ours, keras_own = (
        h5_structure(write_init(tmp_path / "init.h5")),
        h5_structure(tmp_path / "keras.h5"),
    )
    assert ours.keys() == keras_own.keys()
    assert {key: value for key, value in ours.items() if value != keras_own[key]} == {}


def test_keras_and_the_projects_loader_open_it(tmp_path: Path) -> None:
    import keras

    from steps.lib.keras_model import load_model

    path = write_init(tmp_path / "init.h5", seed=7)
    written = read_model_file(path).weights
    opened = keras.models.load_model(path, compile=False)  # the file's own architecture
    assert opened.name == "mnist_cnn" and opened.count_params() == 225_034
    for got, want in zip(opened.get_weights(), written, strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(load_model(path).get_weights(), written, strict=True):
        np.testing.assert_array_equal(got, want)
    assert files_in(tmp_path) == {"init.h5"}  # written whole, then renamed


def test_same_seed_same_file_another_seed_other_weights(tmp_path: Path) -> None:
    first, again = write_init(tmp_path / "a.h5", 3), write_init(tmp_path / "b.h5", 3)
    other = write_init(tmp_path / "c.h5", 4)
    assert first.read_bytes() == again.read_bytes()
    assert not np.array_equal(read_model_file(first).weights[0], read_model_file(other).weights[0])


def test_weights_are_drawn_as_keras_initialises_them(tmp_path: Path) -> None:
    """Kernels uniform in ±sqrt(6 / (fan_in + fan_out)), as keras.initializers.GlorotUniform draws
    them (its samples give the same bound and spread), biases zero."""
    import keras

    weights = read_model_file(write_init(tmp_path / "init.h5", seed=11)).weights
    for (_, name, shape), ours in zip(WEIGHT_LAYOUT, weights, strict=True):
        assert ours.dtype == np.float32 and ours.shape == shape
        if name == "bias":
            assert not ours.any()
            continue
        fan_in, fan_out = math.prod(shape[:-1]), math.prod(shape[:-2]) * shape[-1]
        limit = math.sqrt(6 / (fan_in + fan_out))
        theirs = keras.ops.convert_to_numpy(keras.initializers.GlorotUniform(seed=1)(shape))
        for sample in (ours, theirs):
            assert np.abs(sample).max() <= limit
            assert np.abs(sample).max() > 0.9 * limit
            spread = limit / math.sqrt(3)  # a uniform's standard deviation
            assert abs(sample.mean()) < 5 * spread / math.sqrt(sample.size)
            assert sample.std() == pytest.approx(spread, rel=0.1)
        assert ours.std() == pytest.approx(theirs.std(), rel=0.1)
