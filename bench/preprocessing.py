"""The page's preprocessing against its targets: accuracy on phone photos beside clean digits, and speed.

python -m bench.preprocessing --source ../shared/data/mnist.npz [--model-uri URI] [--count 2000]

- accuracy: the first COUNT MNIST test digits (all 10000 by default), clean (as MNIST has them) and as the harder photos of
  bench.photos (photo i drawn with seed i), through ui.preprocess and the published model; target: the
  photos at least 98% right and within 1 point of the clean digits;
- speed: ui.preprocess.prepare (bytes to the 28x28 input, decoding included) on 12-megapixel photos,
  the model already loaded; target: p50 under 20 ms. CPU time is printed beside wall time, and the load
  average: on a busy machine wall time says more about the neighbours than about the code.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.photos import frame_of, photo
from steps.lib.arguments import add_source_argument
from steps.lib.mnist import fetch_source, load_mnist

MIN_PHOTO_ACCURACY = 0.98
MAX_GAP = 0.01
MAX_P50_MS = 20.0
TIMING_MEGAPIXELS = 12.0


def load_model(uri: str) -> object:
    from ui.model_source import ModelKeeper, parse_model_uri

    status = ModelKeeper(parse_model_uri(uri)).refresh()
    if status.model is None:
        raise SystemExit(f"no model at {uri}: {status.problem or 'train one with `make pipeline`'}")
    return status.model.model


def accuracy(
    model: object, images: np.ndarray, labels: np.ndarray, refused: list[int] = ()
) -> float:
    """The share of `images` the model reads right; the `refused` ones count as wrong."""
    predicted = model.probabilities(images.astype(np.float32)).argmax(axis=1)
    predicted[list(refused)] = -1
    return float((predicted == labels).mean())


def photo_input(item: tuple[np.ndarray, int]) -> np.ndarray | None:
    """The photo of one digit (drawn with `seed`) through ui.preprocess; None if it was refused."""
    from ui.preprocess import ImageRejected, prepare

    digit, seed = item
    try:
        return prepare(photo(digit, seed))
    except ImageRejected:
        return None


def photo_inputs(digits: np.ndarray, first_seed: int) -> tuple[np.ndarray, list[int]]:
    """The photos of `digits` through ui.preprocess, on every CPU; indices of those refused."""
    with multiprocessing.get_context("spawn").Pool() as pool:
        results = pool.map(
            photo_input, [(digit, first_seed + index) for index, digit in enumerate(digits)], 50
        )
    refused = [index for index, result in enumerate(results) if result is None]
    blank = np.zeros((28, 28), dtype=np.float32)
    return np.stack([blank if result is None else result for result in results]), refused


def timings(digits: np.ndarray, count: int, repeats: int) -> dict[str, float]:
    """p50 wall and CPU milliseconds of prepare() on `count` 12-megapixel photos, `repeats` times each."""
    from ui.preprocess import prepare

    frame = frame_of(TIMING_MEGAPIXELS)
    photos = [photo(digits[index], 100_000 + index, frame) for index in range(count)]
    prepare(photos[0])  # first use: imports and caches warm
    wall, cpu = [], []
    for _ in range(repeats):
        for data in photos:
            started, started_cpu = time.perf_counter(), time.thread_time()
            prepare(data)
            cpu.append(time.thread_time() - started_cpu)
            wall.append(time.perf_counter() - started)
    return {
        "photos": count,
        "width": frame[0],
        "height": frame[1],
        "mean_mb": sum(map(len, photos)) / count / 1e6,
        "p50_ms": 1000 * statistics.median(wall),
        "p90_ms": 1000 * float(np.percentile(wall, 90)),
        "cpu_p50_ms": 1000 * statistics.median(cpu),
    }


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.preprocessing", description=__doc__)
    add_source_argument(parser)
    parser.add_argument(
        "--model-uri",
        default=None,
        help="the model to score (default: as the page, MODEL_URI or .runs/models/mnist/LATEST)",
    )
    parser.add_argument(
        "--count", type=int, default=10_000, help="test digits photographed (default: all)"
    )
    parser.add_argument("--timing-photos", type=int, default=10, help="12-megapixel photos timed")
    parser.add_argument("--repeats", type=int, default=5, help="times each is timed")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    return parser


def main() -> int:
    args = parse_args().parse_args()
    from ui.model_source import model_uri

    uri = args.model_uri or model_uri()
    _, test = load_mnist(fetch_source(args.source))
    digits, labels = test.x[: args.count], test.y[: args.count]
    load_before = os.getloadavg()[0]
    model = load_model(uri)
    clean = accuracy(model, digits.astype(np.float32) / 255.0, labels)
    inputs, refused = photo_inputs(digits, 0)
    photos = accuracy(model, inputs, labels, refused)
    speed = timings(test.x, args.timing_photos, args.repeats)
    load_after = os.getloadavg()[0]
    results = {
        "model": uri,
        "digits": len(labels),
        "clean_accuracy": clean,
        "photo_accuracy": photos,
        "refused": len(refused),
        **speed,
        "load_average": [load_before, load_after],
        "cpus": os.cpu_count(),
    }
    met = {
        f"photos >= {MIN_PHOTO_ACCURACY:.0%}": photos >= MIN_PHOTO_ACCURACY,
        f"photos within {MAX_GAP * 100:.0f} point of clean": photos >= clean - MAX_GAP,
        f"p50 < {MAX_P50_MS:.0f} ms at {TIMING_MEGAPIXELS:.0f} MP": speed["p50_ms"] < MAX_P50_MS,
    }
    print(f"model: {uri}")
    print(f"clean digits:  {clean:.2%} of {len(labels)}")
    print(f"harder photos: {photos:.2%} of {len(labels)} ({len(refused)} refused)")
    print(
        f"prepare() on {speed['photos']} photos of {speed['width']}x{speed['height']} "
        f"({speed['mean_mb']:.1f} MB JPEG): p50 {speed['p50_ms']:.1f} ms, p90 {speed['p90_ms']:.1f} ms, "
        f"CPU p50 {speed['cpu_p50_ms']:.1f} ms"
    )
    print(f"load average {load_before:.1f} → {load_after:.1f} on {os.cpu_count()} CPUs")
    for target, ok in met.items():
        print(f"  {'met' if ok else 'NOT MET'}: {target}")
    if args.json:
        args.json.write_text(json.dumps({**results, "targets": met}, indent=2) + "\n")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
