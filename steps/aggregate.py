"""Average the workers' models into one (FedAvg: weights weighted by each shard's digit count).

Only h5py and numpy: every model file is checked against the known architecture's weight layout
(steps.lib.model_file), averaged, and written as a full Keras model. A model counts only with its stats file
(train writes it last, as its commit record): Argo saves a failed attempt's outputs too, so a model
without valid stats is treated as missing. Only the expected shards' models are averaged, weighed by
the digit counts split recorded (--shards {id: count}); a worker whose stats claim another count is
not counted, and any other model in the folder is ignored.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from steps.lib.arguments import add_pipeline_flag, non_negative_int
from steps.lib.averaging import federated_average
from steps.lib.bounded_json import parse_json, read_json_file
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.mnist import MAX_SAMPLES
from steps.lib.model_file import read_model_file, write_model_file
from steps.lib.staged_outputs import staged_outputs

MAX_SHARDS = 10_000
MAX_STATS_BYTES = 64 << 10


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.aggregate", description=__doc__)
    parser.add_argument(
        "--models-dir",
        type=Path,
        required=True,
        help="folder of <shard>.h5 models, each with its <shard>.json from train",
    )
    parser.add_argument("--out", type=Path, required=True, help="the averaged model to write (.h5)")
    parser.add_argument(
        "--shards",
        help="the shards that should have delivered a model: a JSON object {id: digits in the "
        "shard}, as split's --sizes-out writes it, whose counts weigh the models; or a JSON list "
        "of ids, the models then weighed by their stats (default: the models present)",
    )
    add_pipeline_flag(
        parser,
        "--min-workers",
        "average when at least this many models are present; 0 = every shard",
        type=non_negative_int,
    )
    parser.add_argument(
        "--missing-out",
        type=Path,
        help="write the missing shards' ids here, comma-separated (empty when none is missing)",
    )
    return parser


def expected_shards(text: str | None, present: list[str]) -> dict[str, int | None]:
    """The expected shards and, when split's counts are given, each one's digit count."""
    if text is None:
        return dict.fromkeys(present)
    shards = parse_json(text, "--shards")
    if isinstance(shards, dict):
        if not all(type(size) is int and 1 <= size <= MAX_SAMPLES for size in shards.values()):
            raise StepError(f"--shards: digit counts are integers in 1..{MAX_SAMPLES}")
        sizes: dict[str, int | None] = dict(shards)
    elif isinstance(shards, list):
        if not all(type(shard) in (int, str) for shard in shards):
            raise StepError(f"--shards: shard ids are numbers or text, got {text[:80]!r}")
        sizes = dict.fromkeys(map(str, shards))
    else:
        raise StepError(f"--shards must be a JSON list or object of shard ids, got {text[:80]!r}")
    if len(sizes) > MAX_SHARDS or not all(str(shard).isalnum() for shard in sizes):
        raise StepError(f"--shards: at most {MAX_SHARDS} ids of letters and digits")
    return sizes


def sample_count(stats_path: Path) -> int:
    """The `samples` field of a worker's stats file: an integer in 1..MAX_SAMPLES."""
    if not stats_path.is_file():
        raise StepError(f"stats file not found: {stats_path} (written by train after its model)")
    stats = read_json_file(stats_path, "stats file", MAX_STATS_BYTES)
    samples = stats.get("samples") if isinstance(stats, dict) else None
    if type(samples) is not int or not 1 <= samples <= MAX_SAMPLES:
        raise StepError(
            f"{stats_path}: 'samples' must be an integer in 1..{MAX_SAMPLES}, got {str(samples)[:40]}"
        )
    return samples


def list_models(folder: Path) -> dict[str, Path]:
    """The .h5 files in `folder` by shard id; no folder means no worker delivered."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except FileNotFoundError:
        return {}
    except OSError as error:  # e.g. argoexec's 0700 root-owned input folder, read by uid 10001
        raise StepError(
            f"cannot read the models folder {folder}: {error.strerror} "
            f"(the step runs as uid {os.getuid()})"
        ) from None
    return {
        name.removesuffix(".h5"): folder / name
        for name in names
        if name.endswith(".h5") and not name.startswith(".")
    }


def committed(
    paths: dict[str, Path], sizes: dict[str, int | None]
) -> tuple[dict[str, tuple[Path, int]], dict[str, str]]:
    """The expected shards' models with valid stats, {shard: (path, weight)}, and why the others do
    not count. The weight is split's digit count when known, and the stats must agree with it."""
    counted, ignored = {}, {}
    for shard, size in sizes.items():
        if shard not in paths:
            continue
        try:
            samples = sample_count(paths[shard].with_suffix(".json"))
            if size is not None and samples != size:
                raise StepError(f"its stats claim {samples} samples; split made {size}")
            counted[shard] = (paths[shard], samples)
        except StepError as error:
            ignored[shard] = str(error)
    return counted, ignored


def main(args: argparse.Namespace) -> None:
    if not args.models_dir.is_dir() and args.shards is None:
        raise StepError(f"models folder not found: {args.models_dir}")
    with staged_outputs() as outputs:
        model_out = outputs.file(args.out)
        missing_out = outputs.file(args.missing_out) if args.missing_out else None
        paths = list_models(args.models_dir)
        expected = expected_shards(args.shards, list(paths))
        counted, ignored = committed(paths, expected)
        missing = [shard for shard in expected if shard not in counted]
        needed = args.min_workers or len(expected)
        if len(counted) < max(needed, 1):
            if not paths and not expected:
                raise StepError(f"no .h5 models in {args.models_dir}")
            why = "".join(f"; {shard}.h5 does not count: {ignored[shard]}" for shard in ignored)
            raise StepError(
                f"only {len(counted)} of {len(expected)} workers delivered a model, fewer than the "
                f"{needed} required; missing shards: {', '.join(missing)}{why}"
            )
        for shard, reason in ignored.items():
            print(f"ignoring {shard}.h5 as missing: {reason}", file=sys.stderr)
        for shard in sorted(set(paths) - set(expected)):
            print(f"ignoring {shard}.h5: not one of the expected shards", file=sys.stderr)
        shards = sorted(counted)
        models = [read_model_file(counted[shard][0]) for shard in shards]
        counts = [counted[shard][1] for shard in shards]
        averaged = federated_average([model.weights for model in models], counts)
        write_model_file(model_out, models[0], averaged)
        if missing_out:
            missing_out.write_text(",".join(missing))
    if missing:
        print(
            f"going ahead without shards {', '.join(missing)} (--min-workers {needed})",
            file=sys.stderr,
        )
    shares = ", ".join(f"{shard}.h5: {counted[shard][1]}" for shard in shards)
    print(
        f"averaged {len(shards)} models weighted by their shards' digits ({shares}) → {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
