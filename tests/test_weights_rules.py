"""steps.lib.model_file written as Keras writes a model, and check_model_config's rules with exact messages.

The file Keras itself writes (tests/support/steps.py's model_file, Keras's legacy_h5_format.save_model_to_hdf5)
is the reference: what write_model_file writes from it must hold the same attributes, names, order and
dtypes, so that Keras reads it back as it reads its own."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from steps.lib import model_file as model_weights
from steps.lib.bounded_json import MAX_JSON_BYTES
from steps.lib.errors import StepError
from steps.lib.model_file import (
    LAYER_CLASSES,
    MAX_CONFIG_BYTES,
    check_model_config,
    read_model_file,
    write_model_file,
)
from tests.support.steps import model_file


def attributes(obj: h5py.HLObject) -> dict[str, object]:
    """An HDF5 object's attributes as comparable Python values."""
    found = {}
    for name, value in obj.attrs.items():
        found[name] = value.tolist() if isinstance(value, np.ndarray) else value
    return found


def test_a_written_model_file_holds_what_keras_writes(tmp_path) -> None:
    reference = model_file()
    template = read_model_file(reference)
    new = [
        np.full(np.shape(w), index + 0.5, np.float64) for index, w in enumerate(template.weights)
    ]
    out = tmp_path / "out.h5"
    write_model_file(out, template, new)
    with h5py.File(reference, "r") as keras_file, h5py.File(out, "r") as written:
        assert attributes(written) == attributes(keras_file)
        assert type(written.attrs["model_config"]) is type(keras_file.attrs["model_config"])
        group, keras_group = written["model_weights"], keras_file["model_weights"]
        assert attributes(group) == attributes(keras_group)
        assert list(group) == list(keras_group)  # the layer groups, in name order
        for layer in keras_group:
            assert attributes(group[layer]) == attributes(keras_group[layer]), layer
    written_back = read_model_file(out)
    assert written_back.attributes == template.attributes
    assert written_back.layers == template.layers
    for index, array in enumerate(written_back.weights):
        assert array.dtype == np.float32 and np.all(array == index + 0.5)


def test_weights_off_the_layout_or_not_finite_are_refused_naming_the_file(tmp_path) -> None:
    template = read_model_file(model_file())
    out = tmp_path / "out.h5"
    with pytest.raises(StepError) as raised:
        write_model_file(out, template, template.weights[:-1])
    assert str(raised.value).startswith(f"{out}: ")
    broken = [w.copy() for w in template.weights]
    broken[2][...] = np.nan
    with pytest.raises(StepError) as raised:
        write_model_file(out, template, broken)
    assert str(raised.value) == f"{out}: weight 2 holds NaN or infinite values"
    assert not out.exists()


def keras_config() -> dict:
    with h5py.File(model_file(), "r") as handle:
        text = handle.attrs["model_config"]
    return json.loads(text.decode() if isinstance(text, bytes) else text)


def test_the_networks_own_config_passes() -> None:
    check_model_config(json.dumps(keras_config()))


@pytest.mark.parametrize(
    "config",
    [[1], {"class_name": "Functional", "config": {"layers": []}}, {"class_name": "Sequential"}],
    ids=["not an object", "not Sequential", "no layers"],
)
def test_what_is_not_a_sequential_model_is_named_so(config: object) -> None:
    with pytest.raises(StepError) as raised:
        check_model_config(json.dumps(config))
    assert str(raised.value) == "model_config is not a Sequential model"


def test_sequential_with_a_layer_list_of_the_wrong_kind_is_not_taken_for_the_network() -> None:
    config = keras_config()
    config["class_name"] = "Functional"
    with pytest.raises(StepError, match=r"^model_config is not a Sequential model$"):
        check_model_config(json.dumps(config))
    config = keras_config()
    config["config"]["layers"] = {"not": "a list"}
    with pytest.raises(StepError, match=r"^model_config is not a Sequential model$"):
        check_model_config(json.dumps(config))


def test_other_layers_are_named_with_what_was_expected() -> None:
    config = keras_config()
    config["config"]["layers"] = [*config["config"]["layers"][:-1], "x"]
    classes = [*(layer["class_name"] for layer in config["config"]["layers"][:-1]), None]
    with pytest.raises(StepError) as raised:
        check_model_config(json.dumps(config))
    assert str(raised.value) == (
        f"model_config has layers {classes}, expected {list(LAYER_CLASSES)}"
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"class_name": "Lambda" + "x" * 60}, "Lambda" + "x" * 34),
        ({"module": "evil.module"}, None),
        ({"registered_name": "Custom>Dense"}, None),
    ],
    ids=["a class not shipped", "a module not shipped", "a registered class"],
)
def test_a_class_keras_does_not_ship_is_named_to_40_characters(
    change: dict, named: str | None
) -> None:
    config = keras_config()
    initializer = config["config"]["layers"][-1]["config"]["kernel_initializer"]
    initializer.update(change)
    name = named or initializer["class_name"]
    with pytest.raises(StepError) as raised:
        check_model_config(json.dumps(config))
    assert str(raised.value) == f"model_config names {name!r}"


