"""The steps' tests' tools: run a step in-process, and craft the small hostile files they must refuse."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from steps.lib.entry_point import run
from steps.lib.errors import EXIT_BAD_INPUT, StepError
from steps.lib.registry import LATEST_KEY
from tests.support.project import run_python


def call(module, argv: list, capsys: pytest.CaptureFixture[str]) -> str:
    """Run a step in-process; assert the bad-input contract (exit 2, one line); return that line."""
    code = run(module.main, module.make_parser(), [str(a) for a in argv])
    error = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_INPUT, error
    lines = error.splitlines()
    assert len(lines) == 1, error
    assert lines[0].startswith(f"python -m steps.{module.__name__.split('.')[-1]}: error: ")
    return lines[0]


def refused(function: object, *args: object) -> str:
    """The message of the StepError `function(*args)` raises."""
    with pytest.raises(StepError) as raised:
        function(*args)  # type: ignore[operator]
    return str(raised.value)


def flags(**values: object) -> list[str]:
    """A step's command-line flags from keywords: `models_dir=path` gives `["--models-dir", str(path)]`."""
    return [
        part
        for name, value in values.items()
        for part in (f"--{name.replace('_', '-')}", str(value))
    ]


def split_argv(source: Path | str, out: Path, *extra: object, workers: int = 2) -> list:
    """split's flags: `workers` shards of `source` into out/shards, its test digits to out/test.npz."""
    shards = flags(source=source, workers=workers, shards_dir=out / "shards")
    return [*shards, *flags(test_out=out / "test.npz"), *extra]


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@functools.cache
def model_file() -> Path:
    """init's model file (the one Keras writes, tests/test_init.py), made once per test process."""
    from steps import init
    from steps.lib.model_file import write_model_file

    folder = Path(tempfile.mkdtemp(prefix="model-"))
    atexit.register(shutil.rmtree, folder, True)
    weights = init.initial_weights(0)
    write_model_file(folder / "model.h5", init.new_model_file(weights), weights)
    return folder / "model.h5"


def copy_model(target: Path) -> Path:
    shutil.copyfile(model_file(), target)
    return target


def weight_paths(path: Path) -> list[str]:
    """The HDF5 paths of a model file's weights, in model order."""
    with h5py.File(path, "r") as handle:
        group = handle["model_weights"]
        paths = []
        for layer in group.attrs["layer_names"]:
            layer = layer.decode() if isinstance(layer, bytes) else layer
            for weight in group[layer].attrs["weight_names"]:
                weight = weight.decode() if isinstance(weight, bytes) else weight
                paths.append(f"model_weights/{layer}/{weight}")
    return paths


def write_model_weights(path: Path, weights: list[np.ndarray]) -> Path:
    """Overwrite a model file's weights in place (h5py), as a forger would."""
    with h5py.File(path, "r+") as handle:
        for name, value in zip(weight_paths(path), weights, strict=True):
            handle[name][...] = value
    return path


def digits(n: int = 8, dtype=np.uint8, shape=(28, 28), labels=None) -> dict[str, np.ndarray]:
    y = np.arange(n) % 10 if labels is None else labels
    return {"x": np.zeros((n, *shape), dtype=dtype), "y": np.asarray(y, dtype=np.uint8)}


def write_npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def npy_header(shape: tuple[int, ...], dtype: str = "|u1") -> bytes:
    """An .npy version 1.0 header declaring `shape` (its data is up to the caller)."""
    text = repr({"descr": dtype, "fortran_order": False, "shape": shape})
    padding = 64 - (10 + len(text) + 1) % 64
    text = text + " " * padding + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def zip_member(name: str, data: bytes, method: int, size: int, crc: int, offset: int) -> tuple:
    """A zip member's local header and data, and its central directory entry."""
    encoded = name.encode()
    head = (20, 0, method, 0, 0, crc, len(data), size, len(encoded), 0)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, *head) + encoded + data
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *head, 0, 0, 0, 0, offset)
    return local, entry + encoded


def zip_end(entries: int, central: bytes, local: bytes) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, entries, entries, len(central), len(local), 0)


def raw_zip(path: Path, members: dict[str, tuple]) -> Path:
    """A zip written by hand: {name: (deflated or stored bytes, method, size declared[, crc])}."""
    local, central = b"", b""
    for name, (data, method, size, *crc) in members.items():
        crc = crc[0] if crc else zlib.crc32(data)
        member, entry = zip_member(name, data, method, size, crc, len(local))
        local, central = local + member, central + entry
    path.write_bytes(local + central + zip_end(len(members), central, local))
    return path


def zip_bomb_npz(path: Path, rows: int) -> Path:
    """An .npz whose images declare (rows, 28, 28) zeros: ~1000x smaller on disk than in memory."""
    header = npy_header((rows, 28, 28))
    block = bytes(1 << 20)
    size = rows * 28 * 28
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    segment = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    whole, rest = divmod(size, len(block))
    crc = zlib.crc32(header)
    for _ in range(whole):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(bytes(rest), crc)
    data = body + segment * whole + compressor.compress(bytes(rest)) + compressor.flush()
    labels = npy_header((rows,)) + bytes(1)  # declared big, holds one byte: never read that far
    return raw_zip(
        path,
        {
            "x.npy": (data, zipfile.ZIP_DEFLATED, len(header) + size, crc),
            "y.npy": (labels, zipfile.ZIP_STORED, len(labels)),
        },
    )


