"""Model files (.h5) read and written with h5py and numpy alone: no TensorFlow, so steps that only move
or average weights start in a fraction of a second.

A model file is Keras's HDF5 format: the architecture as JSON in the `model_config` attribute, and the
weights under `model_weights/<layer>/<weight path>`, listed in order by the `layer_names` and
`weight_names` attributes (Keras's legacy_h5_format.load_weights_from_hdf5_group reads them the same
way). Every file is untrusted: its size, links, attributes, dataset shapes, dtypes and storage are
checked against the one architecture this project knows before a weight is read, and weights must be
finite.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from steps.lib.architecture import LAYER_CLASSES, WEIGHT_LAYOUT
from steps.lib.bounded_json import parse_json
from steps.lib.errors import StepError
from steps.lib.hdf5_strings import variable_string_bytes

# The known architecture's weights in model order, (layer kind, weight name, shape), all float32, and
# the layers of model_config in order: declared in steps.lib.architecture; tests/test_weights.py checks
# they are steps.lib.keras_model.build_model()'s.
WEIGHT_DTYPE = np.dtype(np.float32)
# Every class and module a config of the architecture may name.
CONFIG_CLASSES = frozenset({"Sequential", *LAYER_CLASSES, "DTypePolicy", "GlorotUniform", "Zeros"})
CONFIG_MODULES = frozenset({None, "keras", "keras.layers", "keras.initializers"})

MAX_MODEL_BYTES = 16 << 20  # a model with its optimizer state is ~2.7 MB
MAX_CONFIG_BYTES = 256 << 10  # model_config is ~5 KB
MAX_NAMES = 64  # entries in a layer_names or weight_names attribute
NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
ROOT_ATTRIBUTES = ("backend", "keras_version", "model_config")
WEIGHTS_GROUP = "model_weights"
TOP_LEVEL_GROUP = "top_level_model_weights"  # a Sequential model's own weights: none
# what h5py raises for a file HDF5 cannot parse, and numpy for an attribute it cannot convert
H5_ERRORS = (
    OSError,
    KeyError,
    ValueError,
    TypeError,
    RuntimeError,
    AttributeError,
    IndexError,
    NotImplementedError,
)


@dataclass(frozen=True)
class ModelFile:
    """What a checked model file holds: its root attributes, layer groups in order, and weights."""

    attributes: dict[str, str]
    layers: list[
        tuple[str, list[str]]
    ]  # (layer group name, its weight names), every layer in order
    weights: list[np.ndarray]


def read_weights(path: Path) -> list[np.ndarray]:
    """The weights of the model file at `path`, in model order; StepError unless it fits the layout."""
    return read_model_file(path).weights


def read_model_file(path: Path) -> ModelFile:
    """Check and read the model file at `path` (see the module's docstring)."""
    path = Path(path)
    with _opened(path) as handle:
        try:
            return _read(handle, str(path))
        except StepError as error:
            raise StepError(
                f"{path}: not a model of this project's architecture ({error})"
            ) from None
        except H5_ERRORS as error:
            reason = " ".join(str(error).split())[:160] or type(error).__name__
            raise StepError(
                f"{path}: not a model of this project's architecture ({reason})"
            ) from None


def check_finite(weights: Sequence[np.ndarray], where: str) -> None:
    """Refuse weights holding NaN or an infinity (a diverged training run, or a forged file)."""
    for index, array in enumerate(weights):
        if not np.isfinite(array).all():
            raise StepError(f"{where}: weight {index} holds NaN or infinite values")


def write_model_file(path: Path, template: ModelFile, weights: Sequence[np.ndarray]) -> None:
    """Write a full Keras model file: `template`'s checked architecture and names, these weights.

    Only the parts Keras needs are written (root attributes, model_weights), never anything else a
    template file held, and as Keras's legacy_h5_format.save_model_to_hdf5 writes them: the same
    attributes and encodings, layer groups in name order, and an empty top_level_model_weights.
    """
    _check_layout(weights, str(path))
    check_finite(weights, str(path))
    values = iter(weights)
    with h5py.File(path, "w") as handle:
        for name, value in template.attributes.items():
            handle.attrs[name] = value.encode() if name == "model_config" else value
        group = handle.create_group(WEIGHTS_GROUP)
        group.attrs["layer_names"] = [name.encode() for name, _ in template.layers]
        group.attrs["backend"] = template.attributes.get("backend", "tensorflow").encode()
        group.attrs["keras_version"] = template.attributes.get("keras_version", "").encode()
        data = {
            (layer_name, weight_name): np.asarray(next(values), WEIGHT_DTYPE)
            for layer_name, weight_names in template.layers
            for weight_name in weight_names
        }
        layers = dict(template.layers)
        layers.setdefault(TOP_LEVEL_GROUP, [])
        for layer_name in sorted(layers):
            layer = group.create_group(layer_name)
            layer.attrs["weight_names"] = [name.encode() for name in layers[layer_name]]
            for weight_name in layers[layer_name]:
                layer.create_dataset(weight_name, data=data[layer_name, weight_name])


@contextmanager
def _opened(path: Path) -> Iterator[h5py.File]:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise StepError(f"model not found: {path}") from None
    except OSError as error:
        raise StepError(f"cannot read model {path}: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise StepError(f"model not found: {path} is not a regular file")
    if info.st_size > MAX_MODEL_BYTES:
        raise StepError(f"{path}: larger than {MAX_MODEL_BYTES} bytes, not a model of this project")
    try:
        handle = h5py.File(path, "r", locking=False)
    except H5_ERRORS as error:
        reason = " ".join(str(error).split())[:160]
        raise StepError(f"{path}: not a model of this project's architecture ({reason})") from None
    try:
        yield handle
    finally:
        handle.close()


def _read(handle: h5py.File, where: str) -> ModelFile:
    attributes = {name: _text_attribute(handle, name) for name in ROOT_ATTRIBUTES}
    check_model_config(attributes["model_config"])
    group = _child(handle, WEIGHTS_GROUP, h5py.Group)
    layers = [
        (name, _names(_child(group, name, h5py.Group), "weight_names"))
        for name in _names(group, "layer_names")
    ]
    weighted = [(name, weight_names) for name, weight_names in layers if weight_names]
    paths = [(layer, weight) for layer, names in weighted for weight in names]
    if len(paths) != len(WEIGHT_LAYOUT):
        raise StepError(f"{len(paths)} weights, expected {len(WEIGHT_LAYOUT)}")
    weights = []
    for (layer, weight), (_, suffix, shape) in zip(paths, WEIGHT_LAYOUT, strict=True):
        if weight.rsplit("/", 1)[-1].split(":")[0] != suffix:
            raise StepError(f"weight {layer}/{weight}: expected a {suffix}")
        weights.append(_dataset(_child(group, layer, h5py.Group), weight, shape))
    _check_layout(weights, where)
    check_finite(weights, where)
    return ModelFile(attributes, layers, weights)


def _check_layout(weights: Sequence[np.ndarray], where: str) -> None:
    shapes = [tuple(np.shape(array)) for array in weights]
    expected = [shape for _, _, shape in WEIGHT_LAYOUT]
    if shapes != expected:
        raise StepError(f"{where}: weights of shapes {shapes}, expected {expected}")


def check_model_config(text: str) -> None:
    """model_config must describe the known layers, naming only classes and modules Keras ships."""
    config = parse_json(text, "model_config", MAX_CONFIG_BYTES)
    inner = config.get("config") if isinstance(config, dict) else None
    layers = inner.get("layers") if isinstance(inner, dict) else None
    if not (
        isinstance(config, dict)
        and isinstance(layers, list)
        and config.get("class_name") == "Sequential"
    ):
        raise StepError("model_config is not a Sequential model")
    classes = tuple(
        layer.get("class_name") if isinstance(layer, dict) else None for layer in layers
    )
    if classes != LAYER_CLASSES:
        raise StepError(
            f"model_config has layers {list(classes)[:12]}, expected {list(LAYER_CLASSES)}"
        )
    pending: list[object] = [config]
    while pending:  # every object naming a class must name one of the known, built-in ones
        value = pending.pop()
        if isinstance(value, dict):
            if "class_name" in value and (
                value["class_name"] not in CONFIG_CLASSES
                or value.get("module") not in CONFIG_MODULES
                or value.get("registered_name") is not None
            ):
                raise StepError(f"model_config names {str(value['class_name'])[:40]!r}")
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _child(group: h5py.Group, name: str, kind: type) -> h5py.Group | h5py.Dataset:
    """`group[name]` through hard links only: a soft or external link could lead anywhere."""
    current = group
    for part in name.split("/"):
        if not NAME.match(part) or part in (".", ".."):
            raise StepError(f"bad name {name[:60]!r}")
        if not isinstance(current, h5py.Group):
            raise StepError(f"{name[:60]!r} is not a group")
        link = current.get(part, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise StepError(f"{name[:60]!r} is missing or not a hard link")
        current = current[part]
    if not isinstance(current, kind):
        raise StepError(f"{name[:60]!r} is not a {kind.__name__.lower()}")
    return current


def _attribute(obj: h5py.HLObject, name: str, max_items: int, max_bytes: int) -> np.ndarray:
    """An attribute, after bounding what reading it will cost: its declared size (a forged one may
    claim gigabytes), its type (text only: a compound may hide variable-length parts), and for
    variable-length strings, which Keras writes, the lengths their descriptors store (many may point
    to one large heap object, each materialised on reading; steps.lib.hdf5_strings).
    """
    if name not in obj.attrs:
        raise StepError(f"attribute {name} is missing")
    attribute = h5py.h5a.open(obj.id, name.encode())
    items = math.prod(attribute.shape or ())
    kind = attribute.get_type()
    if items > max_items or items * kind.get_size() > max_bytes:
        raise StepError(f"attribute {name} is too large")
    if items and kind.get_class() != h5py.h5t.STRING:
        raise StepError(f"attribute {name} is not text")
    if items and kind.is_variable_str():
        stored = variable_string_bytes(obj, name, items)
        if stored > max_bytes:
            raise StepError(f"attribute {name} holds {stored} bytes of text, more than {max_bytes}")
    return obj.attrs[name]


def _text_attribute(obj: h5py.HLObject, name: str) -> str:
    value = _attribute(obj, name, 1, MAX_CONFIG_BYTES)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str) or len(value) > MAX_CONFIG_BYTES:
        raise StepError(f"attribute {name} is not text")
    return value


def _names(obj: h5py.HLObject, name: str) -> list[str]:
    """A list-of-names attribute; Keras writes an empty float array for no names."""
    value = np.asarray(_attribute(obj, name, MAX_NAMES, MAX_NAMES * 256))
    if value.size == 0:
        return []
    if value.ndim != 1 or value.dtype.kind not in "OSU":
        raise StepError(f"attribute {name} is not a list of names")
    names = [item.decode("utf-8") if isinstance(item, bytes) else item for item in value.tolist()]
    for item in names:
        if not isinstance(item, str) or not all(
            NAME.match(part) and part not in (".", "..") for part in item.split("/")
        ):
            raise StepError(f"attribute {name} holds a bad name {str(item)[:60]!r}")
    if len(set(names)) != len(names):
        raise StepError(f"attribute {name} repeats a name")
    return names


def _dataset(group: h5py.Group, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A weight: declared shape, dtype and storage checked before its bytes are read."""
    dataset = _child(group, name, h5py.Dataset)
    if dataset.shape != shape or dataset.dtype != WEIGHT_DTYPE:
        raise StepError(
            f"weight {name} is {dataset.dtype}{list(dataset.shape or ())}, "
            f"expected float32{list(shape)}"
        )
    # plain contiguous storage, as Keras writes it: no filters (a compressed chunk can inflate
    # without bound), no external or virtual sources (other files), and every byte present
    contiguous = dataset.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
    nbytes = math.prod(shape) * WEIGHT_DTYPE.itemsize
    if not contiguous or dataset.external or dataset.id.get_storage_size() != nbytes:
        raise StepError(f"weight {name} is not stored as plain contiguous data")
    return np.asarray(dataset[()], dtype=WEIGHT_DTYPE)
