"""MNIST: the digits as the steps hold them, the source file (fetched, checked against its published
sha256, cached) and its layout. No TensorFlow here: splitting stays fast."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from steps.lib.downloads import fetch_pinned
from steps.lib.errors import StepError
from steps.lib.npz import ArraySpec, read_arrays

KERAS_MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
KERAS_MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
# A copy beside a clone, which `make` passes on as MNIST_SOURCE (Makefile): the Keras URL reads it too, so a
# run started by hand after `make run` finds the file make's runs read.
_ROOT = Path(__file__).resolve().parents[2]
COPY_BESIDE_THE_PROJECT = _ROOT.parent / "shared" / "data" / "mnist.npz"
IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10
PIXEL_MAX = 255  # a uint8 pixel's full ink; the network sees pixels / PIXEL_MAX, in [0, 1]
# The most digits any file the steps read may hold: about four times MNIST's 60,000 training digits
# (EMNIST's 240,000 digits fit), and small enough that split's peak (the source plus its shards,
# ~400 MB) stays inside its pod's 768 MiB. Also the bound on a worker's FedAvg weight: no shard can
# hold more.
MAX_SAMPLES = 250_000
IMAGES = ArraySpec(np.dtype(np.uint8), (None, *IMAGE_SHAPE), MAX_SAMPLES)
LABELS = ArraySpec(np.dtype(np.uint8), (None,), MAX_SAMPLES)


@dataclass(frozen=True)
class Digits:
    """Images (n, 28, 28) uint8 with 0 = background, and labels (n,) uint8 in 0..9."""

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def take(self, indices: np.ndarray) -> Digits:
        return Digits(self.x[indices], self.y[indices])

    def sha256(self) -> str:
        """The digits' fingerprint: sha256 of the images' bytes, then the labels', in order (both
        uint8, so the same on every machine). Two test sets score alike only if it is equal."""
        digest = hashlib.sha256(np.ascontiguousarray(self.x).tobytes())
        digest.update(np.ascontiguousarray(self.y).tobytes())
        return digest.hexdigest()


def default_cache_dir() -> Path:
    return Path(os.environ.get("MNIST_CACHE", Path.home() / ".cache" / "mnist-argo"))


def fetch_source(source: str, cache_dir: Path | None = None) -> Path:
    """Return a local path holding the MNIST npz named by `source`: an http(s) URL, a gs:// URI or a path.

    The official Keras URL is checked against its published sha256 and cached after the first download.
    """
    if source.startswith(("http://", "https://")):
        return _download(source, cache_dir or default_cache_dir())
    if source.startswith("gs://"):
        from steps.lib.storage import download_uri

        target = (cache_dir or default_cache_dir()) / "gcs" / source.removeprefix("gs://")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StepError(
                f"cannot keep a copy of {source} in {target.parent}: {error.strerror or error} "
                "(set MNIST_CACHE to a writable folder)"
            ) from None
        download_uri(source, target)
        return target
    path = Path(source)
    if not path.is_file():
        raise StepError(f"dataset not found: {source}")
    return path


def source_identity(source: str) -> str:
    """What a run's card records of its --source: a local file by its content, not its path (a path of
    one machine, which visitors must not see): the official MNIST, known by its sha256, as the Keras URL
    it is a copy of, any other file as `sha256:HEX`; anything else (a URL, a gs:// URI) as given."""
    path = Path(source)
    try:
        is_file = not source.startswith(("http://", "https://", "gs://")) and path.is_file()
    except OSError:  # a name too long to be a file's
        is_file = False
    if not is_file:
        return source
    with path.open("rb") as stream:
        digest = hashlib.file_digest(stream, "sha256").hexdigest()
    return KERAS_MNIST_URL if digest == KERAS_MNIST_SHA256 else f"sha256:{digest}"


def _download(url: str, cache_dir: Path) -> Path:
    in_a_clone = (_ROOT / "pyproject.toml").is_file()
    if url == KERAS_MNIST_URL and in_a_clone and COPY_BESIDE_THE_PROJECT.is_file():
        return COPY_BESIDE_THE_PROJECT
    expected = KERAS_MNIST_SHA256 if url == KERAS_MNIST_URL else None
    return fetch_pinned(url, expected, cache_dir, Path(url).name)


def check_digits(x: np.ndarray, y: np.ndarray, where: str) -> Digits:
    """Validate shapes, dtypes and label range; raise StepError naming `where` otherwise."""
    if x.dtype != np.uint8 or y.dtype != np.uint8:
        raise StepError(f"{where}: images and labels must be uint8, got {x.dtype} and {y.dtype}")
    if x.ndim != 3 or x.shape[1:] != IMAGE_SHAPE:
        raise StepError(f"{where}: images must have shape (n, 28, 28), got {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise StepError(f"{where}: labels must have shape ({len(x)},), got {y.shape}")
    if len(y) == 0:
        raise StepError(f"{where}: holds no samples")
    if y.max() >= NUM_CLASSES:
        raise StepError(f"{where}: labels must be in 0..9, found {int(y.max())}")
    return Digits(x, y)


def load_mnist(path: Path) -> tuple[Digits, Digits]:
    """Read the Keras-layout mnist.npz: (train, test)."""
    arrays = read_arrays(
        path, {"x_train": IMAGES, "y_train": LABELS, "x_test": IMAGES, "y_test": LABELS}
    )
    train = check_digits(arrays["x_train"], arrays["y_train"], f"{path} (train)")
    test = check_digits(arrays["x_test"], arrays["y_test"], f"{path} (test)")
    return train, test
