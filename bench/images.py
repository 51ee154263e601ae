"""python -m bench.images: what each image costs a node that has not got it, measured with podman (or docker).

- size: uncompressed (the engine's size of the image) and compressed, each layer gzip-compressed as a
  registry stores and sends it (`podman save --compress --format docker-dir`: the layer sizes of the
  image's manifest), and the layers two images share (a node holding one fetches only the rest of the other);
- unpack: `podman pull dir:DIR` of that copy into an empty, throwaway storage: what a node does with the
  layers once they have arrived (decompress, check, write), without the network; the fastest of three;
- start: for each step and each image that can run it, the wall time from `podman run --rm` to the
  container's exit, the image present: the container made and started, Python and the step's imports, its
  `--help` printed (train: TensorFlow loaded as the trainer loads it); the work after that is the same code
  in either image. The median of --repeat runs.

Writes bench/images.json (the plan reads it: bench/plan.py) and prints the tables. Build the images first
(`make images`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMAGES_JSON = Path(__file__).resolve().parent / "images.json"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGES = {
    "steps": f"mnist-argo-steps:{VERSION}",
    "train": f"mnist-argo-train:{VERSION}",
    "page": f"mnist-argo-page:{VERSION}",
}
LIGHT_STEPS = ("split", "init", "aggregate", "evaluate", "publish")
# Which images run which step: the light one the five steps that do not train; the TensorFlow one all six.
RUNS_ON = {"steps": LIGHT_STEPS, "train": (*LIGHT_STEPS, "train")}
PYTHON_ALONE = "python alone"  # `python -c pass`: the container and the interpreter, no step
ENGINE_TIMEOUT_SECONDS = 600
UNPACK_TRIES = 3


class ImageError(RuntimeError):
    """The engine or an image is missing: one line for the user."""


def engine_program() -> str:
    found = subprocess.run(
        [str(ROOT / "infra" / "docker" / "engine.sh")], capture_output=True, text=True
    )
    if found.returncode != 0:
        raise ImageError(found.stderr.strip() or "no container engine")
    return found.stdout.strip()


def engine_run(
    engine: str, *args: str, storage: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    command = [engine, *storage, *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_SECONDS
        )
    except FileNotFoundError:
        raise ImageError(f"the container engine {engine!r} is not installed") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ImageError(f"{' '.join(command[:4])}: {last}")
    return done


def compressed_layers(engine: str, image: str, folder: Path) -> list[dict[str, Any]]:
    """The image saved with gzip-compressed layers into `folder` (the `dir` transport, as a registry
    receives a push); its manifest's layers (digest, compressed size)."""
    engine_run(
        engine, "save", "--compress", "--format", "docker-dir", "--output", str(folder), image
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    for layer in manifest["layers"]:
        if not layer["mediaType"].endswith("gzip"):
            raise ImageError(f"{image}: a layer is not gzip-compressed: {layer['mediaType']}")
    return [{"digest": layer["digest"], "bytes": layer["size"]} for layer in manifest["layers"]]


def unpack_seconds(engine: str, folder: Path) -> float:
    """`pull dir:folder` into an empty storage of the engine's own driver: decompress and write."""
    driver = engine_run(engine, "info", "--format", "{{.Store.GraphDriverName}}").stdout.strip()
    scratch = Path(tempfile.mkdtemp(prefix="bench-images-", dir="/var/tmp"))
    storage = ["--root", str(scratch / "root"), "--runroot", str(scratch / "run")]
    storage += ["--storage-driver", driver or "overlay"]
    try:
        started = time.monotonic()
        engine_run(engine, "pull", "--quiet", f"dir:{folder}", storage=storage)
        return time.monotonic() - started
    finally:  # the throwaway storage only: never `system reset`, which a typo would aim at the real one
        shutil.rmtree(scratch, ignore_errors=True)


def start_seconds(engine: str, image: str, command: Sequence[str], repeat: int) -> float:
    """Median wall time from `run --rm` to the container's exit, as a step's pod would run it."""
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        engine_run(engine, "run", "--rm", "--read-only", "--network", "none", image, *command)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def start_command(step: str) -> list[str]:
    """What a step runs before its work: its module and imports (`--help`); for train, which parses its
    arguments before it loads TensorFlow, the import of the network module that loads it."""
    if step == PYTHON_ALONE:
        return ["python", "-c", "pass"]
    if step == "train":
        return ["python", "-c", "import steps.lib.keras_model"]
    return ["python", "-m", f"steps.{step}", "--help"]


def measure_image(engine: str, image: str, unpack: bool) -> dict[str, Any]:
    uncompressed = int(
        engine_run(engine, "image", "inspect", "--format", "{{.Size}}", image).stdout
    )
    base = engine_run(
        engine, "image", "inspect", "--format", '{{index .Labels "mnist-argo.base"}}', image
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-images-") as folder:
        saved = Path(folder) / "image"
        layers = compressed_layers(engine, image, saved)
        record = {
            "image": image,
            "base": base,
            "bytes": uncompressed,
            "compressed_bytes": sum(layer["bytes"] for layer in layers),
            "layers": layers,
        }
        if unpack:  # the fastest of a few: this machine is shared, a node's disk is its own
            tries = [unpack_seconds(engine, saved) for _ in range(UNPACK_TRIES)]
            record["unpack_seconds"] = round(min(tries), 2)
    return record


def shared_bytes(first: Mapping[str, Any], second: Mapping[str, Any]) -> int:
    """Compressed bytes of the layers both images hold (a node fetches them once)."""
    theirs = {layer["digest"] for layer in second["layers"]}
    return sum(layer["bytes"] for layer in first["layers"] if layer["digest"] in theirs)


def measure_all(engine: str, repeat: int, images: Mapping[str, str] = IMAGES) -> dict[str, Any]:
    sizes = {
        key: measure_image(engine, image, unpack=key in RUNS_ON) for key, image in images.items()
    }
    starts: dict[str, dict[str, float]] = {}
    for key in RUNS_ON:
        for step in (PYTHON_ALONE, *RUNS_ON[key]):
            seconds = start_seconds(engine, images[key], start_command(step), repeat)
            starts.setdefault(step, {})[key] = round(seconds, 2)
    return {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "engine": Path(engine).name,
        "cpu_count": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "repeat": repeat,
        "images": sizes,
        "shared_bytes": {"steps+train": shared_bytes(sizes["steps"], sizes["train"])},
        "starts": starts,
    }


def megabytes(value: float) -> str:
    return f"{value / 1e6:.0f} MB"


def report(results: Mapping[str, Any]) -> str:
    """Two markdown tables: the images' sizes, and the steps' start to exit in each image."""
    lines = [
        "| Image | Uncompressed | Compressed (what a registry sends) | Layers | Unpack here |",
        "|---|---|---|---|---|",
    ]
    for record in results["images"].values():
        unpack = record.get("unpack_seconds")
        lines.append(
            f"| `{record['image']}` | {megabytes(record['bytes'])} | "
            f"{megabytes(record['compressed_bytes'])} | {len(record['layers'])} | "
            + ("" if unpack is None else f"{unpack:.1f} s")
            + " |"
        )
    shared = results["shared_bytes"]["steps+train"]
    lines += [
        "",
        f"The steps and train images share {megabytes(shared)} of compressed layers (the base and the "
        "user); a node holding one fetches only the rest of the other.",
        "",
        f"| Step's start (`--help`; train: TensorFlow loaded), median of {results['repeat']} | "
        + " | ".join(f"`{results['images'][key]['image']}`" for key in RUNS_ON)
        + " |",
        "|---" * (1 + len(RUNS_ON)) + "|",
    ]
    for step, by_image in results["starts"].items():
        cells = [f"{by_image[key]:.2f} s" if key in by_image else "" for key in RUNS_ON]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.images", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs of each step (default: 5)")
    parser.add_argument("--out", type=Path, default=IMAGES_JSON, help="where to write the results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.repeat < 1:
        print("python -m bench.images: --repeat must be at least 1", file=sys.stderr)
        return 2
    try:
        results = measure_all(engine_program(), args.repeat)
    except (ImageError, subprocess.TimeoutExpired) as error:
        print(
            f"python -m bench.images: {error} (build the images with `make images`)",
            file=sys.stderr,
        )
        return 2
    temporary = args.out.with_name(f".{args.out.name}.tmp")
    temporary.write_text(json.dumps(results, indent=2) + "\n")
    temporary.replace(args.out)
    print(report(results), end="")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
