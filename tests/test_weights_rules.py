"""steps.weights written as Keras writes a model, and check_model_config's rules with exact messages.

The file Keras itself writes (tests/step_support.model_file, Keras's legacy_h5_format.save_model_to_hdf5)
is the reference: what write_model_file writes from it must hold the same attributes, names, order and
dtypes, so that Keras reads it back as it reads its own."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from steps.cli import MAX_JSON_BYTES, StepError
from steps.weights import (
    LAYER_CLASSES,
    MAX_CONFIG_BYTES,
    check_model_config,
    read_model_file,
    write_model_file,
)
from tests.step_support import model_file


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