def corrupt_deflate_npz(path: Path) -> Path:
    """A compressed .npz whose deflate stream is damaged mid-way (zlib.error when inflated)."""
    np.savez_compressed(path, **digits(200, labels=np.arange(200) % 10))
    data = bytearray(path.read_bytes())
    start = data.index(b"x.npy") + len(b"x.npy") + 40
    data[start : start + 64] = bytes([0xFF]) * 64
    path.write_bytes(bytes(data))
    return path


def peak_memory_mb(code: str) -> tuple[float, str]:
    """Run `code` in a fresh interpreter: its peak resident memory in MB (VmHWM), and its stdout."""
    peak = "re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]"
    probe = f"{code}\nimport re\nprint({peak})"
    result = run_python(probe)
    assert result.returncode == 0, result.stderr
    *lines, peak_kb = result.stdout.strip().splitlines()
    return int(peak_kb) / 1024, "\n".join(lines)


def json_nested(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value))
    return path


def shared_heap_names(path: Path, references: int, heap_bytes: int) -> Path:
    """Make layer_names `references` 16-byte descriptors of one `heap_bytes` global-heap object:
    small on disk, `references` times that object when read (each descriptor after the first forged)."""
    short = [f"n{index:03d}" for index in range(1, references)]
    with h5py.File(path, "r+") as handle:
        handle["model_weights"].attrs.create(
            "layer_names", ["x" * heap_bytes, *short], dtype=h5py.string_dtype()
        )
    data = bytearray(path.read_bytes())
    first = struct.pack("<I", heap_bytes)
    start = data.find(first)
    while data[start + 16 : start + 20] != struct.pack("<I", len(short[0])):
        start = data.find(first, start + 1)
    descriptor = data[start : start + 16]
    for index in range(1, references):
        data[start + 16 * index : start + 16 * (index + 1)] = descriptor
    path.write_bytes(bytes(data))
    return path


def wide_directory_npz(path: Path, entries: int) -> Path:
    """A one-member .npz whose central directory repeats that member `entries` times (51 bytes each,
    about 600 for zipfile); the end record claims one entry, zipfile reads the directory's bytes."""
    array = npy_header((8,)) + bytes(8)
    local, entry = zip_member("x.npy", array, zipfile.ZIP_STORED, len(array), zlib.crc32(array), 0)
    central = entry * entries
    path.write_bytes(local + central + zip_end(1, central, local))
    return path


FULL_RUN = "mnist-full1"
MNIST_TEST_SET = {"test_samples": 10_000, "test_sha256": "5" * 64}  # as evaluate records it


def publish_as(
    tmp_path: Path,
    run_id: str,
    accuracy: float,
    *extra: str,
    capsys: pytest.CaptureFixture[str],
    **metrics: object,
) -> tuple[int, str, str, str]:
    """Publish a model scoring `accuracy` (`metrics` added) as `run_id` into tmp_path/store: exit
    code, stderr, and the served and reason outputs."""
    from steps import publish

    folder = tmp_path / run_id
    folder.mkdir(exist_ok=True)
    out = folder / "out"
    scored = write_json(folder / "metrics.json", MNIST_TEST_SET | metrics | {"accuracy": accuracy})
    argv = flags(store=tmp_path / "store", run=run_id, model=copy_model(folder / "model.h5"))
    argv += flags(metrics=scored, served_out=out / "served.txt", reason_out=out / "reason.txt")
    for output in out.glob("*.txt"):
        output.unlink()
    code = run(publish.main, publish.make_parser(), [*argv, *extra])
    served, reason = (
        path.read_text() if path.exists() else ""
        for path in (out / "served.txt", out / "reason.txt")
    )
    return code, capsys.readouterr().err, served, reason


def latest(tmp_path: Path) -> str:
    """The run tmp_path/store's LATEST names."""
    return (tmp_path / "store" / LATEST_KEY).read_text()


def task_args(workflow: dict, task: str, outputs: dict[str, str] | None = None) -> list[str]:
    """`task`'s container args with their tags filled in by the local runner's own functions, in run
    mnist-abc12; `outputs`: the `tasks.*.outputs.parameters.*` values the task reads."""
    from workflows.local import plan, spec

    read = spec.read(workflow | {"metadata": {"name": "mnist-abc12"}})
    dag = plan.read_dag(read.entry)
    [(_, arguments)] = plan.expand(dag.tasks[task], read.globals | (outputs or {}))
    inputs = {f"inputs.parameters.{name}": value for name, value in arguments.items()}
    template = read.steps[dag.tasks[task]["template"]].template
    return spec.substitute(template["container"]["args"], read.globals | inputs, task)
