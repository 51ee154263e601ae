"""The project's network, declared once, without TensorFlow.

`LAYERS` lists each layer's Keras class and the arguments this network sets; everything else is derived
from it at import: the Keras model_config a model file carries (Keras 3's defaults fill the rest, in the
order Keras writes them), the layer names Keras gives a fresh model, and the weights' layout. `init`
writes model files from it, steps.lib.inference runs the network in numpy from it, steps.lib.model_file
checks files against it, and steps.lib.keras_model builds it in Keras for training. tests/test_init.py
checks the derived model_config against the one Keras writes.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass

from steps.lib.mnist import IMAGE_SHAPE, NUM_CLASSES

MODEL_NAME = "mnist_cnn"
INPUT_SHAPE = (*IMAGE_SHAPE, 1)  # channels last
LAYERS: tuple[tuple[str, dict], ...] = (
    ("Conv2D", {"filters": 32, "kernel_size": [3, 3], "activation": "relu"}),
    ("MaxPooling2D", {"pool_size": [2, 2], "strides": [2, 2]}),
    ("Conv2D", {"filters": 64, "kernel_size": [3, 3], "activation": "relu"}),
    ("MaxPooling2D", {"pool_size": [2, 2], "strides": [2, 2]}),
    ("Flatten", {}),
    ("Dropout", {"rate": 0.25}),
    ("Dense", {"units": 128, "activation": "relu"}),
    ("Dropout", {"rate": 0.5}),
    ("Dense", {"units": NUM_CLASSES, "activation": "softmax"}),
)

# What a model file says wrote it: the Keras release whose HDF5 format and defaults this follows.
KERAS_VERSION = "3.15.1"
BACKEND = "tensorflow"


def _keras_object(module: str, class_name: str, config: dict) -> dict:
    return {"module": module, "class_name": class_name, "config": config, "registered_name": None}


_FLOAT32 = _keras_object("keras", "DTypePolicy", {"name": "float32"})
_GLOROT_UNIFORM = _keras_object(
    "keras.initializers", "GlorotUniform", {"seed": None, "input_axes": None, "output_axes": None}
)
_ZEROS = _keras_object("keras.initializers", "Zeros", {})
_WEIGHTED = {
    "use_bias": True,
    "kernel_initializer": _GLOROT_UNIFORM,
    "bias_initializer": _ZEROS,
    "kernel_regularizer": None,
    "bias_regularizer": None,
}
# Each class's config as Keras 3 writes it (keys in its order), with its defaults.
_KERAS_DEFAULTS: dict[str, dict] = {
    "Conv2D": {
        "filters": None,
        "kernel_size": None,
        "strides": [1, 1],
        "padding": "valid",
        "data_format": "channels_last",
        "dilation_rate": [1, 1],
        "groups": 1,
        "activation": "linear",
        **_WEIGHTED,
        "activity_regularizer": None,
        "kernel_constraint": None,
        "bias_constraint": None,
    },
    "MaxPooling2D": {
        "pool_size": None,
        "padding": "valid",
        "strides": None,
        "data_format": "channels_last",
    },
    "Flatten": {"data_format": "channels_last"},
    "Dropout": {"rate": None, "seed": None, "noise_shape": None},
    "Dense": {
        "units": None,
        "activation": "linear",
        **_WEIGHTED,
        "kernel_constraint": None,
        "bias_constraint": None,
        "quantization_config": None,
    },
}


@dataclass(frozen=True)
class Layer:
    """One layer as built: its Keras class and name, full config, and the shape it outputs."""

    kind: str
    name: str
    config: dict
    output_shape: tuple[int, ...]
    weights: tuple[tuple[str, tuple[int, ...]], ...]  # (kernel or bias, shape)


def _keras_name(kind: str, taken: dict[str, int]) -> str:
    """The name Keras gives a fresh session's layer: snake case, then _1, _2, … for repeats."""
    base = re.sub(r"([a-z])([A-Z])", r"\1_\2", re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", kind)).lower()
    count = taken.get(base, 0)
    taken[base] = count + 1
    return base if count == 0 else f"{base}_{count}"


def _built(kind: str, arguments: dict, shape: tuple[int, ...], name: str) -> Layer:
    unknown = set(arguments) - set(_KERAS_DEFAULTS[kind])
    if unknown:
        raise ValueError(f"{kind} has no argument {sorted(unknown)}")
    options = {key: arguments.get(key, default) for key, default in _KERAS_DEFAULTS[kind].items()}
    if options.get("padding", "valid") != "valid" or (
        kind == "Conv2D" and options["strides"] != [1, 1]
    ):
        raise ValueError(f"{kind}: only valid padding and unit convolution strides are derived")
    config = {"name": name, "trainable": True, "dtype": _FLOAT32, **copy.deepcopy(options)}
    weights: tuple[tuple[str, tuple[int, ...]], ...] = ()
    if kind == "Conv2D":
        (rows, columns), channels = options["kernel_size"], shape[-1]
        weights = (
            ("kernel", (rows, columns, channels, options["filters"])),
            ("bias", (options["filters"],)),
        )
        shape = (shape[0] - rows + 1, shape[1] - columns + 1, options["filters"])  # "valid"
    elif kind == "MaxPooling2D":
        (rows, columns), (down, across) = options["pool_size"], options["strides"]
        shape = ((shape[0] - rows) // down + 1, (shape[1] - columns) // across + 1, shape[2])
    elif kind == "Flatten":
        shape = (math.prod(shape),)
    elif kind == "Dense":
        weights = (("kernel", (shape[-1], options["units"])), ("bias", (options["units"],)))
        shape = (*shape[:-1], options["units"])
    return Layer(kind, name, config, shape, weights)


def _build() -> tuple[Layer, ...]:
    taken: dict[str, int] = {}
    layers: list[Layer] = []
    shape: tuple[int, ...] = INPUT_SHAPE
    for kind, arguments in LAYERS:
        layer = _built(kind, arguments, shape, _keras_name(kind, taken))
        layers.append(layer)
        shape = layer.output_shape
    return tuple(layers)


BUILT: tuple[Layer, ...] = _build()
MODEL_CONFIG: dict = {
    "class_name": "Sequential",
    "config": {
        "name": MODEL_NAME,
        "trainable": True,
        "dtype": _FLOAT32,
        "layers": [
            {
                "class_name": "InputLayer",
                "config": {
                    "batch_shape": [None, *INPUT_SHAPE],
                    "dtype": "float32",
                    "sparse": False,
                    "ragged": False,
                    "name": "input_layer",
                    "optional": False,
                },
            },
            *({"class_name": layer.kind, "config": layer.config} for layer in BUILT),
        ],
        "build_input_shape": [None, *INPUT_SHAPE],
    },
}
MODEL_CONFIG_JSON = json.dumps(MODEL_CONFIG)  # as Keras writes it: json.dumps' defaults
# Every layer's class, in order, as model_config names them.
LAYER_CLASSES = tuple(layer["class_name"] for layer in MODEL_CONFIG["config"]["layers"])
# The weights in model order: (layer kind, weight name, shape), all float32.
WEIGHT_LAYOUT: tuple[tuple[str, str, tuple[int, ...]], ...] = tuple(
    (layer.kind.lower(), weight, shape) for layer in BUILT for weight, shape in layer.weights
)
# The model_weights groups of a model file: (layer name, its weights' paths), every layer in order.
WEIGHT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (layer.name, tuple(f"{MODEL_NAME}/{layer.name}/{weight}" for weight, _ in layer.weights))
    for layer in BUILT
)
