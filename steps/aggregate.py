"""Average the workers' models into one (FedAvg: weights weighted by each worker's sample count)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from steps.averaging import federated_average
from steps.cli import StepError, non_negative_int, run, write_text


def parse_args() -> argparse.ArgumentParser:
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
        help="JSON list of the shard ids that should have delivered a model (default: those present)",
    )
    parser.add_argument(
        "--min-workers",
        type=non_negative_int,
        default=0,
        help="average when at least this many models are present; 0 = every shard (default: 0)",
    )
    parser.add_argument(
        "--missing-out", type=Path, help="write the JSON list of missing shards here"
    )
    return parser


def expected_shards(text: str | None, present: list[str]) -> list[str]:
    if text is None:
        return present
    try:
        shards = json.loads(text)
    except ValueError:
        shards = None
    if not isinstance(shards, list):
        raise StepError(f"--shards must be a JSON list of shard ids, got {text!r}")
    return [str(shard) for shard in shards]


def sample_count(stats_path: Path) -> int:
    """The `samples` field of a worker's stats file."""
    if not stats_path.is_file():
        raise StepError(f"stats file not found: {stats_path} (written by train beside its model)")
    try:
        samples = json.loads(stats_path.read_text())["samples"]
    except (ValueError, KeyError, TypeError):
        raise StepError(f"{stats_path}: not a stats file with a 'samples' count") from None
    if not isinstance(samples, int) or samples < 1:
        raise StepError(f"{stats_path}: 'samples' must be a positive integer, got {samples!r}")
    return samples


def main(args: argparse.Namespace) -> None:
    if not args.models_dir.is_dir() and args.shards is None:
        raise StepError(f"models folder not found: {args.models_dir}")
    paths = sorted(args.models_dir.glob("*.h5"))  # no folder: no worker delivered
    expected = expected_shards(args.shards, [path.stem for path in paths])
    missing = [shard for shard in expected if not (args.models_dir / f"{shard}.h5").is_file()]
    needed = args.min_workers or len(expected)
    if len(paths) < max(needed, 1):
        if not paths and not expected:
            raise StepError(f"no .h5 models in {args.models_dir}")
        raise StepError(
            f"only {len(paths)} of {len(expected)} workers delivered a model, fewer than the "
            f"{needed} required; missing shards: {', '.join(missing)}"
        )
    counts = [sample_count(path.with_suffix(".json")) for path in paths]

    from steps.model import load_model, save_model

    models = [load_model(path) for path in paths]
    averaged = models[0]
    averaged.set_weights(federated_average([model.get_weights() for model in models], counts))
    save_model(averaged, args.out)
    if args.missing_out:
        write_text(args.missing_out, json.dumps(missing))
    if missing:
        print(
            f"going ahead without shards {', '.join(missing)} (--min-workers {needed})",
            file=sys.stderr,
        )
    shares = ", ".join(f"{path.name}: {count}" for path, count in zip(paths, counts, strict=True))
    print(
        f"averaged {len(paths)} models weighted by samples ({shares}) → {args.out}", file=sys.stderr
    )


if __name__ == "__main__":
    sys.exit(run(main, parse_args()))