def test_a_config_is_read_as_json_up_to_its_own_bound() -> None:
    with pytest.raises(StepError) as raised:
        check_model_config("{broken")
    assert str(raised.value).startswith("model_config: not valid JSON (")
    config = keras_config()
    config["padding"] = "x" * (MAX_CONFIG_BYTES - len(json.dumps(config)) - 20)
    text = json.dumps(config)
    assert len(text) <= MAX_CONFIG_BYTES < MAX_JSON_BYTES  # its bound, not parse_json's default
    check_model_config(text)
    with pytest.raises(StepError) as raised:
        check_model_config(text + " " * (MAX_CONFIG_BYTES - len(text) + 1))
    assert str(raised.value) == f"model_config: longer than {MAX_CONFIG_BYTES} bytes"


@pytest.fixture
def h5(tmp_path):
    """A fresh HDF5 file, open for writing."""
    with h5py.File(tmp_path / "f.h5", "w") as handle:
        yield handle


def refused(call: object, *args: object) -> str:
    with pytest.raises(StepError) as raised:
        call(*args)
    return str(raised.value)


def test_a_child_is_reached_through_hard_links_only(h5) -> None:
    h5.create_group("a").create_dataset("w", data=np.zeros(2, np.float32))
    h5["soft"] = h5py.SoftLink("/a")
    long = "b" * 70
    assert model_weights._child(h5, "a/w", h5py.Dataset).shape == (2,)
    assert refused(model_weights._child, h5, "a/../a", h5py.Group) == "bad name 'a/../a'"
    assert refused(model_weights._child, h5, "./a", h5py.Group) == "bad name './a'"
    assert refused(model_weights._child, h5, f"a/{long} ", h5py.Group) == (
        f"bad name {f'a/{long} '[:60]!r}"
    )
    assert refused(model_weights._child, h5, "a/w/x", h5py.Dataset) == "'a/w/x' is not a group"
    assert refused(model_weights._child, h5, "soft", h5py.Group) == (
        "'soft' is missing or not a hard link"
    )
    assert refused(model_weights._child, h5, long, h5py.Group) == (
        f"{long[:60]!r} is missing or not a hard link"
    )
    assert refused(model_weights._child, h5, "a", h5py.Dataset) == "'a' is not a dataset"
    h5.create_group(long)
    assert (
        refused(model_weights._child, h5, long, h5py.Dataset) == f"{long[:60]!r} is not a dataset"
    )
    h5[long].create_dataset("w", data=np.zeros(1))
    assert refused(model_weights._child, h5, f"{long}/w/x", h5py.Dataset) == (
        f"{f'{long}/w/x'[:60]!r} is not a group"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([b"dense", b"dense_1"], None),
        ([b"dense", b"a/b.c:d-e"], None),
        (np.zeros(0, np.float32), None),
        ([b"a", b".."], "attribute names holds a bad name '..'"),
        ([b"a/./b"], "attribute names holds a bad name 'a/./b'"),
        ([b"a b"], "attribute names holds a bad name 'a b'"),
        ([b"x" * 70 + b" "], f"attribute names holds a bad name {'x' * 60!r}"),
        ([b"a", b"a"], "attribute names repeats a name"),
        (np.array([[b"a"]]), "attribute names is not a list of names"),
        (np.ones(2, np.float32), "attribute names is not text"),
    ],
)
def test_a_list_of_names_holds_distinct_safe_names(h5, value: object, message: str | None) -> None:
    h5.attrs["names"] = np.array(value, dtype="S") if isinstance(value, list) else value
    if message is None:
        names = model_weights._names(h5, "names")
        expected = [v.decode() if isinstance(v, bytes) else v for v in np.asarray(value).tolist()]
        assert names == expected and all(type(n) is str for n in names)
    else:
        assert refused(model_weights._names, h5, "names") == message


def test_a_list_of_names_is_bounded_in_count_and_bytes(h5) -> None:
    h5.attrs["many"] = np.array([f"n{i}" for i in range(model_weights.MAX_NAMES + 1)], dtype="S")
    assert refused(model_weights._names, h5, "many") == "attribute many is too large"
    fits = [f"{i:0128}" for i in range(model_weights.MAX_NAMES)]  # 64 names of 128 bytes
    h5.attrs["fits"] = np.array(fits, dtype="S")
    assert len(model_weights._names(h5, "fits")) == model_weights.MAX_NAMES
    assert refused(model_weights._names, h5, "missing") == "attribute missing is missing"
