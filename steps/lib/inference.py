"""The network of steps.lib.architecture run forward in numpy (float32), as Keras runs it at inference:
no TensorFlow, so scoring a model starts at once.

Each convolution is one matrix product over its input's windows (numpy's sliding_window_view),
followed by its max pooling; two exact shortcuts: the pooling comes before the bias and ReLU (both
are monotonic, so each maximum is the same number), and a convolution computes only the rows and
columns its "valid" pooling reads (the pool drops an odd map's last row and column). Dropout is
inactive at inference.

Images go through in batches of BATCH on one BLAS thread: a batch's arrays (a few MB) stay in the
CPU's cache, which makes small batches the fastest, and memory stays bounded whatever the test set's
size. More BLAS threads do not pay at this size: on a shared or CPU-limited machine their waiting
cost several times the work itself.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import threadpool_limits

from steps.lib.architecture import BUILT, INPUT_SHAPE, Layer
from steps.lib.mnist import PIXEL_MAX, Digits

BATCH = 32
BLAS_THREADS = 1
FLOAT = np.float32


def _check_supported(layers: Sequence[Layer]) -> None:
    """Refuse, at import, an architecture this forward pass does not implement."""
    for layer, following in zip(layers, (*layers[1:], None), strict=True):
        config = layer.config
        assert config.get("data_format", "channels_last") == "channels_last", layer.name
        assert config.get("use_bias", True), layer.name
        if layer.kind == "Conv2D":
            assert config["strides"] == [1, 1] and config["padding"] == "valid", layer.name
            assert config["dilation_rate"] == [1, 1] and config["groups"] == 1, layer.name
            assert following is not None and following.kind == "MaxPooling2D", layer.name
        elif layer.kind == "MaxPooling2D":
            assert config["padding"] == "valid", layer.name
            assert config["pool_size"] == config["strides"], layer.name
            assert len(set(config["pool_size"])) == 1, layer.name
        else:
            assert layer.kind in ("Flatten", "Dropout", "Dense"), layer.name
        if following is not None:
            assert config.get("activation", "linear") in ("relu", "linear"), layer.name
    assert layers[-1].kind == "Dense" and layers[-1].config["activation"] == "softmax"


_check_supported(BUILT)


def _activate(values: np.ndarray, bias: np.ndarray, activation: str) -> np.ndarray:
    values += bias
    if activation == "relu":
        np.maximum(values, 0, out=values)
    return values


def _convolve(values: np.ndarray, kernel: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """A valid, stride-1 convolution's first `rows` x `columns` outputs, without bias."""
    count, height, width, channels = values.shape
    size, across = kernel.shape[:2]
    # a window's row is `across` pixels of every channel: one run of contiguous numbers
    merged = values.reshape(count, height, width * channels)
    windows = sliding_window_view(merged, (size, across * channels), axis=(1, 2))
    windows = windows[:, :rows, : columns * channels : channels]  # (n, rows, columns, size, run)
    patches = windows.reshape(count * rows * columns, -1)  # copied once, in the kernel's order
    return (patches @ kernel.reshape(patches.shape[1], -1)).reshape(count, rows, columns, -1)


def _maximum(parts: Iterable[np.ndarray]) -> np.ndarray:
    return functools.reduce(np.maximum, parts)


