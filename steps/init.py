"""Write the shared starting model: every worker of round 1 starts from these weights; and the run's
training history before its first round (steps.lib.history), which each round's aggregate adds to.

No TensorFlow: the file is written with h5py as Keras writes it (steps.lib.architecture's model_config,
steps.lib.model_file's layout), and its weights are drawn as Keras initialises this network, from `--seed`:
Glorot-uniform kernels, zero biases.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from pathlib import Path

import numpy as np

from steps.lib.architecture import BACKEND, KERAS_VERSION, MODEL_CONFIG_JSON, WEIGHT_GROUPS
from steps.lib.arguments import add_pipeline_flag, seed
from steps.lib.bounded_json import to_json
from steps.lib.entry_point import run
from steps.lib.history import new_history
from steps.lib.model_file import WEIGHT_DTYPE, WEIGHT_LAYOUT, ModelFile, write_model_file
from steps.lib.staged_outputs import staged_outputs


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.init", description=__doc__)
    add_pipeline_flag(parser, "--seed", "weight initialisation seed", type=seed)
    parser.add_argument("--out", type=Path, required=True, help="the model file to write (.h5)")
    parser.add_argument(
        "--history-out",
        type=Path,
        help="also write the run's history as it starts, no round yet (JSON), with its start time",
    )
    return parser


def glorot_limit(shape: tuple[int, ...]) -> float:
    """Keras's GlorotUniform bound, sqrt(6 / (fan_in + fan_out)); a kernel's receptive field counts
    in both fans (keras.src.initializers.random_initializers.compute_fans)."""
    receptive_field = math.prod(shape[:-2])
    return math.sqrt(6 / (receptive_field * (shape[-2] + shape[-1])))


def initial_weights(seed: int) -> list[np.ndarray]:
    """Every weight in model order: kernels uniform in ±glorot_limit, biases zero; the same for a seed."""
    rng = np.random.default_rng(seed)
    weights = []
    for _, name, shape in WEIGHT_LAYOUT:
        if name == "kernel":
            limit = glorot_limit(shape)
            weights.append(rng.uniform(-limit, limit, size=shape).astype(WEIGHT_DTYPE))
        else:
            weights.append(np.zeros(shape, WEIGHT_DTYPE))
    return weights


def new_model_file(weights: list[np.ndarray]) -> ModelFile:
    """The architecture's model file, as Keras would save a fresh build_model() holding `weights`."""
    return ModelFile(
        attributes={
            "keras_version": KERAS_VERSION,
            "backend": BACKEND,
            "model_config": MODEL_CONFIG_JSON,
        },
        layers=[(layer, list(paths)) for layer, paths in WEIGHT_GROUPS],
        weights=weights,
    )


def main(args: argparse.Namespace) -> None:
    weights = initial_weights(args.seed)
    with staged_outputs() as outputs:
        model_out = outputs.file(args.out)
        history_out = outputs.file(args.history_out) if args.history_out else None
        write_model_file(model_out, new_model_file(weights), weights)
        if history_out:
            history_out.write_text(to_json(new_history(dt.datetime.now(dt.UTC))))
    count = sum(array.size for array in weights)
    print(f"initial model ({count} weights, seed {args.seed}) → {args.out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
