"""Write the shared starting model: every worker of round 1 starts from these weights."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from steps.cli import run, seed


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.init", description=__doc__)
    parser.add_argument(
        "--seed", type=seed, default=0, help="weight initialisation seed (default: 0)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the model file to write (.h5)")
    return parser


def main(args: argparse.Namespace) -> None:
    from steps.model import build_model, keras, save_model

    keras.utils.set_random_seed(args.seed)
    model = build_model()
    save_model(model, args.out)
    print(
        f"initial model ({model.count_params()} weights, seed {args.seed}) → {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(run(main, parse_args()))
