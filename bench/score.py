"""Score saved models of the project's architecture on MNIST's 10000 test digits; one JSON object out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from steps.lib.mnist import fetch_source, load_mnist


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.score", description=__doc__)
    parser.add_argument("--source", required=True, help="mnist.npz: path, URL or gs:// URI")
    parser.add_argument("models", type=Path, nargs="+", help=".h5 files")
    return parser


def main(args: argparse.Namespace) -> None:
    _, test = load_mnist(fetch_source(args.source))

    from steps.lib.keras_model import compile_model, load_model, to_inputs

    test_x = to_inputs(test.x)
    scores = {}
    for path in args.models:
        model = compile_model(load_model(path), learning_rate=1e-3)
        scores[str(path)] = model.evaluate(test_x, test.y, batch_size=1000, verbose=0)[1]
    print(json.dumps(scores))


if __name__ == "__main__":
    from steps.lib.entry_point import run

    sys.exit(run(main, make_parser()))