def _max_pool(values: np.ndarray, size: int) -> np.ndarray:
    """Valid max pooling, stride `size`, of a map whose sides are multiples of `size`."""
    count, height, width, channels = values.shape
    rows = values.reshape(count, height // size, size, width, channels)
    pooled = _maximum(rows[:, :, k] for k in range(size))  # pairs of whole rows: fast
    pooled = pooled.reshape(count, height // size, width // size, size, channels)
    return _maximum(pooled[:, :, :, k] for k in range(size))


def _forward(weights: Sequence[np.ndarray], values: np.ndarray) -> np.ndarray:
    """The last layer's logits for a batch of float32 images (n, 28, 28, 1)."""
    parameters = iter(weights)
    for layer, following in zip(BUILT, (*BUILT[1:], None), strict=True):
        if layer.kind == "Conv2D":  # with the pooling that follows it
            if following is None or following.kind != "MaxPooling2D":
                raise ValueError("the architecture pools after every Conv2D")
            size = following.config["pool_size"][0]
            rows, columns = (side - side % size for side in layer.output_shape[:2])
            values = _max_pool(_convolve(values, next(parameters), rows, columns), size)
            values = _activate(values, next(parameters), layer.config["activation"])
        elif layer.kind == "Flatten":
            values = values.reshape(len(values), -1)  # channels last: Keras's order
        elif layer.kind == "Dense":
            values = values @ next(parameters)
            activation = "linear" if following is None else layer.config["activation"]
            values = _activate(values, next(parameters), activation)
        # MaxPooling2D is done with its convolution; Dropout does nothing at inference
    return values


def logits(weights: Sequence[np.ndarray], images: np.ndarray, batch: int = BATCH) -> np.ndarray:
    """The softmax's inputs, (n, classes) float32, for uint8 images (n, 28, 28) or float32 ones
    already in [0, 1] (what the page's preprocessing makes)."""
    weights = [np.asarray(array, FLOAT) for array in weights]
    parts = [np.zeros((0, BUILT[-1].output_shape[-1]), FLOAT)]
    scale = FLOAT(
        PIXEL_MAX if images.dtype == np.uint8 else 1
    )  # as steps.lib.keras_model.to_inputs
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        for start in range(0, len(images), batch):
            chunk = images[start : start + batch].astype(FLOAT) / scale
            parts.append(_forward(weights, chunk.reshape(len(chunk), *INPUT_SHAPE)))
    return np.concatenate(parts)


class Network:
    """A model file's checked weights, ready to answer: what the page serves (no TensorFlow)."""

    def __init__(self, weights: Sequence[np.ndarray]) -> None:
        self.weights = [np.asarray(array, FLOAT) for array in weights]

    def probabilities(self, images: np.ndarray) -> np.ndarray:
        """(n, classes) probabilities for images (n, 28, 28): uint8, or float32 in [0, 1]."""
        return softmax(logits(self.weights, images))

    def count_params(self) -> int:
        return sum(array.size for array in self.weights)


def softmax(values: np.ndarray) -> np.ndarray:
    """Probabilities from logits, as Keras's softmax computes them: exp(z - max z) / sum."""
    exponentials = np.exp(values - values.max(axis=1, keepdims=True))
    return exponentials / exponentials.sum(axis=1, keepdims=True)


def cross_entropy(values: np.ndarray, labels: np.ndarray) -> float:
    """Mean sparse categorical cross-entropy, from logits.

    What Keras's model.evaluate reports for a softmax output on the TensorFlow backend: the loss
    takes the softmax's own input (keras.src.backend.tensorflow.nn._get_logits), and
    tf.nn.sparse_softmax_cross_entropy_with_logits computes log(sum exp(z - max z)) - (z_y - max z),
    without the epsilon clipping Keras applies to plain probabilities.
    """
    shifted = values - values.max(axis=1, keepdims=True)
    chosen = np.take_along_axis(shifted, labels.astype(np.intp)[:, np.newaxis], axis=1)[:, 0]
    per_sample = np.log(np.exp(shifted).sum(axis=1)) - chosen
    return float(per_sample.astype(np.float64).mean())


@dataclass(frozen=True)
class Score:
    """A model's answers on labelled digits: the digit it picks for each, its accuracy and its loss
    (NaN or infinite when the model overflows: the caller decides)."""

    predicted: np.ndarray
    accuracy: float
    loss: float


def score(weights: Sequence[np.ndarray], digits: Digits) -> Score:
    """The network with `weights` on `digits` (what evaluate reports, and aggregate after each round)."""
    with np.errstate(all="ignore"):  # a model that overflows shows in the loss
        values = logits(weights, digits.x)
        predicted = softmax(values).argmax(axis=1)
        loss = cross_entropy(values, digits.y)
    return Score(predicted, float(np.mean(predicted == digits.y)), loss)
