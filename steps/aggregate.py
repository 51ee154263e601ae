"""Average the workers' models into one (FedAvg: weights weighted by each worker's sample count)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from steps.averaging import federated_average
from steps.cli import StepError, run


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.aggregate", description=__doc__)
    parser.add_argument(
        "--models-dir",
        type=Path,
        required=True,
        help="folder of <shard>.h5 models, each with its <shard>.json from train",
    )
    parser.add_argument("--out", type=Path, required=True, help="the averaged model to write (.h5)")
    return parser


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
    if not args.models_dir.is_dir():
        raise StepError(f"models folder not found: {args.models_dir}")
    paths = sorted(args.models_dir.glob("*.h5"))
    if not paths:
        raise StepError(f"no .h5 models in {args.models_dir}")
    counts = [sample_count(path.with_suffix(".json")) for path in paths]

    from steps.model import load_model, save_model

    models = [load_model(path) for path in paths]
    averaged = models[0]
    averaged.set_weights(federated_average([model.get_weights() for model in models], counts))
    save_model(averaged, args.out)
    shares = ", ".join(f"{path.name}: {count}" for path, count in zip(paths, counts, strict=True))
    print(
        f"averaged {len(paths)} models weighted by samples ({shares}) → {args.out}", file=sys.stderr
    )


if __name__ == "__main__":
    sys.exit(run(main, parse_args()))
